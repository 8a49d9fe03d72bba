"""sglang_router's client keys (tasks/preflight.yml, templated as Ansible does): smg 1.13.0 reads each as
TENANT:KEY split at the first colon, both parts trimmed (smg/router_args.py in the wheel), so a tenant with a
colon or a space, a key with spaces around it, an empty part or a repeat is refused - by entry number, never
showing a key."""

from pathlib import Path

import pytest
import yaml
from ansible.template import Templar, trust_as_template
from conftest import trusted

ROLE = Path(__file__).resolve().parents[3] / "roles/sglang_router"
SERVICES = {"instances": [{"unit": "sglang@0.service", "url": "http://127.0.0.1:30000", "port": 30000}]}
SECRET = "s3cret-never-shown"


def errors(**extra):
    defaults = yaml.safe_load((ROLE / "defaults/main.yml").read_text())
    (check,) = [t for t in yaml.safe_load((ROLE / "tasks/preflight.yml").read_text())
                if t.get("name") == "Check the router's settings"]  # fmt: skip
    variables = {**trusted(defaults), "gpulxc_router_venv": "/opt/smg/venv", "gpulxc_router_dir": "/etc/smg",
                 "gpulxc_facts_dir": "/etc/ansible/facts.d", "sglang_router_services": SERVICES, **extra}  # fmt: skip
    templar = Templar(variables={**variables, **trusted(check["vars"])})
    return templar.template(trust_as_template("{{ _errors }}"))


def test_good_keys_pass():
    keys = [{"tenant": "team-a", "key": SECRET}, {"tenant": "-team.b_2", "key": "-x:y"}]  # "-" and ":" in a key
    assert errors(sglang_router_api_keys=keys) == []


@pytest.mark.parametrize(
    "entry",
    [{"tenant": "a:b", "key": SECRET}, {"tenant": "a b", "key": SECRET}, {"tenant": " a", "key": SECRET},
     {"tenant": "a\t", "key": SECRET}, {"tenant": "", "key": SECRET}, {"key": SECRET}, {"tenant": None, "key": SECRET},
     {"tenant": "a", "key": " " + SECRET}, {"tenant": "a", "key": SECRET + "\n"}, {"tenant": "a", "key": ""},
     {"tenant": "a"}],
)  # fmt: skip
def test_an_unusable_entry_is_named_by_its_number(entry):
    found = errors(sglang_router_api_keys=[{"tenant": "ok", "key": "fine"}, entry])
    assert any(e.startswith("sglang_router_api_keys entries 1 (counted from 0): each needs a tenant") for e in found), (
        found
    )
    assert SECRET not in str(found)


def test_a_repeated_tenant_or_key_is_refused():
    found = errors(sglang_router_api_keys=[{"tenant": "a", "key": "k1"}, {"tenant": "a", "key": "k2"}])
    assert "sglang_router_api_keys names a tenant more than once: a." in found
    found = errors(sglang_router_api_keys=[{"tenant": "a", "key": SECRET}, {"tenant": "b", "key": SECRET}])
    assert "sglang_router_api_keys holds the same key twice: give each tenant its own." in found
    assert SECRET not in str(found)
