#!/bin/bash
# Run B, second call (right after sglang_run_b1.sh): the real smg 1.13.0 from the router's files (render-units.yml)
# and its unit (LoadCredential= and all, through unit_runner.py) in front of both instances; completions through it
# to every instance; instance 1 restarted under streaming load through the router, drained and re-admitted with
# gpulxc.sglang.smg_workers as sglang_services' rolling restart does, then the same without the drain; smg's and
# the server's /metrics; a warm start of instance 0 alone.
set -uo pipefail
source tests/gpu/run_env.sh
log=$OUT/b2.txt
# smg's own count of the requests it sent each instance (survives an instance's restart, unlike the server's)
routed() { echo "smg_worker_requests_total $1: $("$py" -c 'import urllib.request as u; print(" ".join(l.split("worker=")[1].split(",")[0] + "=" + l.rsplit(" ", 1)[1] for l in u.urlopen("http://127.0.0.1:29000/metrics", timeout=10).read().decode().splitlines() if l.startswith("smg_worker_requests_total{")))')"; }
healthy() { module gpulxc.sglang.sglang_health "{\"instances\": $1, \"deadline\": 600, \"chat\": \"qwen3next-tiny\"}" | grep -E "FAILED|msg|healthy|chat_seconds" | head -8; }
{
stamp "B2: both instances still up from B1? (else started again, warm)"
for n in 0 1; do units status "$UNIT" $n >/dev/null 2>&1 || { echo "sglang@$n not running: starting"; units start "$UNIT" $n --clamp-limits --no-block 2>/dev/null; }; done
healthy "$both"
stamp "smg.service (the router's unit) started by the runner"
units show "$SMG" | grep -E "^(user|argv|environment|credentials|not applied)" | cut -c1-300
units start "$SMG" --clamp-limits 2>&1 | tail -3
SECONDS=0; until [ "$("$py" -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:8000/readiness", timeout=3).status)' 2>/dev/null)" = 200 ] || [ $SECONDS -gt 90 ]; do sleep 1; done
echo "router /readiness 200 after $SECONDS s"
"$py" -c 'import urllib.request as u, json; print(json.dumps(json.loads(u.urlopen("http://127.0.0.1:8000/v1/models", timeout=10).read())))' | cut -c1-300
stamp "32 completions through the router, each prompt distinct: each instance's sglang:num_requests_total before and after"
routed before; probe spread 8000 30000 30001; routed after
stamp "instance 1 restarted under streaming load (4 streams at a time through the router), drained first (sglang_services' rolling restart)"
cat > /tmp/drained.sh <<EOS
source tests/gpu/run_env.sh
SECONDS=0
module gpulxc.sglang.smg_workers '{"urls": ["http://127.0.0.1:30001"], "state": "drained", "timeout": 120}' | grep -E "changed|msg|waited|drained" | head -5
echo "drained after \$SECONDS s"; units stop "\$UNIT" 1 --json | cut -c1-400; echo "stopped after \$SECONDS s"
units start "\$UNIT" 1 --clamp-limits --no-block; probe timeline 30001 300
module gpulxc.sglang.sglang_health '{"instances": $one, "deadline": 300}' | grep -E "FAILED|msg|chat_seconds" | head -3
module gpulxc.sglang.smg_workers '{"urls": ["http://127.0.0.1:30001"], "state": "admitted", "timeout": 120}' | grep -E "changed|msg|FAILED" | head -3
echo "re-admitted after \$SECONDS s"
EOS
routed before; probe load 8000 20 bash /tmp/drained.sh; routed after
stamp "the same restart without the drain (the control: what the router does with a server that stops under it)"
cat > /tmp/undrained.sh <<EOS
source tests/gpu/run_env.sh
SECONDS=0; units stop "\$UNIT" 1 --json | cut -c1-300; echo "stopped after \$SECONDS s"
units start "\$UNIT" 1 --clamp-limits --no-block; probe timeline 30001 300; echo "healthy again after \$SECONDS s"
EOS
routed before; probe load 8000 30 bash /tmp/undrained.sh; routed after
stamp "smg's /metrics and the server's, as fixtures"
"$py" -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:29000/metrics", timeout=10).read().decode())' > "$OUT/smg-1.13.0-metrics.txt"
grep -v "^#" "$OUT/smg-1.13.0-metrics.txt" | sed 's/[{ ].*//' | sort | uniq -c | sort -rn | head -40
"$py" -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:30001/metrics", timeout=10).read().decode())' > "$OUT/sglang-0.5.12-metrics-after-load.txt"
stamp "a warm start of instance 0 alone (its caches built by B1)"
units stop "$UNIT" 0 --json | cut -c1-200; units start "$UNIT" 0 --clamp-limits --no-block; probe timeline 30000 300
stamp "B2 done"; units stop "$SMG" --json | cut -c1-300
} > "$log" 2>&1
cp /run/gpulxc-units/smg.log "$OUT/b2-smg.log" 2>/dev/null; cp /run/gpulxc-units/sglang@1.log "$OUT/b2-sglang-1.log"
tail -c 9000 "$log"
