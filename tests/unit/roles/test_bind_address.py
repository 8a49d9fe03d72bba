"""gpulxc.sglang.bind_address: what sglang's and smg's --host can bind, checked before either sees it (a value
starting with "-" would be taken for a flag, a port or scheme in it fails only when the server starts)."""

import pytest
from ansible_collections.gpulxc.sglang.plugins.test.bind_address import bind_address
from test_router_worker_urls import errors as router_errors
from test_services_instances import errors as services_errors

GOOD = [
    "0.0.0.0",
    "::",
    "127.0.0.1",
    "[::1]",
    "::1",
    "fe80::1",
    "10.1.2.3",
    "localhost",
    "ct200",
    "node-7.example.org",
    "node7.example.org.",
]
BAD = [
    "",
    " ",
    "-h",
    "--port",
    "0.0.0.0 ",
    "127.0.0.1:8000",
    "http://0.0.0.0",
    "[10.0.0.1",
    "a b",
    "host_name",
    "-node.example.org",
    "node-.example.org",
    "a..b",
    "x" * 64,
    "[ct200]",
    None,
    8000,
]


@pytest.mark.parametrize("address", GOOD)
def test_an_address_or_host_name_is_bindable(address):
    assert bind_address(address) is True
    keys = [{"tenant": "t", "key": "k"}]
    assert not [e for e in router_errors(sglang_router_host=address, sglang_router_api_keys=keys) if "neither" in e]
    assert not [e for e in services_errors(sglang_services_host=address, sglang_services_api_key="k") if "neither" in e]


@pytest.mark.parametrize("address", BAD)
def test_anything_else_is_refused_naming_the_variable(address):
    assert bind_address(address) is False
    for name in ("sglang_router_host", "sglang_router_prometheus_host"):
        found = router_errors(**{name: address})
        assert "%s %s is neither an IP address nor a host name." % (name, address) in found, found
    if address:  # empty is sglang's own default (127.0.0.1)
        found = services_errors(sglang_services_host=address, sglang_services_api_key="k")
        assert "sglang_services_host %s is neither an IP address nor a host name." % address in found, found
