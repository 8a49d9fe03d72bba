#!/bin/bash
# Stage 2c (right after stage_b.sh, machine warm): ninja in the venv (the stack's pip dependency there;
# the machine's is in its torch venv), cuda_surgery again with the validation compile and its binary run, a FlashInfer decode kernel JIT-built
# in the role's environment against a float64 torch reference, then the same build without the lib64 fix.
set -uxo pipefail
ln -sfn /opt/torch/.venv/bin/ninja /opt/sglang/venv/bin/ninja
mkdir -p /tmp/gpulxc-collections/ansible_collections/gpulxc && ln -sfn "$PWD" /tmp/gpulxc-collections/ansible_collections/gpulxc/sglang
export PYTHONPATH=/tmp/gpulxc-ansible ANSIBLE_COLLECTIONS_PATH=/tmp/gpulxc-collections ANSIBLE_LOCALHOST_WARNING=0
export ANSIBLE_INVENTORY_UNPARSED_WARNING=0 ANSIBLE_PYTHON_INTERPRETER=/usr/bin/python3
export PATH=/usr/local/nvidia/bin:/usr/local/bin:/usr/bin:/bin   # no /usr/local/cuda/bin
play() { /opt/torch/.venv/bin/python3 -c 'import sys; from ansible.cli.playbook import main; sys.argv[0] = "ansible-playbook"; main()' /tmp/cuda_surgery.yml -i localhost,; }
{
echo "### cuda_surgery (local connection)"; play 2>&1 | grep -E "^(TASK|ok|changed|fatal|failed)|RECAP|localhost +:" 
echo "### the environment file"; cat /etc/sglang/cuda.env
echo "### gpulxc.sglang.gpu_capability through Ansible (local connection): SM 9.0 passes, the reference 12.0 fails"
for source in nvml nvidia_smi; do for sm in 9.0 12.0; do
  /opt/torch/.venv/bin/python3 -c 'import sys; from ansible.cli.adhoc import main; sys.argv[0] = "ansible"; main()' \
    localhost -i localhost, -c local -e ansible_python_interpreter=/opt/sglang/venv/bin/python -m gpulxc.sglang.gpu_capability \
    -a "{\"source\": \"$source\", \"compute_capabilities\": [\"$sm\"]}" 2>&1 | grep -E '"(source|driver_version|cuda_driver_version|name|compute_capability|msg)"|\| (SUCCESS|FAILED)'
done; done
echo "### the validation program, run on the GPU"; ( set -a; . /etc/sglang/cuda.env; set +a; /var/lib/gpulxc/validate/validate; echo "exit $?" )
echo "### cuda_surgery again (idempotence)"; play 2>&1 | grep -E "RECAP|localhost +:"
echo "### FlashInfer decode kernel in the role's environment"
( set -a; . /etc/sglang/cuda.env; set +a; echo "CUDA_HOME=$CUDA_HOME"; rm -rf ~/.cache/flashinfer "${FLASHINFER_WORKSPACE_BASE:-/nonexistent}/.cache/flashinfer"; /opt/sglang/venv/bin/python tests/gpu/flashinfer_decode.py 2>&1 | tail -5 )
echo "### negative case: the same build without the role's lib64 and libcudart.so links"
( set -a; . /etc/sglang/cuda.env; set +a; ls -l "$CUDA_HOME/lib64" "$CUDA_HOME/lib/libcudart.so"; rm -f "$CUDA_HOME/lib64" "$CUDA_HOME/lib/libcudart.so"; rm -rf ~/.cache/flashinfer "${FLASHINFER_WORKSPACE_BASE:-/nonexistent}/.cache/flashinfer"; /opt/sglang/venv/bin/python tests/gpu/flashinfer_decode.py 2>&1 | grep -E "cannot find|Error|error" | head -5 )
echo "### cuda_surgery repairs it"; play 2>&1 | grep -E "RECAP|localhost +:"
} 2>&1 | tee "$OUT/stage_c.out"
