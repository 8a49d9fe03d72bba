# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that decide for role uv_venv: what its preflight finds wrong with the container (module
gpulxc.sglang.container_info's result) and the settings, and what its final check finds wrong with the uv and the
virtual environment it made."""

from __future__ import annotations

import re

from ansible.module_utils.compat.version import LooseVersion


def uv_venv_errors(container, *, python, min_glibc, uv_wheel_sha256, path, cache_dir, wheelhouse, uv_wheel, host):
    """Every reason the container or the uv settings cannot make the venv, one message each naming the variable."""
    glibc, found, target = container["glibc"], container["python"], None
    house = container.get("wheelhouse") or {}
    if wheelhouse and house.get("has_uv") and not house.get("fits"):
        target = house.get("target")
        built = f"Python {target['python']}, {target['platform']}" if target else "an unknown target (no stack.in)"
        platform = f"{container['arch']}-manylinux_{str(glibc).replace('.', '_')}"
    checks = [
        (
            lambda: LooseVersion(str(glibc)) < LooseVersion(str(min_glibc)),
            lambda: (
                f"uv_venv: the container has glibc {glibc}; sglang >= 0.5.11 wheels need glibc >= {min_glibc}"
                " (Debian 12, Ubuntu 22.04 or newer): use a newer template (pct_container_ostemplate)."
            ),
        ),
        (
            lambda: not found["version"],
            lambda: (
                f"uv_venv_python {python} does not run in the container ({found['error']}): name an installed"
                " python3 (uv never downloads one)."
            ),
        ),
        (
            lambda: not re.match(r"^[0-9a-f]{64}$", str(uv_wheel_sha256)),
            lambda: "uv_venv_uv_wheel_sha256 must be a sha256 (64 hex digits).",
        ),
        (lambda: not re.match(r"^/", str(path)), lambda: "uv_venv_path must be an absolute path."),
        (
            lambda: cache_dir and not container["cache_mounted"],
            lambda: (
                f"uv_venv_cache_dir {cache_dir} is not a mount point in the container: bind-mount the node"
                " directory the containers share there (pct_container_mounts, read-write), or leave it empty for a"
                " cache of its own."
            ),
        ),
        (
            lambda: wheelhouse and not house.get("has_uv"),
            lambda: (
                f"uv_venv_wheelhouse {wheelhouse} has no {uv_wheel} in the container: build the wheelhouse for"
                f" this container on a connected machine (ansible-playbook gpulxc.sglang.wheelhouse -l {host}"
                " -e wheelhouse_dest=<dir>), bind-mount that directory there (pct_container_mounts), or leave"
                " uv_venv_wheelhouse empty to install from the package index."
            ),
        ),
        (
            lambda: wheelhouse and house.get("has_uv") and not house.get("fits"),
            lambda: (
                f"uv_venv_wheelhouse {wheelhouse} was built for {built}; this container runs Python"
                f" {found['version']} (uv_venv_python) with glibc {glibc} on {container['arch']}: build it again for it"
                f" (wheelhouse_python_version={found['version']}, wheelhouse_platform={platform})."
            ),
        ),
    ]
    return [message() for failed, message in checks if failed()]


def uv_venv_installed_errors(installed, *, uv_version, path, venv_link):
    """After the install: the uv on the PATH at its pin, and the venv's Python running (a stack's link is
    sglang_stack's to check)."""
    errors = []
    if installed["uv_version"] != uv_version:
        errors.append(
            f"uv_venv: /usr/local/bin/uv reports version {installed['uv_version'] or 'nothing (it does not run)'},"
            f" not {uv_version} (uv_venv_uv_version): remove /opt/gpulxc/uv/{uv_version} and run the role again."
        )
    if not installed["python"]["version"] and not venv_link:
        errors.append(
            f"uv_venv: the virtual environment {path} does not run ({installed['python']['error']}): remove it and"
            " run the role again."
        )
    return errors


class FilterModule:
    def filters(self):
        return {"uv_venv_errors": uv_venv_errors, "uv_venv_installed_errors": uv_venv_installed_errors}
