#!/bin/bash
# Stage 2b (carry .cache/gpuB, right after stage_a.sh while the machine is warm): the rest of the CUDA
# 13.2 toolkit, then the cuda_surgery role with a local connection, then its environment file.
set -euxo pipefail
purelib=$(/opt/sglang/venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
xz -dc .cache/gpuB/nvcc.tar.xz | tar -x -C "$purelib"
VIRTUAL_ENV=/opt/sglang/venv uv pip install -q --offline --no-index --no-deps .cache/gpuB/*.whl
ln -sfn /opt/torch/.venv/bin/ninja /opt/sglang/venv/bin/ninja   # the stack's pip ninja (the machine's torch venv has it)
mkdir -p /tmp/gpulxc-collections/ansible_collections/gpulxc && ln -sfn "$PWD" /tmp/gpulxc-collections/ansible_collections/gpulxc/sglang
export PYTHONPATH=/tmp/gpulxc-ansible ANSIBLE_COLLECTIONS_PATH=/tmp/gpulxc-collections ANSIBLE_LOCALHOST_WARNING=0
export ANSIBLE_INVENTORY_UNPARSED_WARNING=0 ANSIBLE_PYTHON_INTERPRETER=/usr/bin/python3
export PATH=/usr/local/nvidia/bin:/opt/torch/.venv/bin:/usr/local/bin:/usr/bin:/bin   # no /usr/local/cuda/bin
cat > /tmp/cuda_surgery.yml <<'PLAY'
- name: cuda_surgery on this machine (local connection)
  hosts: localhost
  connection: local
  gather_facts: false
  roles:
    - role: gpulxc.sglang.cuda_surgery
PLAY
/opt/torch/.venv/bin/python3 -c 'import sys; from ansible.cli.playbook import main; sys.argv[0] = "ansible-playbook"; main()' /tmp/cuda_surgery.yml -i localhost, 2>&1 | tail -60 | tee "$OUT/stage_b.cuda_surgery.out"
cat /etc/sglang/cuda.env || true
