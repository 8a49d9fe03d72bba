"""sglang_services refuses servers other machines reach without a key (gpulxc.sglang.services_plan), before anything
changes: every address that is not loopback, unless the servers have a key or the operator opted out."""

import pytest
from ansible_collections.gpulxc.sglang.plugins.test.loopback import loopback
from services import errors

LOOPBACK = ["127.0.0.1", "127.0.0.53", "::1", "[::1]", "localhost"]
REACHABLE = ["0.0.0.0", "::", "10.1.2.3", "192.168.0.7", "fd00::5", "[fe80::1]", "node1.example.org", "ct200"]
MESSAGE = "is reachable from other machines and the servers have no key"


@pytest.mark.parametrize("host", LOOPBACK)
def test_a_loopback_server_needs_no_key(host):
    assert loopback(host) is True
    assert not [e for e in errors(sglang_services_host=host) if MESSAGE in e]


@pytest.mark.parametrize("host", REACHABLE)
def test_a_server_other_machines_reach_needs_a_key(host):
    assert loopback(host) is False
    found = errors(sglang_services_host=host)
    assert any(
        f"sglang_services_host {host} {MESSAGE}" in e and "sglang_services_allow_keyless_network" in e for e in found
    ), found
    for opt_out in ({"sglang_services_api_key": "k"}, {"sglang_services_allow_keyless_network": True}):
        assert not [e for e in errors(sglang_services_host=host, **opt_out) if MESSAGE in e], opt_out


@pytest.mark.parametrize("host", REACHABLE)
def test_keyed_servers_other_machines_reach_do_not_serve_metrics_there(host):
    # sglang 0.5.12 checks --api-key on every route but /health* and /metrics (../shared/reference/sglang.md)
    metrics = f"sglang_services_host {host} is reachable from other machines, and sglang serves /metrics"
    found = errors(sglang_services_host=host, sglang_services_api_key="k")
    assert any(e.startswith(metrics) and "sglang_services_enable_metrics to false" in e for e in found), found
    for opt_out in ({"sglang_services_enable_metrics": False}, {"sglang_services_allow_keyless_network": True}):
        assert not [
            e for e in errors(sglang_services_host=host, sglang_services_api_key="k", **opt_out) if metrics in e
        ], opt_out
    for loopback_host in LOOPBACK:
        assert not [e for e in errors(sglang_services_host=loopback_host, sglang_services_api_key="k") if metrics in e]


def test_an_empty_host_is_sglangs_own_default_loopback_and_needs_no_key():
    # left out of the config, so sglang 0.5.12 binds its default 127.0.0.1 (server_args.py:387 in the wheel)
    assert errors(sglang_services_host="") == []
