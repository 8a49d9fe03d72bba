# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: bind_address
author: gpulxc.sglang developers (@gpulxc)
version_added: 0.2.0
short_description: Can a server bind this address
description:
  - True for an IPv4 or IPv6 address (in brackets or not, V(0.0.0.0) and V(::) included) or a DNS host name
    (letters, digits and hyphens in dot-separated labels, none starting or ending with a hyphen).
  - False for anything else - empty, whitespace, a port or a scheme, a value starting with V(-) that a server's
    argument parser would take for a flag - so it is refused before it reaches C(--host).
options:
  _input:
    description: The address.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Refuse what sglang or smg cannot bind
  ansible.builtin.assert:
    that: sglang_router_host is gpulxc.sglang.bind_address
"""

RETURN = r"""
_value:
  description: Whether it is an IP address or a host name.
  type: bool
"""

import ipaddress
import re

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(r"(?=.{1,253}\Z)%s(?:\.%s)*\.?\Z" % (_LABEL, _LABEL))


def bind_address(address):
    if not isinstance(address, str):
        return False
    bare = address[1:-1] if address.startswith("[") and address.endswith("]") else address
    try:
        ipaddress.ip_address(bare)
        return True
    except ValueError:
        return bare == address and _HOST_NAME.match(address) is not None


class TestModule:
    def tests(self):
        return {"bind_address": bind_address}
