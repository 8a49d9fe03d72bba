#!/bin/bash
# Sourced by the run scripts after sglang_setup.sh: the machine's Python runs Ansible and the probes; the collection
# from this checkout; no /usr/local/cuda on PATH (the machine's own CUDA).
export PATH=/usr/local/nvidia/bin:/usr/local/bin:/usr/bin:/bin
export PYTHONPATH=/tmp/gpulxc-ansible ANSIBLE_COLLECTIONS_PATH=/tmp/gpulxc-collections ANSIBLE_LOCALHOST_WARNING=0
export ANSIBLE_FORCE_COLOR=false ANSIBLE_CONFIG=$PWD/ansible.cfg
py=/opt/torch/.venv/bin/python3
venv_py=/opt/sglang/venv/bin/python
UNIT=/etc/systemd/system/sglang@.service SMG=/etc/systemd/system/smg.service cache=/var/cache/sglang
units() { "$py" tests/gpu/unit_runner.py "$@"; }
probe() { "$py" tests/gpu/probe.py "$@"; }
# one module of the collection, as Ansible runs it on a target: module NAME JSON_ARGS
module() {
  "$py" -c 'import sys; from ansible.cli.adhoc import main; sys.argv[0] = "ansible"; main()' localhost -i localhost, \
    -c local -e ansible_python_interpreter="$py" -m "$1" -a "$2" 2>&1
}
both='[{"name": "sglang@0", "url": "http://127.0.0.1:30000", "gpu": 0}, {"name": "sglang@1", "url": "http://127.0.0.1:30001", "gpu": 0}]'
one='[{"name": "sglang@1", "url": "http://127.0.0.1:30001", "gpu": 0}]'
stamp() { echo "### $(date -u +%T) $*"; }
