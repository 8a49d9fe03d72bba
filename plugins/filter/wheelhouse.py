# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

# The decisions of role gpulxc.sglang.wheelhouse (documented in wheelhouse_errors.yml, wheelhouse_locks.yml and
# wheelhouse_differ.yml next to this file): its settings' checks, the locks it builds (the container's own resolves)
# and the run's containers that ask for another wheelhouse than the first. Messages word for word as the role's.

from __future__ import annotations

import re

from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.gpulxc.sglang.plugins.filter.stack import stack_requirements, to_requirements

WHOLE = r"^[1-9][0-9]*$"  # a whole number above 0


def _match(pattern, value):
    return re.match(pattern, str(value)) is not None


def wheelhouse_errors(settings):
    """The wheelhouse's settings that cannot work, each message naming the variable and the fix (empty: none).
    `settings`: dest, python_version, platform, router, timeout, progress_interval (wheelhouse_*), uv_wheel_sha256
    (uv_venv_uv_wheel_sha256) and router_version (sglang_router_version)."""
    s, found = settings, []
    if not _match("^/", s["dest"]):
        found.append(
            "wheelhouse_dest must be the absolute path of the directory to build the wheelhouse in (-e"
            " wheelhouse_dest=/srv/wheelhouse)."
        )
    if not _match(r"^3\.[0-9]+$", s["python_version"]):
        found.append(
            "wheelhouse_python_version %s must be the major.minor of the container Python, such as 3.11."
            % s["python_version"]
        )
    if not _match(r"^(x86_64|aarch64)-manylinux(_2_[0-9]+|2014)$", s["platform"]):
        found.append(
            "wheelhouse_platform %s must be <arch>-manylinux_2_<glibc minor> (x86_64 or aarch64), for example"
            " x86_64-manylinux_2_36 for Debian 12." % s["platform"]
        )
    if not _match("^[0-9a-f]{64}$", s["uv_wheel_sha256"]):
        found.append("uv_venv_uv_wheel_sha256 must be a sha256 (64 hex digits).")
    if boolean(s["router"], strict=False) and not _match("^[0-9][0-9A-Za-z.+-]*$", s["router_version"]):
        found.append("sglang_router_version %s must be an exact smg version such as 1.13.0." % s["router_version"])
    if not _match(WHOLE, s["timeout"]):
        found.append(
            "wheelhouse_timeout is %s: give the seconds the build may take (a whole number above 0, such as 7200)."
            % s["timeout"]
        )
    if not _match(WHOLE, s["progress_interval"]):
        found.append(
            "wheelhouse_progress_interval is %s: give the seconds between two lines of progress (a whole number"
            " above 0, such as 20)." % s["progress_interval"]
        )
    return found


def wheelhouse_locks(profile, extra_packages, overrides, *, stack_label, router=True, router_version=""):
    """The resolves the wheelhouse holds, the container's own: sglang_stack's (the same filter) and, with the
    router, sglang_router's smg pin."""
    stack = {**stack_requirements(profile, extra_packages=extra_packages, overrides=overrides), "name": "stack"}
    locks = [{**stack, "label": stack_label}]
    if boolean(router, strict=False):
        locks.append(
            {
                "name": "router",
                "label": "sglang_router (sglang_router_version)",
                "requirements": to_requirements({"smg": router_version}),
                "overrides": [],
            }
        )
    return locks


def wheelhouse_differ(play_hosts, hostvars):
    """The play's hosts whose wheelhouse_request is not the first host's (the module runs once, with its)."""
    requests = [hostvars[host]["wheelhouse_request"] for host in play_hosts]
    return [host for host, request in zip(play_hosts, requests, strict=True) if request != requests[0]]


class FilterModule:
    def filters(self):
        return {
            "wheelhouse_errors": wheelhouse_errors,
            "wheelhouse_locks": wheelhouse_locks,
            "wheelhouse_differ": wheelhouse_differ,
        }
