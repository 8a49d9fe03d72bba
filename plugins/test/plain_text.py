# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: plain_text
author: gpulxc.sglang developers (@gpulxc)
version_added: 0.2.0
short_description: Was the value written in plain text where others read it
description:
  - True for a value written as it is in an inventory (INI or YAML), a C(group_vars) or C(host_vars) file, a
    playbook, a role or a vars file (C(vars_files), C(include_vars)), also through variables that template it
    (V({{ other }})) or C(set_fact); and for a value given on the command line (C(-e key=value), C(-e '{json}')),
    which C(ps) and the shell's history show.
  - False for a value kept where operators keep secrets - Ansible Vault (an inline C(!vault) value or a file
    encrypted with C(ansible-vault encrypt)); a lookup (C(env), C(file), C(pipe), a secrets manager's);
    an extra-vars file (C(-e @file), which is how AWX and AAP pass extra variables and their credentials'
    injected variables, C(-e @/runner/env/extravars)); a module's result.
  - It reads where Ansible read the value (ansible-core's data tagging, 2.19 and newer). Where it cannot tell,
    it is true - only a vaulted value is then false.
  - The roles refuse secrets for which it is true
    (for example O(gpulxc.sglang.sglang_services#role:main:sglang_services_api_key)).
options:
  _input:
    description: A value.
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Refuse a key typed into an inventory
  ansible.builtin.assert:
    that: my_api_key is not gpulxc.sglang.plain_text
    fail_msg: my_api_key is written in plain text - keep it in Ansible Vault, a lookup or an extra-vars file
"""

RETURN = r"""
_value:
  description: Whether the value was written in plain text.
  type: bool
"""

import os

from ansible import context
from ansible.parsing.vault import is_encrypted_file
from ansible.plugins.test.core import vault_encrypted
from ansible.template import is_trusted_as_template

try:  # ansible-core >= 2.19 keeps where each value was read (data tagging); no public API reads it yet
    from ansible._internal._datatag._tags import Origin
except ImportError:  # pragma: no cover - then only a vaulted value passes
    Origin = None

COMMAND_LINE = "<CLI option '-e'>"
ENVIRONMENT = "<environment variable "
TEMPLATE_MARKS = ("{{", "{%")


def _extra_vars_files():
    """The real paths of the -e @file arguments of this run."""
    extra_vars = (context.CLIARGS or {}).get("extra_vars") or ()
    return {os.path.realpath(arg[1:]) for arg in extra_vars if isinstance(arg, str) and arg.startswith("@")}


def _encrypted(path):
    try:
        with open(path, "rb") as handle:
            return is_encrypted_file(handle)
    except OSError:
        return False


def _source_is_template(origin):
    """Whether the text the value was read from is a template (a lookup, an expression), not a literal: a value
    that is not trusted as a template is either one's result or a literal marked !unsafe (or a number).
    None when the source cannot be read."""
    if not origin.line_num:
        return None
    try:
        with open(origin.path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    if origin.line_num > len(lines):
        return None
    first = lines[origin.line_num - 1]
    text = [first[origin.col_num - 1 :] if origin.col_num else first]
    words = text[0].split()
    if words and (words[0][:1] in "|>" or (words[0].startswith("!") and words[1:] and words[1][:1] in "|>")):
        indent = len(first) - len(first.lstrip())
        for line in lines[origin.line_num :]:  # a block scalar: its lines are indented deeper
            if line.strip() and len(line) - len(line.lstrip()) <= indent:
                break
            text.append(line)
    return any(mark in "\n".join(text) for mark in TEMPLATE_MARKS)


def plain_text(value):
    """True when value was written in plain text in an inventory, a vars file, a playbook or on the command line."""
    if vault_encrypted(value):
        return False
    if Origin is None:
        return True
    origin = Origin.get_tag(value)
    if origin is None:
        return False  # read from no file nor the command line: a module's result
    if not origin.path:
        return not (origin.description or "").startswith(ENVIRONMENT)
    if _encrypted(origin.path) or os.path.realpath(origin.path) in _extra_vars_files():
        return False
    # a literal string of that file, or the text there is no template
    return is_trusted_as_template(value) or not _source_is_template(origin)


class TestModule:
    def tests(self):
        return {"plain_text": plain_text}
