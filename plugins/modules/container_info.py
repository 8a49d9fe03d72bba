#!/usr/bin/python
# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: container_info
short_description: What the SGLang stack needs to know about the container before installing into it
version_added: 0.2.0
description:
  - Reads, without changing anything, the container's glibc version and CPU architecture, the C(X.Y) version of
    the Python a virtual environment would be made from, whether a shared cache directory is a mount point, and
    for a wheelhouse whether it holds the uv wheel and which Python and platform it was built for (the first
    line of its C(stack.in), which gpulxc.sglang.wheelhouse writes) and whether those install here.
  - With O(uv), that uv's version; with O(debian_packages), each package's state in dpkg's status database.
author:
  - gpulxc.sglang developers (@gpulxc)
extends_documentation_fragment:
  - gpulxc.sglang.attributes
  - gpulxc.sglang.attributes.info_module
options:
  python:
    description: The Python the virtual environment is made from; empty to read no Python.
    type: str
    default: ""
  cache_dir:
    description: A directory that must be a mount point; empty for none.
    type: str
    default: ""
  wheelhouse:
    description: The container path of a wheelhouse; empty for none.
    type: str
    default: ""
  uv_wheel:
    description: The file name of the uv wheel the wheelhouse must hold.
    type: str
    default: ""
  uv:
    description: A uv program whose version to read (C(uv --version)); empty for none.
    type: str
    default: ""
  venv:
    description: A virtual environment's path, to say whether it is a link (a stack's); empty for none.
    type: str
    default: ""
  debian_packages:
    description: Debian packages whose state to read from C(/var/lib/dpkg/status).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Read the container's glibc and Python
  gpulxc.sglang.container_info:
    python: /usr/bin/python3
  register: container
"""

RETURN = r"""
glibc:
  description: The C library's version (C(0) when it is not glibc).
  returned: always
  type: str
  sample: "2.36"
arch:
  description: The CPU architecture (C(uname -m)).
  returned: always
  type: str
  sample: x86_64
python:
  description: The Python's C(X.Y) version (empty when it does not run or without O(python)) and its error output.
  returned: always
  type: dict
  sample: {"path": "/usr/bin/python3", "version": "3.11", "error": ""}
cache_mounted:
  description: Whether O(cache_dir) is a mount point (null without O(cache_dir)).
  returned: always
  type: bool
wheelhouse:
  description:
    - For O(wheelhouse) (null without it) - C(has_uv), C(target) (the Python and platform it was built for,
      null without a C(stack.in)) and C(fits) (that target installs here - the same Python and architecture, a
      glibc no newer than the container's).
  returned: always
  type: dict
  sample: {"has_uv": true, "target": {"python": "3.11", "platform": "x86_64-manylinux_2_36", "glibc": "2.36"},
           "fits": true}
uv_version:
  description: The version O(uv) reports; empty without O(uv) or when it does not run.
  returned: always
  type: str
  sample: 0.9.5
debian_packages:
  description:
    - Per package of O(debian_packages), its state in dpkg's database (the third word of its C(Status), such as
      C(installed) or C(config-files)); C(not-installed) when dpkg does not know it.
  returned: always
  type: dict
  sample: {ninja-build: installed, g++: not-installed}
venv_link:
  description: Whether O(venv) is a symbolic link (a stack's, made by gpulxc.sglang.uv_stack with O(venv)'s stacks_dir).
  returned: always
  type: bool
"""

import os
import platform
import re

from ansible.module_utils.basic import AnsibleModule

_TARGET = re.compile(r"^# wheelhouse target: Python (3\.\d+), ((x86_64|aarch64)-manylinux(?:_2_(\d+)|(2014)))$")
_PROBE = "import sys; print('%d.%d' % sys.version_info[:2])"


def parse_target(line):
    """The first line of a wheelhouse's stack.in -> {python, platform, arch, glibc}, or None."""
    match = _TARGET.match((line or "").strip())
    if not match:
        return None
    python, target, arch, minor, _manylinux2014 = match.groups()
    return {"python": python, "platform": target, "arch": arch, "glibc": f"2.{minor}" if minor else "2.17"}


