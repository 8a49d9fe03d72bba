#!/bin/bash
# The last device call (carries the last part, right after the wheelhouse_part.sh calls, machine warm): the
# wheelhouse checked against its SHA256SUMS, then the collection's playbooks/stack.yml with a local connection,
# offline from it (uv_venv, sglang_stack with its CUDA wheels' checks, cuda_surgery; jit_toolchain skipped:
# apt, which the machine lacks, and its tools are here), twice; then, in the environment the roles wrote:
# gpu_capability on real NVML and nvidia-smi, the validation binary, a FlashInfer decode kernel JIT-built against
# a float64 torch reference, the same build without cuda_surgery's lib64 fix, and the roles repairing it.
set -uo pipefail
cat "$(ls -d .cache/gpuW* | sort | tail -n 1)/part" >> /var/tmp/gpulxc-transfer.tar
mkdir -p /tmp/gpulxc-collections/ansible_collections/gpulxc && ln -sfn "$PWD" /tmp/gpulxc-collections/ansible_collections/gpulxc/sglang
export PYTHONPATH=/tmp/gpulxc-ansible ANSIBLE_COLLECTIONS_PATH=/tmp/gpulxc-collections ANSIBLE_LOCALHOST_WARNING=0
export ANSIBLE_FORCE_COLOR=false
export PATH=/usr/local/nvidia/bin:/usr/local/bin:/usr/bin:/bin   # not /usr/local/cuda/bin, the machine's own CUDA
controller=/opt/torch/.venv/bin/python3   # the machine's Python with Jinja2 and PyYAML runs Ansible
playbook() { "$controller" -c 'import sys; from ansible.cli.playbook import main; sys.argv[0] = "ansible-playbook"; main()' "$@"; }
stack() { playbook playbooks/stack.yml -i tests/gpu/inventory.yml -l h200 --skip-tags jit_toolchain "$@"; }
{
echo "### the wheelhouse, carried byte for byte"
tar -xf /var/tmp/gpulxc-transfer.tar -C /var/tmp && rm -rf /opt/gpulxc-wheelhouse && mv /var/tmp/gpu-wheelhouse /opt/gpulxc-wheelhouse
echo "transfer $(sha256sum < /var/tmp/gpulxc-transfer.tar)"
(cd /opt/gpulxc-wheelhouse && sha256sum -c --quiet SHA256SUMS && echo "all $(wc -l < SHA256SUMS) wheels match SHA256SUMS")
"$controller" -m pip install -q --no-index --no-deps --target /tmp/gpulxc-ansible /var/tmp/gpu-ansible/*.whl \
  || python3 -m pip install -q --no-index --no-deps --target /tmp/gpulxc-ansible /var/tmp/gpu-ansible/*.whl
echo "### playbooks/stack.yml, offline from the wheelhouse (local connection)"
stack > "$OUT/stack-1.out" 2>&1; echo "exit $?"
grep -E "^(changed|fatal|failed)|^TASK|h200 +:" "$OUT/stack-1.out" | grep -B1 -E "^(changed|fatal|failed)|h200 +:" | grep -v "^--"
echo "### /etc/uv/uv.toml"; grep -v "^#" /etc/uv/uv.toml
echo "### the venv is the wheelhouse's lock"
/usr/local/bin/uv pip freeze --python /opt/sglang/venv/bin/python 2>/dev/null | sort > /tmp/freeze.txt
sed -n 's/^\([A-Za-z0-9][A-Za-z0-9._-]*\)==\([^ ]*\).*/\1==\2/p' /opt/gpulxc-wheelhouse/stack.lock | sort > /tmp/lock.txt
diff /tmp/lock.txt /tmp/freeze.txt && echo "$(wc -l < /tmp/freeze.txt) packages, identical to the wheelhouse's stack.lock"
grep -E "^(flashinfer|nvidia-cuda|nvidia-nvvm|ninja|apache)" /tmp/freeze.txt
echo "### playbooks/stack.yml again"; stack 2>&1 | grep -E "h200 +:"
# the machine's torch and numpy (dropped from the resolve, see inventory.yml) for the checks below
purelib=$(/opt/sglang/venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
"$controller" -c "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))" > "$purelib/machine-torch.pth"
echo "### the environment file"; cat /etc/sglang/cuda.env
echo "### gpulxc.sglang.gpu_capability through Ansible (the venv's Python, its nvidia-ml-py from the wheelhouse)"
for source in nvml nvidia_smi; do for sm in 9.0 12.0; do
  "$controller" -c 'import sys; from ansible.cli.adhoc import main; sys.argv[0] = "ansible"; main()' \
    localhost -i localhost, -c local -e ansible_python_interpreter=/opt/sglang/venv/bin/python -m gpulxc.sglang.gpu_capability \
    -a "{\"source\": \"$source\", \"compute_capabilities\": [\"$sm\"]}" 2>&1 | grep -E '"(source|name|compute_capability|msg)"|\| (SUCCESS|FAILED)'
done; done
echo "### the validation program, run on the GPU"; ( set -a; . /etc/sglang/cuda.env; set +a; /var/lib/gpulxc/validate/validate; echo "exit $?" )
clean() { rm -rf ~/.cache/flashinfer "${FLASHINFER_WORKSPACE_BASE:-/nonexistent}/.cache/flashinfer"; }
echo "### FlashInfer decode kernel JIT-built in the roles' environment"
( set -a; . /etc/sglang/cuda.env; set +a; echo "CUDA_HOME=$CUDA_HOME"; clean; /opt/sglang/venv/bin/python tests/gpu/flashinfer_decode.py 2>&1 | tail -5 )
echo "### negative case: the same build without cuda_surgery's lib64 and libcudart.so links"
( set -a; . /etc/sglang/cuda.env; set +a; rm -f "$CUDA_HOME/lib64" "$CUDA_HOME/lib/libcudart.so"; clean; /opt/sglang/venv/bin/python tests/gpu/flashinfer_decode.py 2>&1 | grep -E "cannot find|Error|error" | head -5 )
echo "### playbooks/stack.yml repairs it"; stack > "$OUT/stack-repair.out" 2>&1
grep -E "^TASK|^changed|h200 +:" "$OUT/stack-repair.out" | grep -B1 -E "^changed|h200 +:" | grep -v "^--"
} 2>&1 | tee "$OUT/wheelhouse_roles.out"
