#!/usr/bin/env bash
# Run the validation binary that cuda_surgery built in a lab CT (sm_90 + sm_120 code, linked
# against the lab's generated libcuda stub) on the lent H200, with the CT's libcudart.so.13 and the
# machine's real driver libcuda.so.1. Carried in .cache/gpu-validate (see README.md).
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
log=$out/validate-binary-real-gpu.txt
dir=$PWD/.cache/gpu-validate
{
  echo "# cuda_surgery's validation binary on a real GPU"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=index,name,compute_cap,driver_version --format=csv,noheader
  echo "sha256: $(sha256sum "$dir/validate" | cut -d' ' -f1)"
  chmod +x "$dir/validate"
  export LD_LIBRARY_PATH="$dir:/usr/local/nvidia/lib:/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "--- ldd"
  ldd "$dir/validate" | grep -E 'libcuda|libcudart'
  echo "--- run"
  "$dir/validate"
  echo "exit code: $?"
} >"$log" 2>&1
cat "$log"
