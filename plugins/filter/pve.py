# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

# The input rules of gpulxc.sglang.pct_container's Proxmox-bound variables, by the rules real pct applies
# (documented in pve_errors.yml next to this file; the rules in plugin_utils/pve_rules.py, which
# gpulxc.sglang.pct_container_plan applies too).

from __future__ import annotations

from ansible_collections.gpulxc.sglang.plugins.plugin_utils.pve_rules import RULES, pve_errors

__all__ = ["RULES", "pve_errors"]


class FilterModule:
    def filters(self):
        return {"pve_errors": pve_errors}
