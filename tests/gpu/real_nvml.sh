#!/bin/bash
# Stage 1 of the real-GPU run (issue 11), on the lent H200 through the `device` tool:
# ansible-core from a carried wheel (the machine has no ansible and no network), then
# gpulxc.sglang.gpu_capability against the real NVML (nvidia-ml-py) and nvidia-smi, local connection.
# Run from the repository root with the wheels carried in .cache/gpu-wheels (see tests/gpu/README.md).
set -euo pipefail
out=${OUT:-/tmp/gpu-out}
mkdir -p "$out" /tmp/gpulxc-ansible /tmp/gpulxc-collections/ansible_collections/gpulxc
python3 -m pip install -q --no-index --no-deps --target /tmp/gpulxc-ansible .cache/gpu-wheels/*.whl
ln -sfn "$PWD" /tmp/gpulxc-collections/ansible_collections/gpulxc/sglang
export PYTHONPATH=/tmp/gpulxc-ansible ANSIBLE_COLLECTIONS_PATH=/tmp/gpulxc-collections ANSIBLE_LOCALHOST_WARNING=0
export ANSIBLE_INVENTORY_UNPARSED_WARNING=0 ANSIBLE_PYTHON_INTERPRETER=/usr/bin/python3 PATH=/usr/local/nvidia/bin:$PATH
adhoc() { python3 -c 'import sys; from ansible.cli.adhoc import main; sys.argv[0] = "ansible"; main()' "$@"; }
{
  echo "## $(date -u +%FT%TZ) $(hostname), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  for source in nvml nvidia_smi; do
    echo "### gpulxc.sglang.gpu_capability source=$source compute_capabilities=[9.0]"
    adhoc localhost -c local -m gpulxc.sglang.gpu_capability \
      -a "{\"source\": \"$source\", \"compute_capabilities\": [\"9.0\"]}" 2>&1
    echo "### the same, compute_capabilities=[12.0] (the reference machine's SM: must fail naming it)"
    adhoc localhost -c local -m gpulxc.sglang.gpu_capability \
      -a "{\"source\": \"$source\", \"compute_capabilities\": [\"12.0\"]}" 2>&1 || echo "(exit $?)"
  done
} | tee "$out/real_nvml.out"
