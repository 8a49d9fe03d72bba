#!/usr/bin/env bash
# Real-GPU check of gpulxc.sglang.gpu_capability, run on the lent NVIDIA machine by the `device`
# tool (see README.md). Runs the module as Ansible runs it on a target (a module file, its args
# in a JSON file) against real NVML and real nvidia-smi, and writes what it saw to $OUT.
set -uo pipefail
repo=$PWD
out=${OUT:-/tmp/out}
mkdir -p "$out"
log=$out/gpu_capability-real-gpu.txt
work=$(mktemp -d)
pip install -q --no-index --no-deps --target "$work/lib" .cache/gpu/*.whl >/dev/null 2>&1 ||
  python3 -m pip install -q --no-index --no-deps --target "$work/lib" .cache/gpu/*.whl
mkdir -p "$work/coll/ansible_collections/gpulxc"
ln -s "$repo" "$work/coll/ansible_collections/gpulxc/sglang"
export PYTHONPATH="$work/coll:$work/lib"
module=$repo/plugins/modules/gpu_capability.py

run_case() { # name, then the module args as JSON
  local name=$1 args=$2
  echo "### $name: gpu_capability $args"
  echo "{\"ANSIBLE_MODULE_ARGS\": $args}" >"$work/args.json"
  python3 "$module" "$work/args.json" | python3 -c 'import json,sys; r=json.load(sys.stdin); r.pop("invocation",None); print(json.dumps(r, indent=2, sort_keys=True))'
  echo
}

{
  echo "# gpulxc.sglang gpu_capability on a real GPU"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -srm); python: $(python3 --version 2>&1)"
  echo "nvidia-smi: $(command -v nvidia-smi)"
  nvidia-smi --query-gpu=index,name,compute_cap,driver_version --format=csv,noheader
  python3 -c 'import pynvml; print("nvidia-ml-py:", pynvml.__file__)'
  echo
  run_case "NVML (nvidia-ml-py)" '{"source": "nvml"}'
  run_case "nvidia-smi" '{"source": "nvidia_smi"}'
  run_case "auto, SM 9.0 and R580 required (passes on an H200)" '{"compute_capabilities": ["9.0"], "min_driver": "580"}'
  run_case "SM 12.0 required (the reference machine's): must fail naming the GPU" '{"compute_capabilities": ["12.0"]}'
  run_case "8 GPUs required: must fail" '{"source": "nvidia_smi", "count": 8}'
} >"$log" 2>&1
cat "$log"
