# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that decide for role jit_toolchain: its settings' errors, the packages to install, what its tool check
printed (the tools that do not run and the packages to reinstall) and the final check's errors."""

from __future__ import annotations

import re

# what `apt-get install` takes: a Debian package name, with an architecture or a version after a colon
_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.:-]+$")


def jit_toolchain_errors(packages):
    """The role's settings: jit_toolchain_packages names Debian packages."""
    if any(not _PACKAGE.match(str(name)) for name in packages):
        return [f"jit_toolchain: jit_toolchain_packages must name Debian packages (now {packages})."]
    return []


def jit_toolchain_missing(states):
    """container_info's debian_packages ({name: dpkg state}) -> the names not installed, in order."""
    return [name for name, state in states.items() if state != "installed"]


def jit_toolchain_apt_error(missing, failure, air_gapped):
    """Why apt could not install the missing packages, and where they must come from (air-gapped or not)."""
    if air_gapped:
        hint = (
            "The container is air-gapped (uv_venv_wheelhouse): apt reaches only the sources its template configures."
            " Point them at a mirror the container reaches, or use a template that has these packages."
        )
    else:
        hint = (
            "Check the container reaches its Debian mirror (apt sources, uv_venv_proxy does not apply to apt), or use"
            " a template that has these packages."
        )
    return (
        f"jit_toolchain: apt could not install {', '.join(missing)} in the container ({str(failure or '').strip()})."
        f" {hint}"
    )


def jit_toolchain_repair(lines):
    """The tool check's output (templates/tools.sh.j2: `name|path|owners` for each tool that does not run) -> the
    broken tools, the packages to reinstall (each once, in order) and the error when a tool has no package."""
    broken = []
    for line in lines or []:
        parts = line.split("|")
        broken.append({"tool": parts[0], "path": parts[1], "packages": parts[2].split()})
    orphans = [item for item in broken if not item["packages"]]
    errors = []
    if orphans:
        errors.append(
            f"jit_toolchain: {', '.join(item['tool'] for item in orphans)}"
            f" ({', '.join(item['path'] for item in orphans)}) does not run and no Debian package owns it, so"
            " reinstalling cannot bring it back: restore it by hand or remove what replaced it, then run again."
        )
    return {
        "broken": broken,
        "tools": [item["tool"] for item in broken],
        "reinstall": list(dict.fromkeys(package for item in broken for package in item["packages"])),
        "errors": errors,
    }


def jit_toolchain_verify_errors(result, packages):
    """The final check's result (the tool check without owners: each tool that does not run on stderr)."""
    if result["rc"] == 0:
        return []
    said = str(result.get("stderr") or "").strip() or f"a check exited {result['rc']}"
    return [
        f"jit_toolchain: the toolchain still does not run after installing its packages ({said}): check the"
        f" container's Debian packages (dpkg --verify {' '.join(packages)}) and run again."
    ]


class FilterModule:
    def filters(self):
        return {
            "jit_toolchain_errors": jit_toolchain_errors,
            "jit_toolchain_missing": jit_toolchain_missing,
            "jit_toolchain_apt_error": jit_toolchain_apt_error,
            "jit_toolchain_repair": jit_toolchain_repair,
            "jit_toolchain_verify_errors": jit_toolchain_verify_errors,
        }
