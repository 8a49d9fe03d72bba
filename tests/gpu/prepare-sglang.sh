#!/bin/bash
# On this (connected) machine: the wheelhouse for a real sglang 0.5.12 server on the lent machine, built by the
# collection's own playbook from host h200-sglang (tests/gpu/inventory.yml: Python 3.12, glibc 2.39, the
# profile sglang-0.5.12, the router's smg; its overrides say what the machine gives instead and what the server
# does not import), plus ansible-core for the machine (it has no Ansible). The wheels travel byte for byte: one
# tar, split into 60 MiB parts under the device tool's 64 MiB per call, one part a directory .cache/gpuS<N>
# (like prepare-wheelhouse.sh's .cache/gpuW<N>, which it leaves alone), and the tar's sha256.
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$SECONDS
ANSIBLE_CONFIG=ansible.cfg .venv/bin/ansible-playbook playbooks/wheelhouse.yml -i tests/gpu/inventory.yml \
  -l h200-sglang -e wheelhouse_dest="$PWD/.cache/gpu-sglang-wheelhouse"
echo "wheelhouse built in $((SECONDS - start)) s"
rm -rf .cache/gpu-sglang-ansible .cache/gpuS* .cache/gpu-sglang-transfer.tar .cache/gpu-sglang-transfer.part*
.venv/bin/pip download -q --isolated --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux2014_x86_64 -d .cache/gpu-sglang-ansible ansible-core==2.19.14 'resolvelib>=0.5.3,<2.0.0'
tar -cf .cache/gpu-sglang-transfer.tar -C .cache gpu-sglang-wheelhouse gpu-sglang-ansible
# two digits: more than ten parts
split -b 60M -d -a 2 .cache/gpu-sglang-transfer.tar .cache/gpu-sglang-transfer.part
for part in .cache/gpu-sglang-transfer.part*; do
  n=$((10#${part##*part}))
  mkdir -p ".cache/gpuS$n" && mv "$part" ".cache/gpuS$n/part"
done
sha256sum .cache/gpu-sglang-transfer.tar > .cache/gpu-sglang-transfer.sha256
echo "$(find .cache -maxdepth 1 -name 'gpuS*' | wc -l) parts of $(stat -c %s .cache/gpu-sglang-transfer.tar) bytes" \
  "($(du -h .cache/gpu-sglang-transfer.tar | cut -f1)); sha256 $(cut -d' ' -f1 .cache/gpu-sglang-transfer.sha256)"
echo "done in $((SECONDS - start)) s"