def version_tuple(text):
    return tuple(int(part) for part in re.findall(r"\d+", text or "0"))


def fits(target, python, arch, glibc):
    return bool(
        target
        and target["python"] == python
        and target["arch"] == arch
        and version_tuple(target["glibc"]) <= version_tuple(glibc)
    )


MOUNTINFO = "/proc/self/mountinfo"


def is_mount_point(path):
    """Whether path is a mount point, from the mount table as mountpoint(1) reads it: a bind mount of a directory
    of the same file system is one (os.path.ismount compares devices and misses it)."""
    target = os.path.realpath(path)
    try:
        with open(MOUNTINFO) as handle:
            # field 5 is the mount point, with space, tab, newline and backslash written as octal escapes
            points = {line.split()[4].encode().decode("unicode_escape") for line in handle if line.strip()}
    except (OSError, IndexError):
        return os.path.ismount(target)
    return target in points


DPKG_STATUS = "/var/lib/dpkg/status"


def parse_dpkg_status(text, names):
    """{name: state} for each of names from dpkg's status file (RFC 822 stanzas); a multi-arch package is
    installed when one of its architectures is."""
    states = dict.fromkeys(names, "not-installed")
    for stanza in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line[0].isspace())
        name, status = fields.get("Package"), fields.get("Status", "").split()
        if name in states and len(status) == 3 and states[name] != "installed":
            states[name] = status[2]
    return states


def parse_uv_version(text):
    """'0.9.5' from 'uv 0.9.5' or 'uv 0.9.5 (d5f39331a 2025-10-21)'; '' otherwise."""
    match = re.match(r"uv (\S+)", text.strip())
    return match.group(1) if match else ""


def glibc_version():
    try:
        name = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
    except (ValueError, OSError):
        name = None
    return name.split()[-1] if name and name.startswith("glibc ") else "0"


def first_line(path):
    try:
        with open(path) as handle:
            return handle.readline()
    except OSError:
        return None


def read_or_empty(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def run(module, program, *args):
    """run_command, with a program that does not run as (127, '', why) instead of a failed module."""
    if not os.access(program, os.X_OK):
        return 127, "", f"{program}: no such executable"
    return module.run_command([program, *args])


def main():
    module = AnsibleModule(
        argument_spec={
            "python": {"type": "str", "default": ""},
            "cache_dir": {"type": "str", "default": ""},
            "wheelhouse": {"type": "str", "default": ""},
            "uv_wheel": {"type": "str", "default": ""},
            "uv": {"type": "str", "default": ""},
            "debian_packages": {"type": "list", "elements": "str", "default": []},
            "venv": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    params = module.params
    python = {"path": params["python"], "version": "", "error": ""}
    if params["python"]:
        rc, out, err = run(module, params["python"], "-c", _PROBE)
        if rc == 0 and re.fullmatch(r"3\.\d+", out.strip()):
            python["version"] = out.strip()
        else:
            python["error"] = (err or out).strip() or f"exit status {rc}"
    result = {
        "changed": False,
        "glibc": glibc_version(),
        "arch": platform.machine(),
        "python": python,
        "cache_mounted": is_mount_point(params["cache_dir"]) if params["cache_dir"] else None,
        "wheelhouse": None,
        "uv_version": parse_uv_version(run(module, params["uv"], "--version")[1]) if params["uv"] else "",
        "debian_packages": {},
        "venv_link": bool(params["venv"]) and os.path.islink(params["venv"].rstrip("/")),
    }
    if params["debian_packages"]:
        result["debian_packages"] = parse_dpkg_status(read_or_empty(DPKG_STATUS), params["debian_packages"])
    if params["wheelhouse"]:
        target = parse_target(first_line(os.path.join(params["wheelhouse"], "stack.in")))
        result["wheelhouse"] = {
            "has_uv": bool(params["uv_wheel"])
            and os.path.isfile(os.path.join(params["wheelhouse"], params["uv_wheel"])),
            "target": target,
            "fits": fits(target, python["version"], result["arch"], result["glibc"]),
        }
    module.exit_json(**result)


if __name__ == "__main__":
    main()
