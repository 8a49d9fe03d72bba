# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a role installs with module uv_stack on a node of role uv_venv's settings (documented in uv_install.yml next
to this file): the node's install lock, the indexes uv may read and what a failure says when air-gapped. One place,
so sglang_stack's install and sglang_router's agree."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

# how each role's lock is built again into the wheelhouse
REBUILD = {
    "sglang_stack": "from these same inputs (",
    "sglang_router": "with the router's lock (wheelhouse_router: true; ",
}


def uv_install(wheelhouse, *, role, host="", cache_dir="", extra_index_urls=(), timeout=0, check_mode=False):
    """The install's `cache_lock` (none without a shared cache), `extra_index_urls` (none when air-gapped),
    `wheelhouse_hint` (what a failure adds when air-gapped, else "") and `async` (0 in check mode: the module runs
    in the task)."""
    if role not in REBUILD:
        raise AnsibleFilterError(f"uv_install: role must be one of {', '.join(REBUILD)}, got {role!r}")
    hint = ""
    if wheelhouse:
        hint = (
            f"Air-gapped, uv reads only the wheelhouse {wheelhouse}: build it again {REBUILD[role]}ansible-playbook"
            f" gpulxc.sglang.wheelhouse -l {host} -e wheelhouse_dest=<dir>)."
        )
    return {
        "cache_lock": f"{cache_dir}/gpulxc-install.lock" if cache_dir else None,
        "extra_index_urls": [] if wheelhouse else list(extra_index_urls or []),
        "wheelhouse_hint": hint,
        "async": 0 if check_mode else timeout,
    }


class FilterModule:
    def filters(self):
        return {"uv_install": uv_install}
