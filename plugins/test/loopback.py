# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: loopback
author: gpulxc.sglang developers (@gpulxc)
version_added: 0.2.0
short_description: Does a service bound to this address answer only its own host
description:
  - True for a loopback address (V(127.0.0.0/8), V(::1)) or V(localhost); false for a wildcard (V(0.0.0.0),
    V(::), empty), any other address or a host name, which other machines may reach.
options:
  _input:
    description: The address a service binds.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Refuse a keyless server other machines reach
  ansible.builtin.assert:
    that: my_host is gpulxc.sglang.loopback or my_api_key | length > 0
"""

RETURN = r"""
_value:
  description: Whether only the host itself reaches the address.
  type: bool
"""

import ipaddress


def loopback(address):
    address = str(address or "").strip().strip("[]")
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


class TestModule:
    def tests(self):
        return {"loopback": loopback}
