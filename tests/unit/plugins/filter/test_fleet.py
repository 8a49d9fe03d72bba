"""gpulxc.sglang.fleet_containers as a plain function: which containers name this one as their router's container
(sglang_services_router_container); tests/unit/roles/test_router_fleet.py checks the playbook's call of it."""

import pytest
from ansible_collections.gpulxc.sglang.plugins.filter.fleet import fleet_containers

INVENTORY = ["ct940", "ct941", "ct942"]
# each container's sglang_services_router_container (absent: not set), and ct940's fleet
CASES = [
    ({"ct941": "ct940", "ct942": "ct940"}, ["ct941", "ct942"]),
    ({"ct942": "ct940", "ct941": "ct940"}, ["ct941", "ct942"]),  # the inventory's order
    ({"ct941": "ct940", "ct942": ""}, ["ct941"]),
    ({"ct941": "ct942"}, []),
    ({"ct941": "CT940"}, []),  # a name is matched exactly
    ({"ct941": None}, []),
    ({}, []),
    ({"ct940": "ct940"}, []),  # its own router: not a fleet member
]


@pytest.mark.parametrize(("routers", "fleet"), CASES)
def test_the_containers_that_name_this_one(routers, fleet):
    hostvars = {
        host: {"sglang_services_router_container": routers[host]} if host in routers else {} for host in INVENTORY
    }
    assert fleet_containers(hostvars, INVENTORY, "ct940") == fleet
