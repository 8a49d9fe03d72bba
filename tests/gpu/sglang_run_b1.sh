#!/bin/bash
# Run B, first call (after sglang_setup.sh, machine warm): instances 0 and 1 started together on an empty JIT cache
# with gpulxc.sglang.sglang_health waiting for them from the first second (its sampled smoke chat: the readiness
# fix, measured cold); the JIT builds counted from the caches; then every server process's sys.modules
# (modules_dump.py, a test instrument put in the venv for this run only) after /health 200 and a sampled chat.
set -uo pipefail
source tests/gpu/run_env.sh
log=$OUT/b1.txt
{
stamp "B1: the headers of the machine torch's CUDA wheels linked into the roles' CUDA_HOME (as run A: inventory.yml drops them)"
p=/opt/sglang/venv/lib/python3.12/site-packages/nvidia/cu13/include m=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/include
n=0; for f in "$m"/*; do [ -e "$p/$(basename "$f")" ] || { ln -s "$f" "$p/"; n=$((n + 1)); }; done; echo "$n linked"
purelib=$("$venv_py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
cp tests/gpu/modules_dump.py "$purelib/gpulxc_modules_dump.py" && echo "import gpulxc_modules_dump" > "$purelib/gpulxc-modules-dump.pth"
rm -rf /tmp/gpulxc-modules && mkdir -m 1777 /tmp/gpulxc-modules
units stop "$UNIT" 0 --timeout 30 >/dev/null 2>&1; units stop "$UNIT" 1 --timeout 30 >/dev/null 2>&1
rm -rf "${cache:?}"/.cache "$cache"/tvm-ffi "$cache"/triton "$cache"/torchinductor "$cache"/sglang-* "$cache"/deep_gemm-*
mkdir -p /run/gpulxc-units; : > /run/gpulxc-units/sglang@0.log; : > /run/gpulxc-units/sglang@1.log
stamp "instances 0 and 1 started together, empty JIT cache; sglang_health (deadline 900 s, sampled smoke chat) from the start"
units start "$UNIT" 0 --clamp-limits --no-block 2>/dev/null; units start "$UNIT" 1 --clamp-limits --no-block 2>/dev/null
probe timeline 30000 600 > /tmp/t0.json & probe timeline 30001 600 > /tmp/t1.json &
SECONDS=0
module gpulxc.sglang.sglang_health "{\"instances\": $both, \"deadline\": 900, \"chat\": \"qwen3next-tiny\"}" | tail -40
echo "sglang_health returned after $SECONDS s"
wait; echo "instance 0 $(cat /tmp/t0.json)"; echo "instance 1 $(cat /tmp/t1.json)"
grep -h "waiting for\|listens (or stopped)" /run/gpulxc-units/sglang@1.log
grep -ch "Not enough memory" /run/gpulxc-units/sglang@0.log /run/gpulxc-units/sglang@1.log
stamp "JIT builds on the empty cache, both instances together (FlashInfer's cache: one build.ninja per op built)"
find "$cache" -name build.ninja | sed "s|^$cache/||" | sort
find "$cache" -name "*.so" | sed "s|^$cache/||" | sort
echo "flashinfer ops built: $(find "$cache" -path '*flashinfer*' -name build.ninja | wc -l); .so: $(find "$cache" -path '*flashinfer*' -name '*.so' | wc -l); tvm-ffi .so: $(find "$cache/tvm-ffi" -name '*.so' 2>/dev/null | wc -l); triton: $(find "$cache/triton" -name '*.so' 2>/dev/null | wc -l)"
grep -h "op=\|Loading JIT\|Building\|ninja" /run/gpulxc-units/sglang@*.log | cut -c1-200 | head -20
stamp "sys.modules of every server process after /health 200 and a sampled chat"
probe chat 30000 --sampled | cut -c1-300; probe chat 30001 --sampled | cut -c1-300
touch /tmp/gpulxc-modules/trigger; sleep 4
dropped=$("$py" -c 'import yaml; h = yaml.safe_load(open("tests/gpu/inventory.yml"))["sglang_containers"]["hosts"]["h200-sglang"]; print(" ".join(o.split(";")[0] for o in h["sglang_stack_overrides"]))')
"$venv_py" tests/gpu/probe.py modules /tmp/gpulxc-modules --dropped $dropped > "$OUT/sys-modules-summary.json"
"$py" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(json.dumps({k: d[k] for k in ("processes", "dropped_and_imported")}, indent=1)); print(len(d["imported_distributions"]), "distributions imported;", len(d["installed_not_imported"]), "installed, not imported:", " ".join(d["installed_not_imported"]))' "$OUT/sys-modules-summary.json"
mkdir -p "$OUT/sys-modules" && cp /tmp/gpulxc-modules/*.json "$OUT/sys-modules/"
nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader
stamp "B1 done"
} > "$log" 2>&1
cp /run/gpulxc-units/sglang@0.log "$OUT/b1-sglang-0.log"; cp /run/gpulxc-units/sglang@1.log "$OUT/b1-sglang-1.log"
tail -c 9000 "$log"
