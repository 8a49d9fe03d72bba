# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fleet's gateway (documented in fleet_containers.yml next to this file): the containers whose instances this
one's router fronts, those that name it in sglang_services_router_container. playbooks/tasks/router.yml passes
them to role gpulxc.sglang.sglang_router as sglang_router_fleet_containers."""

from __future__ import annotations

from collections.abc import Mapping


def fleet_containers(hostvars, inventory, inventory_hostname):
    """The hosts of `inventory` but this one whose sglang_services_router_container is this one, in inventory order."""
    return [
        host
        for host in inventory
        if host != inventory_hostname
        and isinstance(hostvars[host], Mapping)
        and hostvars[host].get("sglang_services_router_container", "") == inventory_hostname
    ]


class FilterModule:
    def filters(self):
        return {"fleet_containers": fleet_containers}
