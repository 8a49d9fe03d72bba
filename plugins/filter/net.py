# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: loopback_host
short_description: The address a service bound to O(_input) is reached at from its own host
version_added: 0.2.0
description:
  - A wildcard bind address (V(0.0.0.0), V(::) or empty) becomes the loopback address of its family
    (V(127.0.0.1), or V([::1]) for V(::)); any other address is returned as it is, an IPv6 one in brackets so
    that it can be put in a URL before C(:port).
author:
  - gpulxc.sglang developers (@gpulxc)
options:
  _input:
    description: The address the service binds.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The router's URL from its own host
  ansible.builtin.debug:
    msg: "http://{{ sglang_router_host | gpulxc.sglang.loopback_host }}:{{ sglang_router_port }}"
"""

RETURN = r"""
_value:
  description: The host part of a URL reaching the service from its own host.
  type: str
  sample: 127.0.0.1
"""


def loopback_host(address):
    address = str(address or "")
    if address in ("", "0.0.0.0"):
        return "127.0.0.1"
    if address == "::":
        return "[::1]"
    return "[" + address + "]" if ":" in address else address


class FilterModule:
    def filters(self):
        return {"loopback_host": loopback_host}
