# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that turn a stack profile (gpulxc.sglang.stack_profile) into what the install, the wheelhouse
and the published facts need: one place, so the container's resolve and the wheelhouse's agree."""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.gpulxc.sglang.plugins.module_utils._dists import canonical


def to_requirements(pins):
    """{name: version} -> ["name==version", ...] (exact pins, in order)."""
    if not isinstance(pins, dict):
        raise AnsibleFilterError(f"to_requirements expects a mapping of names to versions, got {pins!r}")
    return [f"{name}=={version}" for name, version in pins.items()]


def stack_cuda(profile, family=None, runtime=None, runtime_override=None, nvrtc=None):
    """The profile's CUDA wheels, each part replaced by a setting that is not empty (sglang_stack_cuda_*)."""
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


def stack_fact(profile, locked, venv, stack=None, source=None):
    """The stack object (gpulxc_stack, kept as ansible_local.gpulxc_stack): the profile, the venv and the stack
    directory it links to, the locked versions of the profile's packages, its CUDA wheels, the flags this release
    spells differently and the attention backends per compute capability."""
    locked = {canonical(name): version for name, version in (locked or {}).items()}
    return {
        "profile": profile["name"],
        "profile_source": source or profile["name"],
        "venv": venv,
        "stack": stack or venv,
        "packages": {name: locked.get(canonical(name)) for name in profile["packages"]},
        "cuda": profile["cuda"],
        "flag_names": profile.get("flag_names", {}),
        "attention_backends": profile["attention_backends"],
        "fallback_attention_backend": profile["fallback_attention_backend"],
    }


def _positive(value):
    return re.fullmatch(r"[1-9][0-9]*", str(value)) is not None


def _minor(version):
    return re.sub(r"^([0-9]+\.[0-9]+)\..*$", r"\1", str(version))


def _release(cuda):
    """The family's release as nvcc reports it (major.minor of nvcc's version)."""
    return ".".join(str(cuda_pins(cuda)["nvidia-cuda-nvcc"]).split(".")[:2])


def stack_errors(profile, python, python_choice, *, keep_stacks, install_timeout, progress_interval):
    """Every reason the stack's inputs cannot be installed, one message each naming the variable to set: the
    profile's Pythons against the venv's, the CUDA wheels (one compiler minor, exact runtime and nvrtc), the role's
    numbers."""
    cuda = profile["cuda"]
    minors = list(dict.fromkeys(_minor(version) for version in cuda["family"].values()))
    exact = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")
    checks = [
        (
            python not in profile["pythons"],
            f"the virtual environment would use Python {python}, which stack profile {profile['name']} does not support"
            f" (it has wheels for {', '.join(profile['pythons'])}): choose another {python_choice} or another profile"
            " (sglang_stack_profile).",
        ),
        (
            len(minors) != 1,
            f"sglang_stack: sglang_stack_cuda_family mixes CUDA minors {minors} ({cuda['family']}): nvcc, nvvm, crt and"
            " cccl must be one minor (for example all 13.2.x), or nvcc runs the cicc and ptxas of another release.",
        ),
        (
            not (exact.match(str(cuda["runtime"])) and exact.match(str(cuda["nvrtc"]))),
            f"sglang_stack: sglang_stack_cuda_runtime_version ({cuda['runtime']}) and sglang_stack_cuda_nvrtc_version"
            f" ({cuda['nvrtc']}) must be exact versions such as 13.2.75.",
        ),
        (
            not _positive(keep_stacks),
            f"sglang_stack_keep_stacks is {keep_stacks}: keep at least 1 stack (the current one; 2 keeps the one it"
            " replaced for a rollback).",
        ),
        (
            not _positive(install_timeout),
            f"sglang_stack_install_timeout is {install_timeout}: give the seconds the install may take (a whole number"
            " above 0, such as 3600).",
        ),
        (
            not _positive(progress_interval),
            f"sglang_stack_progress_interval is {progress_interval}: give the seconds between two lines of progress (a"
            " whole number above 0, such as 20).",
        ),
    ]
    return [message for failed, message in checks if failed]


def stack_installed_errors(stack, versions, nvcc_release):
    """After the install: the stack's CUDA wheels the venv lacks at their pins (the installed versions by the
    names asked for), and nvcc reporting another release than the family's (None when nvcc does not run)."""
    pins = to_requirements(cuda_pins(stack["cuda"]))
    missing = [pin for pin in pins if pin not in to_requirements(versions or {})]
    release = _release(stack["cuda"])
    errors = []
    if missing:
        errors.append(f"sglang_stack: the virtual environment lacks {missing} after the stack was installed.")
    if nvcc_release != release:
        ran = nvcc_release or "nothing (it does not run)"
        errors.append(f"sglang_stack: nvcc in {stack['venv']} reports release {ran}, not the family's {release}.")
    return errors


def stack_repairs(result):
    """What a sync of the venv to its lock repaired (uv_stack's drift and damaged), one item each: a version moved
    back (installed -> locked), a package reinstalled for its files."""
    versions = [
        f"{name} {change['installed'] or 'absent'} -> {change['locked'] or 'removed'}"
        for name, change in result["drift"].items()
    ]
    files = [
        f"{name} {result['locked'][name]} reinstalled ({damage['files']} of its files gone or changed, such as"
        f" {damage['paths'][0]})"
        for name, damage in result["damaged"].items()
    ]
    return versions + files


class FilterModule:
    def filters(self):
        return {
            "to_requirements": to_requirements,
            "stack_cuda": stack_cuda,
            "cuda_pins": cuda_pins,
            "stack_requirements": stack_requirements,
            "stack_fact": stack_fact,
            "stack_errors": stack_errors,
            "stack_installed_errors": stack_installed_errors,
            "stack_repairs": stack_repairs,
        }
