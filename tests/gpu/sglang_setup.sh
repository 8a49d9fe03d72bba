#!/bin/bash
# The last device call of set S (prepare-sglang.sh; carries .cache/gpuS13 and .cache/gpu-sglang-transfer.sha256,
# right after `wheelhouse_part.sh N S` for the other parts, machine warm): the wheelhouse checked byte for byte, the
# collection's playbooks/stack.yml offline from it twice (local connection; jit_toolchain skipped: apt, which the
# machine lacks, and its tools are here), the machine's torch joined to the venv (dropped from the resolve,
# inventory.yml), sglang_services' files rendered (render-units.yml), the model built (make_model.py).
set -uo pipefail
cat "$(ls -d .cache/gpuS* | sort -V | tail -n 1)/part" >> /var/tmp/gpulxc-transfer-S.tar
mkdir -p /tmp/gpulxc-collections/ansible_collections/gpulxc && ln -sfn "$PWD" /tmp/gpulxc-collections/ansible_collections/gpulxc/sglang
export PYTHONPATH=/tmp/gpulxc-ansible ANSIBLE_COLLECTIONS_PATH=/tmp/gpulxc-collections ANSIBLE_LOCALHOST_WARNING=0
export ANSIBLE_FORCE_COLOR=false ANSIBLE_CONFIG=$PWD/ansible.cfg
export PATH=/usr/local/nvidia/bin:/usr/local/bin:/usr/bin:/bin   # not /usr/local/cuda/bin, the machine's own CUDA
controller=/opt/torch/.venv/bin/python3   # the machine's Python with Jinja2 and PyYAML runs Ansible
playbook() { "$controller" -c 'import sys; from ansible.cli.playbook import main; sys.argv[0] = "ansible-playbook"; main()' "$@"; }
stack() { playbook playbooks/stack.yml -i tests/gpu/inventory.yml -l h200-sglang --skip-tags jit_toolchain "$@"; }
recap() { grep -E "^(fatal|failed)|h200-sglang +:|FAILED|msg" "$1" | tail -8; }
{
echo "### the wheelhouse, carried byte for byte ($(date -u +%FT%TZ))"
echo "transfer $(sha256sum < /var/tmp/gpulxc-transfer-S.tar | cut -d' ' -f1), expected $(cut -d' ' -f1 .cache/gpu-sglang-transfer.sha256)"
tar -xf /var/tmp/gpulxc-transfer-S.tar -C /var/tmp && rm -rf /opt/gpulxc-wheelhouse && mv /var/tmp/gpu-sglang-wheelhouse /opt/gpulxc-wheelhouse
(cd /opt/gpulxc-wheelhouse && sha256sum -c --quiet SHA256SUMS && echo "all $(wc -l < SHA256SUMS) wheels match SHA256SUMS")
grep -E "sglang_kernel|sglang-0|flashinfer_python|smg-" /opt/gpulxc-wheelhouse/SHA256SUMS
"$controller" -m pip install -q --no-index --no-deps --target /tmp/gpulxc-ansible /var/tmp/gpu-sglang-ansible/*.whl
echo "### playbooks/stack.yml, offline from the wheelhouse"
SECONDS=0; stack > "$OUT/stack-1.out" 2>&1; echo "exit $? in $SECONDS s"; recap "$OUT/stack-1.out"
echo "### playbooks/stack.yml again"
SECONDS=0; stack > "$OUT/stack-2.out" 2>&1; echo "exit $? in $SECONDS s"; recap "$OUT/stack-2.out"
/usr/local/bin/uv pip freeze --python /opt/sglang/venv/bin/python 2>/dev/null | sort > /tmp/freeze.txt
sed -n 's/^\([A-Za-z0-9][A-Za-z0-9._-]*\)==\([^ ]*\).*/\1==\2/p' /opt/gpulxc-wheelhouse/stack.lock | sort > /tmp/lock.txt
diff /tmp/lock.txt /tmp/freeze.txt && echo "$(wc -l < /tmp/freeze.txt) packages, identical to the wheelhouse's stack.lock"
purelib=$(/opt/sglang/venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
"$controller" -c "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))" > "$purelib/machine-torch.pth"
echo "### the environment file"; grep -v "^#" /etc/sglang/cuda.env
echo "### sglang_services' unit and instance files (render-units.yml)"
playbook tests/gpu/render-units.yml -i tests/gpu/inventory.yml -l h200-sglang > "$OUT/render.out" 2>&1; echo "exit $?"; recap "$OUT/render.out"
grep -E "^(Exec|Environment|User|TimeoutS)" /etc/systemd/system/sglang@.service; tail -n 2 /etc/sglang/instance-1.env
echo "### the model (make_model.py, in the machine's Python: torch 2.11.0, transformers 5.17.0)"
SECONDS=0; "$controller" tests/gpu/make_model.py /var/lib/gpulxc/models/qwen3next-tiny 2>&1 | tail -5
echo "exit $? in $SECONDS s"; chmod -R a+rX /var/lib/gpulxc/models; ls -la /var/lib/gpulxc/models/qwen3next-tiny
} 2>&1 | tee "$OUT/setup.txt"
