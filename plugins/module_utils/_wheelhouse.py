# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure helpers of the wheelhouse module: the target (Python, platform) as uv and pip name it, a hashed
lock's pins, and wheel file names (no I/O here, so unit tests cover them directly)."""

from __future__ import annotations

import re
import traceback

from ansible_collections.gpulxc.sglang.plugins.module_utils._dists import canonical

# pip's own tag logic (PyPA's packaging): the standalone package, else the copy pip vendors - the module needs pip
# in its Python anyway (pip download), so one of them is there wherever the module can work
try:
    from packaging.tags import compatible_tags, cpython_tags
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    PACKAGING_IMPORT_ERROR = None
except ImportError:
    try:
        from pip._vendor.packaging.tags import compatible_tags, cpython_tags
        from pip._vendor.packaging.utils import InvalidWheelFilename, parse_wheel_filename

        PACKAGING_IMPORT_ERROR = None
    except ImportError:
        PACKAGING_IMPORT_ERROR = traceback.format_exc()

_PLATFORM = re.compile(r"^(x86_64|aarch64)-manylinux(?:_2_([0-9]+)|(2014))$")
_PYTHON = re.compile(r"^3\.([0-9]+)$")
_LOCK_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#\\]+)")
_LOCK_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")
# the legacy manylinux names and the glibc minor each stands for (PEP 599, 571, 513)
_LEGACY_MANYLINUX = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}


def parse_platform(platform):
    """(arch, glibc minor) of a uv platform such as x86_64-manylinux_2_36; ValueError otherwise."""
    match = _PLATFORM.match(platform)
    if not match:
        raise ValueError(
            f"{platform!r} is not a manylinux target: give <arch>-manylinux_2_<glibc minor> "
            "(x86_64 or aarch64, for example x86_64-manylinux_2_36 for Debian 12) or <arch>-manylinux2014"
        )
    return match.group(1), int(match.group(2) or 17)


def parse_python(version):
    """The minor of a CPython 3.X version string; ValueError otherwise."""
    match = _PYTHON.match(version)
    if not match:
        raise ValueError(f"{version!r} is not a Python version such as 3.11 (major.minor)")
    return int(match.group(1))


def platform_tags(platform):
    """The platform tags a glibc accepts, newest first, as packaging's manylinux tags are for the running glibc:
    manylinux_2_N for N from the target's glibc down to 5, and the legacy names of those."""
    arch, glibc = parse_platform(platform)
    tags = [f"manylinux_2_{n}_{arch}" for n in range(glibc, 4, -1)]
    return tags + [f"{name}_{arch}" for n, name in _LEGACY_MANYLINUX.items() if n <= glibc]


def pip_target_args(python_version, platform):
    """`pip download` options for wheels that install on the target: every manylinux tag its glibc accepts
    (pip expands none of manylinux_2_N itself), and CPython's ABIs for that version."""
    minor = parse_python(python_version)
    args = [arg for tag in platform_tags(platform) for arg in ("--platform", tag)]
    args += ["--python-version", f"3.{minor}", "--implementation", "cp"]
    args += [arg for abi in (f"cp3{minor}", "abi3", "none") for arg in ("--abi", abi)]
    return args


def locked(lock_text):
    """({canonical name: (version, {sha256, ...})}, [top-level lines that are not name==version pins]) of a lock
    made with `uv pip compile --generate-hashes`: a direct URL (`name @ https://...`) or an editable requirement
    is not a wheel an index serves."""
    found, others = {}, []
    current = None
    for line in lock_text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith((" ", "\t")):
            match = _LOCK_PIN.match(line)
            current = canonical(match.group(1)) if match else None
            if match:
                found[current] = (match.group(2), set())
            else:
                others.append(line.rstrip(" \\"))
        if current is not None:
            found[current][1].update(_LOCK_HASH.findall(line))
    return found, others


def wheel_key(filename):
    """(canonical name, version) of a wheel file name (PEP 427, as packaging parses it); None for anything else."""
    try:
        name, version, _build, _tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    return canonical(name), str(version)


def compatible(filename, python_version, platform):
    """Whether a wheel installs on the target: one of its tags is among those pip accepts for CPython 3.X on the
    platform (packaging's cpython_tags and compatible_tags: its own ABI, abi3 of 3.X or older, pure-Python tags of
    3.X or older, any glibc up to the platform's). A lock lists the hashes of every file of a version, so a file
    left from another target must not pass for the target's."""
    try:
        _name, _version, _build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return False
    python = (3, parse_python(python_version))
    platforms = platform_tags(platform)
    accepted = {*cpython_tags(python, platforms=platforms), *compatible_tags(python, f"cp3{python[1]}", platforms)}
    return not tags.isdisjoint(accepted)


def requirements_text(entries):
    """A hashed requirements file for `pip download --require-hashes` of {name: (version, hashes)}."""
    lines = []
    for name in sorted(entries):
        version, hashes = entries[name]
        lines.append(f"{name}=={version}" + "".join(f" --hash=sha256:{h}" for h in sorted(hashes)))
    return "\n".join(lines) + "\n"
