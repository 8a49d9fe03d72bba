#!/bin/bash
# Run A in one call (the budget left after the header failures of sglang_run_a1.sh): the headers FlashInfer's JIT
# needs from torch's CUDA wheels (cuBLAS, cuRAND: dropped from the resolve with torch, inventory.yml) linked from
# the machine's torch into the roles' CUDA_HOME; then instances 0 and 1 of the collection's unit on the one GPU
# started at the same moment on an empty JIT cache (1's ExecStartPre waits until 0 listens), the first sampled
# chat after /health 200, gpulxc.sglang.sglang_health on both, the evidence, a SIGTERM under a stream.
set -uo pipefail
export PATH=/usr/local/nvidia/bin:/usr/local/bin:/usr/bin:/bin
export PYTHONPATH=/tmp/gpulxc-ansible ANSIBLE_COLLECTIONS_PATH=/tmp/gpulxc-collections ANSIBLE_LOCALHOST_WARNING=0
export ANSIBLE_FORCE_COLOR=false ANSIBLE_CONFIG=$PWD/ansible.cfg
py=/opt/torch/.venv/bin/python3
units() { "$py" tests/gpu/unit_runner.py "$@"; }
UNIT=/etc/systemd/system/sglang@.service cache=/var/cache/sglang
both='[{"name": "sglang@0", "url": "http://127.0.0.1:30000"}, {"name": "sglang@1", "url": "http://127.0.0.1:30001"}]'
log=$OUT/a.txt
{
echo "### A $(date -u +%FT%TZ): headers of the machine's torch CUDA wheels missing from the roles' CUDA_HOME, linked"
p=/opt/sglang/venv/lib/python3.12/site-packages/nvidia/cu13/include m=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/include
n=0; for f in "$m"/*; do [ -e "$p/$(basename "$f")" ] || { ln -s "$f" "$p/"; n=$((n + 1)); }; done; echo "$n linked"
units stop "$UNIT" 0 --timeout 30 >/dev/null 2>&1; units stop "$UNIT" 1 --timeout 30 >/dev/null 2>&1
rm -rf "${cache:?}"/.cache "$cache"/tvm-ffi "$cache"/triton "$cache"/torchinductor "$cache"/sglang-* "$cache"/deep_gemm-*
: > /run/gpulxc-units/sglang@0.log; : > /run/gpulxc-units/sglang@1.log
echo "### instances 0 and 1 (GPU 0, 0.3 each) started at the same moment, empty JIT cache"
units start "$UNIT" 0 --clamp-limits --no-block 2>/dev/null; units start "$UNIT" 1 --clamp-limits --no-block 2>/dev/null
"$py" tests/gpu/probe.py timeline 30000 420 & "$py" tests/gpu/probe.py timeline 30001 480; wait
grep -h "waiting for\|listens (or stopped)" /run/gpulxc-units/sglang@1.log
grep -ch "Not enough memory" /run/gpulxc-units/sglang@0.log /run/gpulxc-units/sglang@1.log
grep -h "KV Cache is allocated\|Memory pool end\|max_total_num_tokens" /run/gpulxc-units/sglang@*.log | cut -c1-220 | head -4
nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader
echo "### the first sampled chat after /health 200 on 0 (top-k/top-p: FlashInfer's sampling kernel), then 1, then 0 again"
"$py" tests/gpu/probe.py chat 30000 --sampled; "$py" tests/gpu/probe.py chat 30001 --sampled; "$py" tests/gpu/probe.py chat 30000 --sampled
"$py" tests/gpu/probe.py chat 30000
echo "### gpulxc.sglang.sglang_health on both (sampled smoke chat)"
"$py" -c 'import sys; from ansible.cli.adhoc import main; sys.argv[0] = "ansible"; main()' localhost -i localhost, -c local \
  -e ansible_python_interpreter="$py" -m gpulxc.sglang.sglang_health -a "{\"instances\": $both, \"deadline\": 120, \"chat\": \"qwen3next-tiny\"}" 2>&1 | tail -30
echo "### CUDA libraries mapped by the servers' processes"
"$py" tests/gpu/probe.py maps $(pgrep -u sglang)
echo "### FlashInfer's build.ninja and the JIT outputs"
find "$cache" -name build.ninja -exec grep -h "^nvcc = \|^cuda_home = " {} + | sort | uniq -c
find "$cache" -name "*.so" | sed "s|^$cache/||" | sort
"$py" -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:30000/metrics", timeout=10).read().decode())' > "$OUT/sglang-0.5.12-metrics.txt"
grep -c "^sglang:" "$OUT/sglang-0.5.12-metrics.txt"
echo "### SIGTERM (the runner's stop) to instance 1 under a 3000-token stream"
"$py" tests/gpu/probe.py drain 30001 "$py" tests/gpu/unit_runner.py stop "$UNIT" 1 --json
grep -h "SIGTERM\|Gracefully exiting" /run/gpulxc-units/sglang@1.log | cut -c1-160 | tail -5
} > "$log" 2>&1
cp /run/gpulxc-units/sglang@0.log "$OUT/sglang-0.log"; cp /run/gpulxc-units/sglang@1.log "$OUT/sglang-1.log"
grep -v "^  [A-Z_]*=" "$log" | tail -70
