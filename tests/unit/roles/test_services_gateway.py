"""A fleet's gateway (sglang_services_router_container): another container's router fronts these instances. They
must be reachable from there - bound beyond loopback, with the gateway's key, published at an address it reaches -
and each bad setting is refused by name before anything changes (gpulxc.sglang.services_plan); the URLs published carry
sglang_services_advertise_host; the drains run in the gateway's container (delegate_to)."""

from pathlib import Path

import pytest
import yaml
from services import decided, errors
from test_services_exposure import LOOPBACK

ROLE = Path(__file__).resolve().parents[3] / "roles/sglang_services"
KEY = "gateway-key"
INVENTORY = {"hostvars": {"ct200": {}, "ct300": {"sglang_services_api_key": KEY}}}
BEYOND = {"sglang_services_host": "0.0.0.0", "sglang_services_api_key": KEY, "sglang_services_enable_metrics": False}
FRONTED = {**INVENTORY, **BEYOND, "sglang_services_router_container": "ct300"}


def gateway_errors(**extra):
    return [e for e in errors(**{**FRONTED, **extra}) if "router_container" in e or "advertise_host" in e]


def test_instances_fronted_by_another_container_are_published_at_its_advertised_address():
    for given, url in [
        ("10.1.2.3", "http://10.1.2.3:30000"),
        ("ct200.lan", "http://ct200.lan:30000"),
        ("fd00::5", "http://[fd00::5]:30000"),
    ]:
        facts = decided(**FRONTED, sglang_services_advertise_host=given)
        assert facts["_sglang_services_plan"]["instances"][0]["url"] == url
        assert facts["_sglang_services_plan"]["router_host"] == "ct300"  # the drains' delegate_to
        assert errors(**FRONTED, sglang_services_advertise_host=given) == []


@pytest.mark.parametrize("router", ["", "ct200"])
def test_this_containers_own_router_needs_no_address_beyond_loopback(router):
    assert errors(sglang_services_router_container=router) == []
    assert decided(sglang_services_router_container=router)["_sglang_services_plan"]["router_host"] == ""
    assert decided(sglang_services_router_container=router)["_sglang_services_plan"]["instances"][0]["url"] == (
        "http://127.0.0.1:30000"
    )


@pytest.mark.parametrize("router", ["ct999", "CT300", "ct300 "])
def test_a_router_container_the_inventory_does_not_hold_is_refused(router):
    found = gateway_errors(sglang_services_router_container=router, sglang_services_advertise_host="10.1.2.3")
    assert any(e.startswith(f"sglang_services_router_container {router} is no host of the inventory") for e in found)


@pytest.mark.parametrize("host", [*LOOPBACK, ""])
def test_servers_bound_to_loopback_cannot_be_fronted_by_another_container(host):
    found = gateway_errors(sglang_services_host=host)
    assert any("whose router cannot reach servers bound to" in e and "sglang_services_host" in e for e in found), found


@pytest.mark.parametrize("advertised", ["", "127.0.0.1", "::1", "localhost"])
def test_an_advertised_address_the_router_container_cannot_reach_is_refused(advertised):
    found = gateway_errors(sglang_services_advertise_host=advertised)
    assert any("which cannot reach the instances at" in e and "sglang_services_advertise_host" in e for e in found)


@pytest.mark.parametrize("advertised", ["0.0.0.0", "::", "http://10.1.2.3", "10.1.2.3:30000", "a host", "-x"])
def test_an_advertised_address_that_is_no_single_address_is_refused(advertised):
    found = gateway_errors(sglang_services_advertise_host=advertised)
    assert any(e.startswith(f"sglang_services_advertise_host {advertised} is neither") for e in found), found


@pytest.mark.parametrize("key", ["another-key", ""])
def test_servers_with_another_key_than_the_gateways_are_refused(key):
    found = errors(
        **{
            **FRONTED,
            "sglang_services_api_key": key,
            "sglang_services_advertise_host": "10.1.2.3",
            "sglang_services_allow_keyless_network": key == "",
        }
    )
    assert any(e.startswith("sglang_services_api_key is not the key of the servers of ct300") for e in found), found
    assert not [e for e in found if KEY in e or (key and key in e)]  # no key is shown


def test_every_drain_and_readmission_runs_in_the_router_container():
    calls = []
    for path in sorted((ROLE / "tasks").glob("*.yml")):
        text = yaml.safe_load(path.read_text()) or []
        stack = list(text)
        while stack:
            task = stack.pop()
            stack.extend(task.get("block", []) + task.get("rescue", []) + task.get("always", []))
            if "gpulxc.sglang.smg_workers" in task:
                calls.append((path.name, task.get("delegate_to")))
    assert len(calls) >= 5 and {delegate for _, delegate in calls} == {
        "{{ _sglang_services_plan.router_host or omit }}"
    }, calls
