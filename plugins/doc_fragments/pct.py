# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # The options of the modules that run pct on a Proxmox VE node (pct_config, pct_info).
    DOCUMENTATION = r"""
options:
  vmid:
    description: Container id.
    type: int
    required: true
  pct:
    description: Path of C(pct) on the node.
    type: path
    default: /usr/sbin/pct
"""
