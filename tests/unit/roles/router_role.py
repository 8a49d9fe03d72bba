"""sglang_router's tests' one way in: the role's defaults and vars as Ansible templates them (under the variables a
test sets, as an inventory or -e would), the plan (gpulxc.sglang.router_plan) from them as tasks/preflight.yml passes
them, and the role's templates rendered with that plan. No task is looked up by its name."""

from pathlib import Path

import yaml
from ansible.template import Templar
from ansible_collections.gpulxc.sglang.plugins.filter.router import SETTINGS, router_plan
from conftest import trusted

ROLE = Path(__file__).resolve().parents[3] / "roles/sglang_router"
LAYOUT = {
    "gpulxc_router_venv": "/opt/smg/venv",
    "gpulxc_router_dir": "/etc/smg",
    "gpulxc_facts_dir": "/etc/ansible/facts.d",
    "ansible_managed": "managed",
}


def variables(**given):
    """The role's defaults and vars, templated, under `given` (kept as given: a value's origin included)."""
    role = {
        **yaml.safe_load((ROLE / "defaults/main.yml").read_text()),
        **yaml.safe_load((ROLE / "vars/main.yml").read_text()),
    }
    templar = Templar(variables={**trusted(role), **LAYOUT, **given})
    return {**LAYOUT, **{k: templar.template(v) for k, v in trusted(role).items()}, **given}


def plan(**given):
    """The router's plan, the role's settings and what the services published being `given`'s (a fleet's instances
    in _sglang_router_fleet_instances, the inventory in groups and inventory_hostname, as tasks/fleet.yml and
    Ansible set them)."""
    found = variables(**given)
    return router_plan(
        {name: found[name] for name in SETTINGS},
        fleet_instances=found.get("_sglang_router_fleet_instances", []),
        inventory=found.get("groups", {}).get("all", []),
        inventory_hostname=found.get("inventory_hostname", ""),
    )


def errors(**given):
    return plan(**given)["errors"]


def render(name, **given):
    """templates/<name> as the role writes it."""
    scope = {**variables(**given), "_sglang_router_plan": plan(**given)}
    return Templar(variables=scope).template(trusted((ROLE / "templates" / name).read_text()))
