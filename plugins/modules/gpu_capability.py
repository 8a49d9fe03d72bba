#!/usr/bin/python
# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_capability
short_description: List the visible NVIDIA GPUs and check their compute capability, count and driver
version_added: 0.1.0
description:
  - Lists the GPUs this host (or container) can use, with index, name, UUID, compute capability (SM),
    memory, PCI bus id, driver version and the CUDA version the driver supports.
  - Reads NVML through nvidia-ml-py (C(import pynvml)) when it is importable, else
    C(nvidia-smi --query-gpu=... --format=csv,noheader).
  - Fails, before anything is installed, when a requirement is not met, with a message naming what
    to do - no driver visible (passthrough not configured), C(Driver/library version mismatch)
    (container userspace differs from the node's kernel driver), a GPU of another SM (each GPU named),
    too few GPUs, a driver older than required.
  - Returns what later roles use - the GPU indexes to serve and the set of SMs (compute capabilities only; the
    attention backend for an SM is the stack profile's choice, C(profiles/<release>.yml)).
author:
  - gpulxc.sglang developers (@gpulxc)
extends_documentation_fragment:
  - gpulxc.sglang.attributes
  - gpulxc.sglang.attributes.info_module
options:
  source:
    description:
      - Where to read the GPUs - V(auto) (NVML if nvidia-ml-py imports, else nvidia-smi), V(nvml), V(nvidia_smi).
    type: str
    choices: [auto, nvml, nvidia_smi]
    default: auto
  nvidia_smi:
    description: The C(nvidia-smi) program (a name looked up in C(PATH), or a path).
    type: str
    default: nvidia-smi
  compute_capabilities:
    description:
      - Compute capabilities allowed, for example V(12.0). Every visible GPU must have one of them. Empty - any.
    type: list
    elements: str
    default: []
  count:
    description: Exact number of GPUs required.
    type: int
  min_count:
    description: Minimum number of GPUs required.
    type: int
  min_driver:
    description: Minimum driver version (CUDA 13 needs R580).
    type: str
    default: "580"
notes:
  - C(CUDA_VISIBLE_DEVICES) does not limit NVML or C(nvidia-smi) on real hardware; set the GPUs a
    container sees with its passthrough.
"""

EXAMPLES = r"""
- name: Require 8 SM 12.0 GPUs and an R580+ driver before installing anything
  gpulxc.sglang.gpu_capability:
    compute_capabilities: ["12.0"]
    count: 8
  register: gpus

- name: Show the SM of the first GPU
  ansible.builtin.debug:
    msg: "{{ gpus.capabilities[0] }}"
"""

RETURN = r"""
gpus:
  description: The visible GPUs.
  returned: success
  type: list
  elements: dict
  sample:
    - index: 0
      name: NVIDIA H200
      uuid: GPU-94765b0c-3471-1a2e-b60b-33a94ca56fe5
      compute_capability: "9.0"
      memory_total_mib: 143771
      pci_bus_id: "00000000:00:06.0"
      driver_version: 580.159.04
indexes:
  description: The indexes of the GPUs to serve (all visible ones).
  returned: success
  type: list
  elements: int
  sample: [0, 1, 2, 3, 4, 5, 6, 7]
capabilities:
  description: The compute capabilities present, sorted.
  returned: success
  type: list
  elements: str
  sample: ["12.0"]
driver_version:
  description: The driver version.
  returned: success
  type: str
  sample: 580.159.04
cuda_driver_version:
  description: The CUDA version the driver supports.
  returned: success
  type: str
  sample: "13.0"
source:
  description: Where the GPUs were read - V(nvml) or V(nvidia_smi).
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpulxc.sglang.plugins.module_utils import _nvidia as nvidia

try:
    import pynvml

    HAS_PYNVML = True
except ImportError:  # nvidia-ml-py is optional: nvidia-smi is the fallback
    pynvml = None
    HAS_PYNVML = False


def from_nvidia_smi(module):
    smi = module.params["nvidia_smi"]
    path = smi if "/" in smi else module.get_bin_path(smi)
    if not path:
        module.fail_json(
            msg="%s not found: no NVIDIA driver userspace here. Is GPU passthrough configured and the "
            "node driver's userspace installed (gpulxc.sglang.pct_container)?" % smi
        )
    rc, out, err = module.run_command([path, "--query-gpu=" + ",".join(nvidia.QUERY_FIELDS), "--format=csv,noheader"])
    if rc != 0:
        text = out + err
        if "No devices were found" in text:
            return [], None, None
        module.fail_json(
            msg=nvidia.explain_failure(text, "nvidia-smi") or "nvidia-smi failed (%d): %s" % (rc, text.strip()),
            rc=rc,
            stdout=out,
            stderr=err,
        )
    gpus = nvidia.parse_query_csv(out)
    rc, header, _err = module.run_command([path])
    cuda = nvidia.parse_cuda_version(header) if rc == 0 else None
    return gpus, gpus[0]["driver_version"] if gpus else None, cuda


def main():
    module = AnsibleModule(
        argument_spec={
            "source": {"type": "str", "choices": ["auto", "nvml", "nvidia_smi"], "default": "auto"},
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
            "compute_capabilities": {"type": "list", "elements": "str", "default": []},
            "count": {"type": "int"},
            "min_count": {"type": "int"},
            "min_driver": {"type": "str", "default": "580"},
        },
        supports_check_mode=True,
    )
    params = module.params
    source = params["source"]
    if source == "nvml" and not HAS_PYNVML:
        module.fail_json(
            msg="source=nvml: nvidia-ml-py is not importable by %s; install it or use source=auto"
            % __import__("sys").executable
        )
    try:
        if source == "nvml" or (source == "auto" and HAS_PYNVML):
            gpus, driver, cuda = nvidia.from_nvml(pynvml)
            used = "nvml"
        else:
            gpus, driver, cuda = from_nvidia_smi(module)
            used = "nvidia_smi"
        for gpu in gpus:
            gpu["pci_bus_id"] = nvidia.normalize_bus_id(gpu["pci_bus_id"])
    except nvidia.GpuError as exc:
        module.fail_json(msg=str(exc))
    capabilities = sorted({g["compute_capability"] for g in gpus}, key=nvidia.version_tuple)
    result = {
        "changed": False,
        "gpus": gpus,
        "indexes": [g["index"] for g in gpus],
        "capabilities": capabilities,
        "driver_version": driver,
        "cuda_driver_version": cuda,
        "source": used,
    }
    errors = nvidia.check(
        gpus,
        driver,
        compute_capabilities=params["compute_capabilities"],
        count=params["count"],
        min_count=params["min_count"],
        min_driver=params["min_driver"],
    )
    if not gpus and not errors:
        errors.append("no GPU visible (nvidia-smi: No devices were found): are /dev/nvidiaN passed through?")
    if errors:
        module.fail_json(msg="; ".join(errors), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
