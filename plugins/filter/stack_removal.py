# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What role sglang_stack's removal deletes (documented in stack_removal.yml next to this file)."""

from __future__ import annotations

import posixpath


def stack_removal(venv, *, dir, stacks_dir="", facts_dir=""):
    """The paths the removal deletes (the venv link without its trailing slash, the lock's directory, the stacks'
    directory if any, the stack's fact) and the parents it removes once left empty (the venv's, the lock's)."""
    venv, lock_dir = str(venv).rstrip("/"), str(dir)
    return {
        "paths": [venv, lock_dir] + ([stacks_dir] if stacks_dir else []) + [f"{facts_dir}/gpulxc_stack.fact"],
        "parents": [posixpath.dirname(venv), posixpath.dirname(lock_dir.rstrip("/"))],
    }


class FilterModule:
    def filters(self):
        return {"stack_removal": stack_removal}
