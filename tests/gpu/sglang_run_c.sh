#!/bin/bash
# Run C (after run B, machine warm): the failure cascade on the real server, each recipe fix undone in turn, all at
# once on the one GPU. Each variant is an instance of the collection's own unit (sglang@10..14) with a drop-in that
# swaps the environment file for a copy with one fix undone (systemd's EnvironmentFile= reset, as an operator's
# drop-in would) and its own empty JIT caches: lib64 and libcudart.so from a CUDA_HOME of links to the roles'
# toolkit with that one link left out; LD_LIBRARY_PATH and CUDA_HOME left out of the file; ninja left off PATH.
# The CCCL headers cannot be undone for one variant alone (nvcc finds its headers from its own real path):
# CCCL=1 runs that one alone afterwards, the headers of nvidia-cuda-cccl removed, then playbooks/stack.yml again.
set -uo pipefail
source tests/gpu/run_env.sh
log=$OUT/c.txt
real=$(sed -n 's/^CUDA_HOME=//p' /etc/sglang/cuda.env)
# VARIANTS="CUDA_HOME ninja" runs only those (a later run that needs one row again)
read -ra variants <<< "${VARIANTS:-lib64 libcudart.so LD_LIBRARY_PATH CUDA_HOME ninja}"
farm() { rm -rf "$1"; mkdir -p "$1"; for e in "$2"/*; do ln -s "$e" "$1/"; done; }
variant() {  # N NAME: the environment file with NAME's fix undone, instance N's files, its drop-in
  local n=$1 name=$2 home="$real" env=/etc/sglang/cascade-$1.env c=/var/cache/sglang/cascade-$1
  case $name in
    lib64) home=/opt/gpulxc-cascade/lib64; farm "$home" "$real"; rm "$home/lib64" ;;
    libcudart.so) home=/opt/gpulxc-cascade/libcudart; farm "$home" "$real"; rm "$home/lib" "$home/lib64"
      farm "$home/lib" "$real/lib"; rm "$home/lib/libcudart.so"; ln -s lib "$home/lib64" ;;
  esac
  sed -e "s|$real|$home|g" -e "s|^FLASHINFER_WORKSPACE_BASE=.*|FLASHINFER_WORKSPACE_BASE=$c|" \
      -e "s|^TVM_FFI_CACHE_DIR=.*|TVM_FFI_CACHE_DIR=$c/tvm-ffi|" -e "s|^TRITON_CACHE_DIR=.*|TRITON_CACHE_DIR=$c/triton|" \
      -e "s|^TORCHINDUCTOR_CACHE_DIR=.*|TORCHINDUCTOR_CACHE_DIR=$c/torchinductor|" /etc/sglang/cuda.env > "$env"
  case $name in
    LD_LIBRARY_PATH) sed -i '/^LD_LIBRARY_PATH=/d' "$env" ;;
    CUDA_HOME) sed -i '/^CUDA_HOME=/d; /^CUDA_PATH=/d' "$env" ;;
    ninja) sed -i "s|^PATH=/opt/sglang/venv/bin:|PATH=|" "$env" ;;
  esac
  rm -rf "$c"; mkdir -p "$c"; chown sglang: "$c"
  sed -e "s/^port: .*/port: 300$n/" -e "s/^nccl-port: .*/nccl-port: 310$n/" -e "s/^mem-fraction-static: .*/mem-fraction-static: 0.08/" \
      /etc/sglang/instance-1.yaml > /etc/sglang/instance-$n.yaml
  printf 'CUDA_VISIBLE_DEVICES=0\nGPULXC_GPU_BEFORE=""\n' > /etc/sglang/instance-$n.env
  chgrp sglang /etc/sglang/instance-$n.* "$env"; chmod 0640 /etc/sglang/instance-$n.* "$env"
  mkdir -p "/etc/systemd/system/sglang@$n.service.d"
  printf '[Service]\n# run C: recipe fix "%s" undone\nEnvironmentFile=\nEnvironmentFile=%s\nEnvironmentFile=/etc/sglang/instance-%s.env\n' \
    "$name" "$env" "$n" > "/etc/systemd/system/sglang@$n.service.d/cascade.conf"
  : > "/run/gpulxc-units/sglang@$n.log"
}
watch() {  # N...: until each has ended or answers /health 200, at most 420 s
  local left=("$@") t0; t0=$(date +%s)
  while [ ${#left[@]} -gt 0 ] && [ $(($(date +%s) - t0)) -lt 420 ]; do
    local still=()
    for n in "${left[@]}"; do
      if [ "$(units status "$UNIT" "$n" --json 2>/dev/null | "$py" -c 'import json, sys; d = json.load(sys.stdin); print(d["active"] or d["activating"])')" != True ]; then echo "sglang@$n ended after $(($(date +%s) - t0))s"
      elif [ "$(probe timeline 300$n 1 | grep -c '"healthy": true')" = 1 ]; then echo "sglang@$n /health 200 after $(($(date +%s) - t0))s"
      else still+=("$n"); fi
    done
    left=("${still[@]}"); sleep 3
  done
  for n in "${left[@]}"; do echo "sglang@$n still starting after $(($(date +%s) - t0))s"; done
}
report() {  # N NAME
  echo "--- sglang@$1: $2 undone"
  units status "$UNIT" "$1" --json 2>/dev/null | "$py" -c 'import json, sys; d = json.load(sys.stdin); print({k: d["state"].get(k) for k in ("result", "exit_code", "exit_status")})'
  grep -n -m 6 -E "rror|No such file|cannot find|not found|Traceback|Killed|ninja: " "/run/gpulxc-units/sglang@$1.log" | cut -c1-400
  tail -n 4 "/run/gpulxc-units/sglang@$1.log" | cut -c1-300
  find "/var/cache/sglang/cascade-$1" -name build.ninja -exec grep -h "^cuda_home = \|^nvcc = " {} + 2>/dev/null | sort | uniq -c
}
{
stamp "C: the servers of run B stopped; five variants, one fix each undone"
units stop "$SMG" >/dev/null 2>&1; units stop "$UNIT" 0 --timeout 30 >/dev/null 2>&1; units stop "$UNIT" 1 --timeout 30 >/dev/null 2>&1
echo "ninja on PATH without the venv: $(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin command -v ninja || echo none)"
n=10; for name in "${variants[@]}"; do variant $n "$name"; n=$((n + 1)); done
grep -H "" /etc/systemd/system/sglang@10.service.d/cascade.conf; diff /etc/sglang/cuda.env /etc/sglang/cascade-14.env
n=10; for name in "${variants[@]}"; do units start "$UNIT" $n --clamp-limits --no-block 2>/dev/null; n=$((n + 1)); sleep 8; done
watch 10 11 12 13 14
n=10; for name in "${variants[@]}"; do report $n "$name"; n=$((n + 1)); done
for n in 10 11 12 13 14; do units stop "$UNIT" $n --timeout 20 >/dev/null 2>&1; done
if [ "${CCCL:-0}" = 1 ]; then
  stamp "the CCCL headers of nvidia-cuda-cccl removed from the roles' toolkit, one variant alone"
  record=$(ls -d /opt/sglang/venv/lib/python3.12/site-packages/nvidia_cuda_cccl*.dist-info)/RECORD
  removed=0; while IFS=, read -r f _; do case $f in *include/*) rm -f "/opt/sglang/venv/lib/python3.12/site-packages/$f" && removed=$((removed + 1)) ;; esac; done < "$record"
  echo "$removed header files removed"; variant 15 CCCL; rm -f /etc/systemd/system/sglang@15.service.d/cascade.conf
  sed -i "s|^FLASHINFER_WORKSPACE_BASE=.*|FLASHINFER_WORKSPACE_BASE=/var/cache/sglang/cascade-15|" /etc/sglang/cascade-15.env
  printf '[Service]\nEnvironmentFile=\nEnvironmentFile=/etc/sglang/cascade-15.env\nEnvironmentFile=/etc/sglang/instance-15.env\n' > /etc/systemd/system/sglang@15.service.d/cascade.conf
  units start "$UNIT" 15 --clamp-limits --no-block 2>/dev/null; watch 15; report 15 "the CCCL headers"; units stop "$UNIT" 15 --timeout 20 >/dev/null 2>&1
  stamp "playbooks/stack.yml puts them back"
  "$py" -c 'import sys; from ansible.cli.playbook import main; sys.argv[0] = "ansible-playbook"; main()' playbooks/stack.yml \
    -i tests/gpu/inventory.yml -l h200-sglang --skip-tags jit_toolchain 2>&1 | grep -E "changed:|h200-sglang +:" | tail -6
fi
stamp "C done"
} > "$log" 2>&1
for n in 10 11 12 13 14 15; do cp "/run/gpulxc-units/sglang@$n.log" "$OUT/c-sglang-$n.log" 2>/dev/null; done
tail -c 9000 "$log"
