# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure helpers of the wheelhouse module: the target (Python, platform) as uv and pip name it, a hashed
lock's pins, and wheel file names (no I/O here, so unit tests cover them directly)."""

from __future__ import annotations

import re

from ansible_collections.gpulxc.sglang.plugins.module_utils._uv_stack import canonical

_PLATFORM = re.compile(r"^(x86_64|aarch64)-manylinux(?:_2_([0-9]+)|(2014))$")
_PYTHON = re.compile(r"^3\.([0-9]+)$")
_LOCK_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#\\]+)")
_LOCK_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")
# PEP 427: {distribution}-{version}(-{build tag})?-{python tag}-{abi tag}-{platform tag}.whl
_WHEEL = re.compile(r"^([^-]+)-([^-]+)(?:-[0-9][^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")
_WHEEL_TAGS = re.compile(r"^[^-]+-[^-]+(?:-[0-9][^-]*)?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$")


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


def pip_target_args(python_version, platform):
    """`pip download` options for wheels that install on the target: every manylinux tag its glibc accepts
    (pip expands none of manylinux_2_N itself), and CPython's ABIs for that version."""
    arch, glibc = parse_platform(platform)
    minor = parse_python(python_version)
    tags = [f"manylinux_2_{n}_{arch}" for n in range(glibc, 4, -1)]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    tags += [f"{name}_{arch}" for n, name in legacy.items() if n <= glibc]
    args = [arg for tag in tags for arg in ("--platform", tag)]
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
    """(canonical name, version) of a wheel file name; None for anything else."""
    match = _WHEEL.match(filename)
    if not match:
        return None
    return canonical(match.group(1)), match.group(2)


def _manylinux_glibc(tag, arch):
    """The glibc minor a platform tag needs on `arch` (manylinux_2_N, manylinux2014/2010/1); None otherwise."""
    legacy = {f"manylinux2014_{arch}": 17, f"manylinux2010_{arch}": 12, f"manylinux1_{arch}": 5}
    if tag in legacy:
        return legacy[tag]
    match = re.match(rf"^manylinux_2_([0-9]+)_{arch}$", tag)
    return int(match.group(1)) if match else None


def compatible(filename, python_version, platform):
    """Whether a wheel installs on the target, as pip's tags for it say: CPython 3.X (its own ABI, abi3 of 3.X or
    older, or no ABI for py3 or py3Y with Y <= X) on the platform's architecture with a glibc at most the
    platform's. A lock lists the hashes of every file of a version, so a file left from another target must not
    pass for the target's."""
    match = _WHEEL_TAGS.match(filename)
    if not match:
        return False
    arch, glibc = parse_platform(platform)
    minor = parse_python(python_version)
    pythons, abis, platforms = (set(match.group(g).split(".")) for g in ("py", "abi", "plat"))
    needs = [_manylinux_glibc(tag, arch) for tag in platforms]
    if "any" not in platforms and not any(n is not None and n <= glibc for n in needs):
        return False
    own = f"cp3{minor}"
    stable = {p for p in pythons if re.match(r"^cp3([0-9]+)$", p) and int(p[3:]) <= minor}
    return bool(
        (own in abis and own in pythons)
        or ("abi3" in abis and stable)
        or ("none" in abis and pythons & ({"py3", own} | {f"py3{older}" for older in range(minor + 1)}))
    )


def requirements_text(entries):
    """A hashed requirements file for `pip download --require-hashes` of {name: (version, hashes)}."""
    lines = []
    for name in sorted(entries):
        version, hashes = entries[name]
        lines.append(f"{name}=={version}" + "".join(f" --hash=sha256:{h}" for h in sorted(hashes)))
    return "\n".join(lines) + "\n"
