"""gpulxc.sglang.router_plan as a plain function: the cases are in test_router.yaml (the settings over its base,
what else the plan reads, the plan's parts expected); a value's origin (what gpulxc.sglang.plain_text reads) is
set here, as YAML cases cannot carry one."""

from pathlib import Path

import pytest
import yaml
from ansible._internal._datatag._tags import Origin  # what the plain_text test reads
from ansible.errors import AnsibleFilterError
from ansible_collections.gpulxc.sglang.plugins.filter.router import SETTINGS, router_plan

DATA = yaml.safe_load(Path(__file__).with_suffix(".yaml").read_text())
BASE, CASES = DATA["base"], DATA["cases"]


def plan(settings=(), **others):
    return router_plan({**BASE, **dict(settings)}, **others)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case):
    others = {k: case[k] for k in ("fleet_instances", "inventory", "inventory_hostname") if k in case}
    found = plan(case["settings"], **others)
    assert {k: found[k] for k in case["plan"]} == case["plan"]


def test_the_base_holds_every_setting_the_plan_reads():
    assert sorted(BASE) == sorted(SETTINGS)


@pytest.mark.parametrize("change", ["missing", "unknown"])
def test_a_setting_missing_or_unknown_is_an_error_naming_it(change):
    settings = (
        {k: v for k, v in BASE.items() if k != "sglang_router_port"}
        if change == "missing"
        else {**BASE, "sglang_router_prot": 1}
    )
    with pytest.raises(AnsibleFilterError, match=r"sglang_router_(port|prot)$"):
        router_plan(settings)


def written_in(tmp_path, name, value):
    """value as ansible-core reads it from an inventory file (its Origin: the file, line and column)."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(f"{name}: {value}\n")
    return Origin(path=str(inventory), line_num=1, col_num=len(name) + 3).tag(value)


def test_keys_written_in_an_inventory_are_refused_naming_the_variable_never_the_key(tmp_path):
    key = written_in(tmp_path, "secret", "s3cret-never-shown")
    pem = "-----BEGIN EC PRIVATE KEY-----MHc-----END EC PRIVATE KEY-----"
    found = plan(
        {
            "sglang_router_api_keys": [{"tenant": "lab", "key": key}],
            "sglang_router_worker_api_key": key,
            "sglang_router_tls_certificate": "-----BEGIN CERTIFICATE-----",
            "sglang_router_tls_private_key": written_in(tmp_path, "pem", pem),
        }
    )["errors"]
    assert found == [
        "sglang_router_api_keys holds a key written in plain text (an inventory, a vars file, a playbook or the"
        " command line): keep the keys in Ansible Vault, a lookup or an extra-vars file passed with -e @file.",
        "sglang_router_worker_api_key is written in plain text (an inventory, a vars file, a playbook or the command"
        " line): keep it in Ansible Vault, a lookup or an extra-vars file passed with -e @file (playbooks/router.yml"
        " passes the key of the servers by default), or set sglang_router_worker_api_key_allow_plain_text to true to"
        " accept it.",
        "sglang_router_tls_private_key is written in plain text (an inventory, a vars file, a playbook or the command"
        " line): keep it in Ansible Vault, a lookup (of a root-only file on the controller, for example) or an"
        " extra-vars file passed with -e @file.",
    ]
    allowed = {"sglang_router_worker_api_key": key, "sglang_router_worker_api_key_allow_plain_text": "yes"}
    assert plan(allowed)["errors"] == []
