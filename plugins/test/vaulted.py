# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: vaulted
author: gpulxc.sglang developers (@gpulxc)
version_added: 0.1.0
short_description: Was the value kept in Ansible Vault
description:
  - True when the value came from Ansible Vault - an inline C(!vault) value (also through other variables
    that template it), or any value of a file encrypted with C(ansible-vault encrypt) (a C(vars_files) or
    C(group_vars) file, C(-e @file)).
  - False for a value written in plain text in an inventory, a playbook or on the command line.
  - The roles use it to refuse secrets that were not vaulted
    (for example O(gpulxc.sglang.sglang_services#role:main:sglang_services_api_key)).
options:
  _input:
    description: A value.
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Refuse a plain-text key
  ansible.builtin.assert:
    that: my_api_key is gpulxc.sglang.vaulted
    fail_msg: my_api_key must come from Ansible Vault (ansible-vault encrypt_string)
"""

RETURN = r"""
_value:
  description: Whether the value came from Ansible Vault.
  type: bool
"""

from ansible.plugins.test.core import vault_encrypted

try:  # ansible-core >= 2.19 keeps where each value was read (data tagging)
    from ansible._internal._datatag._tags import Origin
except ImportError:  # pragma: no cover - older cores: only inline vault values are recognised
    Origin = None

VAULT_HEADER = b"$ANSIBLE_VAULT;"


def _from_encrypted_file(value):
    origin = Origin.get_tag(value) if Origin is not None else None
    path = getattr(origin, "path", None)
    if not path:
        return False
    try:
        with open(path, "rb") as handle:
            return handle.read(len(VAULT_HEADER)) == VAULT_HEADER
    except OSError:
        return False


def vaulted(value):
    """True when value is an inline vault value or was read from a vault-encrypted file."""
    return bool(vault_encrypted(value)) or _from_encrypted_file(value)


class TestModule:
    def tests(self):
        return {"vaulted": vaulted}
