#!/usr/bin/python3
# gpulxc-lab: stand-in `nvidia-smi` (test infrastructure, not NVIDIA's), installed by the stand-in
# NVIDIA-Linux-x86_64-<version>.run. It behaves like the real tool where the project depends on it:
# - lists only GPUs whose /dev/nvidiaN opens with ENXIO (passed through, no driver in the lab);
#   a node that is missing or refused (EPERM) is not a GPU this process can use;
# - honours CUDA_VISIBLE_DEVICES (indexes) as the lab's GPUs are simulated per process;
# - reports RTX PRO 6000 Blackwell (compute capability 12.0) and its userspace version;
# - fails like NVML when the kernel driver (the lab node's simulated one) differs from this
#   userspace ("Driver/library version mismatch") or is missing.
import errno
import os
import sys
import uuid

USERSPACE = "@VERSION@"
DRIVER_FILES = ("/proc/driver/nvidia/version",)
NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
MEMORY_MIB = 97887
CUDA = "13.0"


def kernel_version():
    for path in DRIVER_FILES:
        try:
            with open(path) as handle:
                text = handle.read()
        except OSError:
            continue
        for word in text.split():
            if word[:1].isdigit() and word.count(".") >= 1:
                return word
    return None


def gpus():
    found = []
    for index in range(64):
        path = f"/dev/nvidia{index}"
        if not os.path.lexists(path):
            continue
        try:
            os.close(os.open(path, os.O_RDWR))
            found.append(index)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                found.append(index)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        wanted = [int(v) for v in visible.split(",") if v.strip().isdigit()]
        found = [i for i in wanted if i in found]
    return found


def gpu(index):
    return {
        "index": str(index),
        "name": NAME,
        "uuid": "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"gpulxc-lab-gpu-{index}")),
        "compute_cap": "12.0",
        "memory.total": f"{MEMORY_MIB} MiB",
        "driver_version": USERSPACE,
        "pci.bus_id": f"00000000:{0x18 + 0x10 * index:02X}:00.0",
        "count": None,
    }


def main(argv):
    kernel = kernel_version()
    if kernel is None:
        print(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
            "latest NVIDIA driver is installed and running.\n"
        )
        return 9
    if kernel != USERSPACE:
        print("Failed to initialize NVML: Driver/library version mismatch")
        print(f"NVML library version: {USERSPACE.rsplit('.', 1)[0]}")
        return 18
    indexes = gpus()
    if not indexes:
        print("No devices were found")
        return 6
    query = next((a.split("=", 1)[1] for a in argv if a.startswith("--query-gpu=")), None)
    fmt = next((a.split("=", 1)[1] for a in argv if a.startswith("--format=")), "")
    if "-L" in argv or "--list-gpus" in argv:
        for i in indexes:
            print(f"GPU {i}: {NAME} (UUID: {gpu(i)['uuid']})")
        return 0
    if query:
        fields = [f.strip() for f in query.split(",")]
        rows = []
        for i in indexes:
            info = gpu(i)
            info["count"] = str(len(indexes))
            values = []
            for field in fields:
                if field not in info:
                    print(f'Field "{field}" is not a valid field to query.')
                    return 2
                value = info[field]
                if "nounits" in fmt and field == "memory.total":
                    value = value.split()[0]
                values.append(value)
            rows.append(", ".join(values))
        if "noheader" not in fmt:
            print(", ".join(fields))
        print("\n".join(rows))
        return 0
    print(f"NVIDIA-SMI {USERSPACE}             Driver Version: {kernel}     CUDA Version: {CUDA}")
    for i in indexes:
        print(f"|   {i}  {NAME}  |   {gpu(i)['pci.bus_id']} Off |   0MiB / {MEMORY_MIB}MiB |")
    return 0


sys.exit(main(sys.argv[1:]))
