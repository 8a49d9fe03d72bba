# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that turn a stack profile (gpulxc.sglang.stack_profile) into what the install, the wheelhouse
and the published facts need: one place, so the container's resolve and the wheelhouse's agree."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.gpulxc.sglang.plugins.module_utils._dists import canonical


def to_requirements(pins):
    """{name: version} -> ["name==version", ...] (exact pins, in order)."""
    if not isinstance(pins, dict):
        raise AnsibleFilterError(f"to_requirements expects a mapping of names to versions, got {pins!r}")
    return [f"{name}=={version}" for name, version in pins.items()]


def stack_cuda(profile, family=None, runtime=None, runtime_override=None, nvrtc=None):
    """The profile's CUDA wheels, each part replaced by a setting that is not empty (cuda_wheels_*)."""
    cuda = dict(profile["cuda"])
    if family:
        cuda["family"] = {name: str(version) for name, version in family.items()}
    if runtime not in (None, ""):
        cuda["runtime"] = str(runtime)
    if runtime_override not in (None, ""):
        cuda["runtime_override"] = boolean(runtime_override, strict=False)
    if nvrtc not in (None, ""):
        cuda["nvrtc"] = str(nvrtc)
    return cuda


def cuda_pins(cuda):
    """Every CUDA wheel at its exact version: the compiler family, the runtime and nvrtc."""
    return {**cuda["family"], "nvidia-cuda-runtime": str(cuda["runtime"]), "nvidia-cuda-nvrtc": str(cuda["nvrtc"])}


def stack_requirements(profile, extra_packages=(), overrides=(), cuda=None):
    """The one resolve's inputs: the profile's pins, the extra packages, then the CUDA wheels; the declared
    overrides, then the runtime over torch's pin when runtime_override is true."""
    cuda = cuda or profile["cuda"]
    runtime = [f"nvidia-cuda-runtime=={cuda['runtime']}"] if boolean(cuda["runtime_override"], strict=False) else []
    return {
        "requirements": [*to_requirements(profile["packages"]), *extra_packages, *to_requirements(cuda_pins(cuda))],
        "overrides": [*overrides, *runtime],
    }


def stack_fact(profile, locked, venv, stack=None):
    """ansible_local.gpulxc_stack: the profile, the venv and the stack directory it links to, the locked versions
    of the profile's packages and the attention backends per compute capability."""
    locked = {canonical(name): version for name, version in (locked or {}).items()}
    return {
        "profile": profile["name"],
        "venv": venv,
        "stack": stack or venv,
        "packages": {name: locked.get(canonical(name)) for name in profile["packages"]},
        "attention_backends": profile["attention_backends"],
        "fallback_attention_backend": profile["fallback_attention_backend"],
    }


class FilterModule:
    def filters(self):
        return {
            "to_requirements": to_requirements,
            "stack_cuda": stack_cuda,
            "cuda_pins": cuda_pins,
            "stack_requirements": stack_requirements,
            "stack_fact": stack_fact,
        }
