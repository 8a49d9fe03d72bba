#!/bin/bash
# On this (connected) machine: the wheels the real-GPU stages carry, in batches under the device tool's
# 64 MiB per call (the working tree travels too). nvvm (64 MB as a wheel) and nvcc are repacked with xz
# (45 MB and 31 MB); the stages unpack them into the venv's site-packages, dist-info included.
set -euo pipefail
cd "$(dirname "$0")/../.."
pip=.venv/bin/pip
get() { "$pip" download -q --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
          --platform manylinux_2_17_x86_64 --platform manylinux_2_12_x86_64 -d "$@"; }
repack() {  # wheel -> .tar.xz of its contents
  local tmp; tmp=$(mktemp -d); (cd "$tmp" && unzip -q "$1" && tar cf - . | xz -T0 -6) > "$2"; rm -rf "$tmp"; }
rm -rf .cache/gpu-wheels .cache/gpuA .cache/gpuB .cache/gpu-dl
mkdir -p .cache/gpu-wheels .cache/gpuA .cache/gpuB .cache/gpu-dl
get .cache/gpu-wheels ansible-core==2.19.14 'resolvelib>=0.5.3,<2.0.0'
get .cache/gpu-dl nvidia-cuda-nvcc==13.2.78 nvidia-nvvm==13.2.78 nvidia-cuda-crt==13.2.78 nvidia-cuda-runtime==13.2.75 \
    nvidia-cuda-cccl==13.2.75 flashinfer-python==0.6.11.post1 apache-tvm-ffi==0.1.9
cp .cache/gpu-wheels/*.whl .cache/gpu-dl/flashinfer_python-*.whl .cache/gpuA/
repack "$PWD"/.cache/gpu-dl/nvidia_nvvm-*.whl .cache/gpuA/nvvm.tar.xz
repack "$PWD"/.cache/gpu-dl/nvidia_cuda_nvcc-*.whl .cache/gpuB/nvcc.tar.xz
cp .cache/gpu-dl/nvidia_cuda_runtime-* .cache/gpu-dl/nvidia_cuda_cccl-* .cache/gpu-dl/nvidia_cuda_crt-* \
   .cache/gpu-dl/apache_tvm_ffi-* .cache/gpuB/
du -sh .cache/gpu-wheels .cache/gpuA .cache/gpuB
