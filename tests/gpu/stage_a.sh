#!/bin/bash
# Stage 2a (carry .cache/gpuA): ansible-core, a venv seeing the machine's torch, nvvm and FlashInfer in it.
set -euxo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/gpulxc-ansible .cache/gpuA/*core*.whl .cache/gpuA/resolvelib*.whl
rm -rf /opt/sglang/venv && uv venv -q --python /usr/bin/python3 /opt/sglang/venv
purelib=$(/opt/sglang/venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
python3 -c "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))" > "$purelib/machine-torch.pth"
xz -dc .cache/gpuA/nvvm.tar.xz | tar -x -C "$purelib"
VIRTUAL_ENV=/opt/sglang/venv uv pip install -q --offline --no-index --no-deps .cache/gpuA/flashinfer_python-*.whl
ls "$purelib/nvidia/cu13" "$purelib" | head -30
