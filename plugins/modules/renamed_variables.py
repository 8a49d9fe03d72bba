#!/usr/bin/python
# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: renamed_variables
short_description: Warn about role variables set under a name that was renamed
version_added: 0.3.0
description:
  - For each old name of O(renamed) that the play sets (inventory, extra vars, play vars), returns a deprecation
    warning naming the new variable and the release that stops reading the old one. The role's defaults read
    the old name in the new one's place until then, so a setting keeps working.
  - Runs on the controller; reads variables only.
author:
  - gpulxc.sglang developers (@gpulxc)
extends_documentation_fragment:
  - gpulxc.sglang.attributes
  - gpulxc.sglang.attributes.info_module
attributes:
  action:
    description: Runs on the controller.
    support: full
    details: An action plugin; nothing runs on the target.
options:
  renamed:
    description: Old variable names to their new names.
    type: dict
    required: true
  version:
    description: The collection release that stops reading the old names.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Warn about the CUDA settings set under their cuda_wheels_* names
  gpulxc.sglang.renamed_variables:
    renamed:
      cuda_wheels_family: sglang_stack_cuda_family
    version: 0.4.0
"""

RETURN = r"""
renamed:
  description: The old names the play sets, to their new names.
  returned: always
  type: dict
  sample: {cuda_wheels_family: sglang_stack_cuda_family}
"""
