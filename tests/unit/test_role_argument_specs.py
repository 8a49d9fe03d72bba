"""Every role's meta/argument_specs.yml matches its defaults/main.yml (names, and literal defaults)."""

import re
from pathlib import Path

import pytest
import yaml

ROLES = sorted(p for p in (Path(__file__).resolve().parents[2] / "roles").iterdir() if p.is_dir())


def main_options(role):
    """The options of the role's main entry point (the variables-only role gpulxc has one entry point, `layout`)."""
    specs = yaml.safe_load((role / "meta/argument_specs.yml").read_text())["argument_specs"]
    return (specs["main"] if "main" in specs else specs["layout"])["options"]


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_spec_and_defaults_name_the_same_variables(role):
    defaults = yaml.safe_load((role / "defaults/main.yml").read_text()) or {}
    options = main_options(role)
    assert sorted(defaults) == sorted(options)
    for name in defaults:
        assert name.startswith(role.name + "_"), f"{name} lacks the role prefix"


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_literal_defaults_are_documented_as_they_are(role):
    defaults = yaml.safe_load((role / "defaults/main.yml").read_text()) or {}
    options = main_options(role)
    for name, value in defaults.items():
        if isinstance(value, str) and "{{" in value:
            continue  # templated defaults are documented by the expression they default to
        if options[name].get("required"):
            continue
        assert options[name].get("default") == value, name


# inventory variables that are not role options besides Ansible's own (ansible_*) and the lab's (lab_*): the
# connection plugins' container id
CONNECTION_VARS = {"proxmox_vmid"}


@pytest.mark.parametrize("inventory", ["example", "lab"])
def test_every_inventory_variable_is_a_role_option(inventory):
    """A misspelt variable in a shipped inventory would be ignored silently: each must be a role option."""
    known = set(CONNECTION_VARS)
    for role in ROLES:
        specs = yaml.safe_load((role / "meta/argument_specs.yml").read_text())["argument_specs"]
        for entry in specs.values():
            known |= set(entry.get("options", {}))
    root = ROLES[0].parents[1] / "inventories" / inventory
    names = set()
    for path in root.rglob("*.yml"):
        data = yaml.safe_load(path.read_text()) or {}
        if path.parent.name == "group_vars":
            names |= set(data)
        else:  # hosts.yml: the hosts' own variables
            for group in data.get("all", data).get("children", {}).values():
                for host in (group.get("hosts") or {}).values():
                    names |= set(host or {})
    assert names, root
    unknown = sorted(name for name in names if name not in known and not name.startswith(("ansible_", "lab_")))
    assert unknown == [], unknown


# The roles with a `remove` entry point (playbooks/remove.yml runs them in this order, the node's last).
REMOVERS = ["sglang_router", "sglang_services", "sglang_stack", "cuda_surgery", "pct_container"]
ROLES_DIR = ROLES[0].parent


@pytest.mark.parametrize("name", REMOVERS)
def test_the_remove_entry_point_declares_every_role_variable_it_reads_as_main_does(name):
    role = ROLES_DIR / name
    specs = yaml.safe_load((role / "meta/argument_specs.yml").read_text())["argument_specs"]
    remove = specs["remove"]
    assert remove["short_description"] and remove["description"]
    main = specs["main"]["options"]
    for option, spec in remove["options"].items():
        assert option in main, option
        for key in ("type", "default", "elements", "choices", "required"):
            assert spec.get(key) == main[option].get(key), (option, key)
    text = "".join((role / "tasks" / f).read_text() for f in ("remove.yml", "remove_check.yml"))
    used = set(re.findall(rf"\b({name}_[a-z0-9_]+)", text)) - {f"{name}_remove_check"}
    registered = set(re.findall(rf"register: ({name}_[a-z0-9_]+)", text))
    assert sorted(used - registered - set(remove["options"])) == []


def test_the_removal_playbook_runs_each_remove_entry_point_in_reverse_order():
    text = (ROLES_DIR.parent / "playbooks/remove.yml").read_text()
    found = re.findall(r"name: gpulxc\.sglang\.([a-z_]+)\n\s+tasks_from: remove\n", text)
    assert found == REMOVERS
