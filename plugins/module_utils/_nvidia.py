# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA GPU inventory from NVML (nvidia-ml-py) or nvidia-smi, and the checks on it.

PRIVATE: for this collection's modules only.
"""

from __future__ import annotations

import re

QUERY_FIELDS = ("index", "name", "uuid", "compute_cap", "memory.total", "driver_version", "pci.bus_id")

MISMATCH = "Driver/library version mismatch"
NO_DRIVER = "couldn't communicate with the NVIDIA driver"


KERNEL_DRIVER_RE = re.compile(r"Kernel Module(?: for \S+)?\s+([0-9][0-9.]+)")


class GpuError(Exception):
    """A failure with the message the user should see (what is wrong and what to do)."""


def parse_kernel_driver_version(text):
    """The kernel driver's version from /proc/driver/nvidia/version ('' when there is none)."""
    found = KERNEL_DRIVER_RE.search(text)
    return found.group(1) if found else ""


def explain_failure(text, source):
    """Turn nvidia-smi/NVML failure output into a message naming what to do."""
    if MISMATCH in text:
        library = re.search(r"NVML library version:\s*([0-9.]+)", text)
        return (
            "%s: Driver/library version mismatch: the NVIDIA userspace in this container%s differs from the "
            "kernel driver of the node. Install the node driver's exact version in the container "
            "(gpulxc.sglang.pct_container with pct_container_driver_install: true)."
            % (source, " (" + library.group(1) + ")" if library else "")
        )
    if NO_DRIVER in text or "NVML Shared Library Not Found" in text or "Driver Not Loaded" in text:
        return (
            "%s: no NVIDIA driver visible here (%s). Is GPU passthrough configured (devN entries for "
            "/dev/nvidia*, nvidiactl, nvidia-uvm; gpulxc.sglang.pct_container) and the node's driver loaded?"
            % (source, text.strip().splitlines()[0] if text.strip() else "no output")
        )
    return None


def parse_query_csv(text):
    """Rows of `nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv,noheader` into GPU dicts."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(QUERY_FIELDS):
            raise GpuError("nvidia-smi: unexpected query output line: %s" % line)
        row = dict(zip(QUERY_FIELDS, cells))  # noqa: B905 (lengths checked above; no strict= before Python 3.10)
        memory = re.match(r"(\d+)", row["memory.total"])
        gpus.append(
            {
                "index": int(row["index"]),
                "name": row["name"],
                "uuid": row["uuid"],
                "compute_capability": row["compute_cap"],
                "memory_total_mib": int(memory.group(1)) if memory else None,
                "driver_version": row["driver_version"],
                "pci_bus_id": row["pci.bus_id"],
            }
        )
    return gpus


def parse_cuda_version(text):
    """The CUDA version the driver supports, from plain `nvidia-smi` or `nvidia-smi -q` output."""
    match = re.search(r"CUDA Version\s*:\s*([0-9]+\.[0-9]+)", text)
    return match.group(1) if match else None


def version_tuple(version):
    return tuple(int(p) for p in re.findall(r"\d+", str(version)))


def check(gpus, driver_version, *, compute_capabilities=None, count=None, min_count=None, min_driver=None):
    """Every failed requirement, as messages that name the GPU and what was asked."""
    errors = []
    wanted = [str(c) for c in compute_capabilities or []]
    if wanted:
        for gpu in gpus:
            if gpu["compute_capability"] not in wanted:
                errors.append(
                    "GPU %d (%s, %s) has compute capability %s; required: %s"
                    % (gpu["index"], gpu["name"], gpu["pci_bus_id"], gpu["compute_capability"], ", ".join(wanted))
                )
    if count is not None and len(gpus) != count:
        errors.append("found %d GPU(s), exactly %d required" % (len(gpus), count))
    if min_count is not None and len(gpus) < min_count:
        errors.append("found %d GPU(s), at least %d required" % (len(gpus), min_count))
    if min_driver and driver_version and version_tuple(driver_version) < version_tuple(min_driver):
        errors.append(
            "driver %s is older than the required %s (CUDA 13 needs R580 or newer): update the node's "
            "driver and the container's userspace together" % (driver_version, min_driver)
        )
    return errors


def from_nvml(pynvml):
    """GPUs, driver version and CUDA driver version through NVML (nvidia-ml-py)."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        text = str(exc)
        raise GpuError(explain_failure(text, "NVML") or "NVML: %s" % text) from None
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            gpus.append(
                {
                    "index": index,
                    "name": _text(pynvml.nvmlDeviceGetName(handle)),
                    "uuid": _text(pynvml.nvmlDeviceGetUUID(handle)),
                    "compute_capability": "%d.%d" % (major, minor),
                    "memory_total_mib": pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024),
                    "driver_version": driver,
                    "pci_bus_id": _text(pynvml.nvmlDeviceGetPciInfo(handle).busId),
                }
            )
    finally:
        pynvml.nvmlShutdown()
    return gpus, driver, "%d.%d" % (cuda // 1000, (cuda % 1000) // 10)


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


def normalize_bus_id(bus_id):
    """NVML gives 00000000:00:06.0 (older versions 0000:00:06.0); nvidia-smi gives 00000000:00:06.0."""
    domain, _sep, rest = bus_id.partition(":")
    return "%08X:%s" % (int(domain, 16), rest.upper()) if rest else bus_id
