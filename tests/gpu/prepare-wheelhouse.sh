#!/bin/bash
# On this (connected) machine: the wheelhouse the real-GPU run installs from, built by the collection's own
# playbook for the lent machine (tests/gpu/inventory.yml: Python 3.12, glibc 2.39, profile-flashinfer.yml, no
# router), plus ansible-core for the machine (it has no Ansible). The wheels travel byte for byte (the run checks
# SHA256SUMS there): one tar, split into parts under the device tool's 64 MiB per call (the tree travels too).
set -euo pipefail
cd "$(dirname "$0")/../.."
ANSIBLE_CONFIG=ansible.cfg .venv/bin/ansible-playbook playbooks/wheelhouse.yml -i tests/gpu/inventory.yml -l h200 \
  -e wheelhouse_dest="$PWD/.cache/gpu-wheelhouse"
rm -rf .cache/gpu-ansible .cache/gpuW* .cache/gpu-transfer.tar
.venv/bin/pip download -q --isolated --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux2014_x86_64 -d .cache/gpu-ansible ansible-core==2.19.14 'resolvelib>=0.5.3,<2.0.0'
tar -cf .cache/gpu-transfer.tar -C .cache gpu-wheelhouse gpu-ansible
split -b 60M -d -a 1 .cache/gpu-transfer.tar .cache/gpu-transfer.part
for part in .cache/gpu-transfer.part*; do
  mkdir -p ".cache/gpuW${part##*part}" && mv "$part" ".cache/gpuW${part##*part}/part"
done
sha256sum .cache/gpu-transfer.tar > .cache/gpu-transfer.sha256
du -sh .cache/gpuW*
