# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller side of gpulxc.sglang.renamed_variables (its documentation is the module's)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase


def renamed_in_use(renamed, defined, version):
    """(the old names set, deprecation entries as a task result carries them)."""
    used = {old: new for old, new in renamed.items() if old in defined}
    deprecations = [
        {
            "msg": f"{old} is renamed {new}: set {new} instead ({old} is read in its place until then).",
            "version": version,
            "collection_name": "gpulxc.sglang",
        }
        for old, new in used.items()
    ]
    return used, deprecations


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("renamed", "version"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        renamed, version = self._task.args.get("renamed"), self._task.args.get("version")
        if not isinstance(renamed, dict) or not version:
            raise AnsibleActionFail("renamed_variables: give renamed (old name: new name) and version.")
        used, deprecations = renamed_in_use(renamed, task_vars or {}, str(version))
        result.update(changed=False, renamed=used)
        if deprecations:
            result["deprecations"] = deprecations
        return result
