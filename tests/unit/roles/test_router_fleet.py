"""A fleet's gateway: sglang_router fronts the instances other containers published (sglang_router_fleet_containers,
tasks/fleet.yml, the plan's fleet_instances) besides its own; playbooks/tasks/router.yml passes the containers whose
services name this one as their router's container, and a container fronted elsewhere gets its own router removed."""

from pathlib import Path

import pytest
import yaml
from ansible.template import Templar, trust_as_template
from conftest import trusted
from test_router_worker_urls import INSTANCES, errors, registered

REPO = Path(__file__).resolve().parents[3]
THEIRS = [{"unit": f"sglang@{n}.service", "url": f"http://10.0.0.7:3410{n}", "port": 34100 + n} for n in (2, 3)]
INVENTORY = {"inventory_hostname": "ct940", "groups": {"all": ["ct940", "ct941", "ct942"]}}


def test_the_gateway_registers_its_own_instances_and_those_of_the_containers_it_fronts():
    fleet = {**INVENTORY, "sglang_router_fleet_containers": ["ct941"], "_sglang_router_fleet_instances": THEIRS}
    assert registered(**fleet) == INSTANCES + [i["url"] for i in THEIRS]
    assert errors(**fleet) == []
    assert registered(**INVENTORY) == INSTANCES  # none named: its own only


@pytest.mark.parametrize("named", [["ct999"], ["ct941", "ct940"], ["CT941"]])
def test_a_fleet_container_the_inventory_does_not_hold_or_this_one_is_refused(named):
    found = errors(**INVENTORY, sglang_router_fleet_containers=named)
    assert [e for e in found if e.startswith("sglang_router_fleet_containers: ")] == [
        f"sglang_router_fleet_containers: {', '.join(n for n in named if n != 'ct941')} is no other host of the"
        " inventory (each is a container whose published instances this router fronts)."
    ], found


def router_steps():
    return yaml.safe_load((REPO / "playbooks/tasks/router.yml").read_text())


@pytest.mark.parametrize(
    ("routers", "fleet"),
    [
        ({"ct941": "ct940", "ct942": "ct940"}, ["ct941", "ct942"]),
        ({"ct941": "ct940", "ct942": ""}, ["ct941"]),
        ({"ct941": "ct942"}, []),
        ({}, []),
        ({"ct940": "ct940"}, []),
    ],
)
def test_the_playbook_passes_the_containers_that_name_this_one_as_their_routers(routers, fleet):
    run, remove = router_steps()
    hostvars = {
        host: {"sglang_services_router_container": routers[host]} if host in routers else {}
        for host in INVENTORY["groups"]["all"]
    }
    templar = Templar(variables={**INVENTORY, "hostvars": hostvars})
    assert templar.template(trusted(run["vars"]["sglang_router_fleet_containers"])) == fleet
    own = {"sglang_services_router_container": routers.get("ct940", "")}
    templar = Templar(variables={**INVENTORY, **own})
    assert templar.template(trust_as_template("{{ " + run["when"] + " }}")) is True
    assert templar.template(trust_as_template("{{ " + remove["when"] + " }}")) is False


@pytest.mark.parametrize("router", ["ct941", "gateway"])
def test_a_container_fronted_elsewhere_runs_no_router_of_its_own(router):
    run, remove = router_steps()
    # included: a static copy of the role's handlers loaded after the running router's would win its notifications
    assert remove["ansible.builtin.include_role"]["tasks_from"] == "remove" and "import_role" not in str(remove)
    templar = Templar(variables={**INVENTORY, "sglang_services_router_container": router})
    assert templar.template(trust_as_template("{{ " + run["when"] + " }}")) is False
    assert templar.template(trust_as_template("{{ " + remove["when"] + " }}")) is True
