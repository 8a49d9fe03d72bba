# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # What check_mode and diff_mode mean, for every module (as community.proxmox.attributes); each module says
    # its support, and what it reports, beside it.
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in C(check_mode) and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in C(check_mode)), when in
      diff mode.
"""

    # The read-only modules (used together with the standard fragment).
    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This action does not modify state; it runs the same in check mode.
  diff_mode:
    support: N/A
    details:
      - This action does not modify state.
"""
