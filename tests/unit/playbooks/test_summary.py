"""The summary site.yml ends with (playbooks/summary.yml, templated as Ansible does): how each endpoint is exposed -
the gateway, its metrics and the servers: to this container only or to other machines, with a key or without,
plain HTTP - from what gpulxc.sglang.stack_info read in the container."""

from pathlib import Path

import pytest
import yaml
from ansible.template import Templar, trust_as_template
from conftest import trusted

PLAY = Path(__file__).resolve().parents[3] / "playbooks/summary.yml"


def lines(router, servers):
    (play,) = yaml.safe_load(PLAY.read_text())
    (task,) = [t for t in play["tasks"] if t.get("name") == "Summary"]
    result = {"stack": "sglang 0.5.12", "model": "m", "router": router, "servers": servers}
    variables = {"gpulxc_summary_result": result, "ansible_local": {}, "proxmox_vmid": 200, **trusted(task["vars"])}
    return Templar(variables=variables).template(trust_as_template(task["ansible.builtin.debug"]["msg"]))


LOCAL = {
    "url": "http://127.0.0.1:8000",
    "keyed": False,
    "host": "127.0.0.1",
    "metrics": {"host": "127.0.0.1", "port": 29000},
    "tls": None,
}
TLS = {"certificate": "/etc/smg/front/tls.crt", "sha256": "3F:0A:9C"}
OPEN = {
    "url": "https://10.0.0.5:8000",
    "keyed": True,
    "host": "0.0.0.0",
    "metrics": {"host": "127.0.0.1", "port": 29000},
    "tls": TLS,
}


@pytest.mark.parametrize(
    ("router", "endpoint"),
    [(LOCAL, "this container only, no key, plain HTTP"), (OPEN, "other machines, client key required, TLS")],
)
def test_the_gateway_and_its_metrics_say_who_reaches_them(router, endpoint):
    found = lines(router, [])
    assert f"endpoint: {router['url']} (SGLang model gateway, {endpoint})" in found, found
    # smg's own listener stays on loopback: the front serves it as every route, with the same key
    assert f"router metrics: {router['url']}/metrics, {endpoint}" in found, found
    certificate = [line for line in found if line.startswith("TLS certificate: ")]
    assert certificate == (
        []
        if router["tls"] is None
        else [
            "TLS certificate: /etc/smg/front/tls.crt in the container (copy it as tls.crt where it is not signed by"
            " a CA"
            " the clients trust), sha256 3F:0A:9C"
        ]
    )
    try_line = next(line for line in found if line.startswith("try: "))
    assert try_line.startswith("try: curl -s --cacert tls.crt https://" if router["tls"] else "try: curl -s http://")


def test_the_servers_say_their_address_ports_and_key():
    servers = [
        {"instance": 0, "host": "127.0.0.1", "port": 30000, "keyed": False},
        {"instance": 1, "host": "127.0.0.1", "port": 30001, "keyed": False},
        {"instance": 2, "host": "0.0.0.0", "port": 30002, "keyed": True},
    ]
    found = lines(LOCAL, servers)
    assert "servers: 2 on 127.0.0.1 port 30000, 30001, this container only, no key" in found, found
    assert "servers: 1 on 0.0.0.0 port 30002, other machines, plain HTTP, key required" in found, found


def test_without_a_router_the_servers_are_the_endpoint():
    found = lines(None, [{"instance": 0, "host": "127.0.0.1", "port": 30000, "keyed": True}])
    assert "endpoint: no router: one server per GPU on its own port" in found
    assert "servers: 1 on 127.0.0.1 port 30000, this container only, key required" in found
    assert not [line for line in found if line.startswith("router metrics")]
