"""sglang_router's front (nginx, smg-front.service), templated as Ansible does: smg 1.13.0 answers
/get_server_info, /get_model_info, /health_generate, /v1/models and more without a key even with tenant keys
(model_gateway/src/server.rs:887-895 of lightseekorg/smg at 73da68c, its public_routes), so smg listens on loopback
and the front checks the client key on every route but /liveness and /readiness, serves TLS beyond loopback and
replaces the client's Authorization with the gateway's own; the checks of its settings (the role's plan), by class."""

import json
import os
import subprocess
import sys

import pytest
import router_role

ROLE = router_role.ROLE
SERVICES = {"instances": [{"unit": "sglang@0.service", "url": "http://127.0.0.1:30000", "port": 30000}]}
KEYS = [{"tenant": "lab", "key": "k"}]


def render(name, **extra):
    return router_role.render(name, **{"sglang_router_services": SERVICES, **extra})


def errors(**extra):
    """The plan's refusals (gpulxc.sglang.router_plan, as tasks/preflight.yml calls it)."""
    return router_role.errors(**{"sglang_router_services": SERVICES, **extra})


def locations(conf):
    """{location: its block's text} of the rendered nginx configuration."""
    found, name = {}, None
    for line in conf.splitlines():
        stripped = line.strip()
        if stripped.startswith("location "):
            name, found[stripped.removeprefix("location ").rstrip(" {")] = stripped, ""
        elif name:
            found[list(found)[-1]] += stripped + "\n"
            name = None if line.startswith("        }") else name
    return found


def test_with_client_keys_every_route_but_liveness_and_readiness_needs_one():
    found = locations(render("front.conf.j2", sglang_router_api_keys=KEYS))
    assert set(found) == {"= /liveness", "= /readiness", "= /metrics", "= /metrics/workers/0", "/"}
    assert "proxy_pass http://127.0.0.1:30000/metrics;" in found["= /metrics/workers/0"]  # the worker's own
    for name, block in found.items():
        guarded = "if ($gpulxc_client = 0)" in block and "return 401" in block
        assert guarded == (name not in ("= /liveness", "= /readiness")), (name, block)


@pytest.mark.parametrize("keys", [KEYS, []])
def test_with_keyed_servers_their_settings_never_pass_the_front(keys):
    """/get_server_info reaches a worker through smg, whose answer holds the servers' key: a tenant's key, or none
    on loopback, must not get it; without a server key the route passes as any other."""
    found = locations(render("front.conf.j2", sglang_router_api_keys=keys, sglang_router_worker_api_key="s"))
    block = found["= /get_server_info"]
    assert "return 403" in block and "proxy_pass" not in block
    assert ("return 401" in block) == bool(keys)  # without a client key, refused as every other route
    assert "= /get_server_info" not in locations(render("front.conf.j2", sglang_router_api_keys=keys))


def test_without_client_keys_nothing_is_guarded():
    conf = render("front.conf.j2", sglang_router_host="127.0.0.1")
    assert "return 401" not in conf and "include /run/smg-front/gateway-auth.conf;" in conf


@pytest.mark.parametrize(
    "host, listen, tls",
    [
        ("0.0.0.0", "listen 0.0.0.0:8000 ssl;", True),
        ("10.1.2.3", "listen 10.1.2.3:8000 ssl;", True),
        ("::", "listen [::]:8000 ssl ipv6only=off;", True),
        ("gpu-node.lan", "listen gpu-node.lan:8000 ssl;", True),
        ("127.0.0.1", "listen 127.0.0.1:8000;", False),
        ("::1", "listen [::1]:8000;", False),
    ],
)
def test_the_front_serves_tls_beyond_loopback(host, listen, tls):
    conf = render("front.conf.j2", sglang_router_host=host, sglang_router_api_keys=KEYS)
    assert listen in conf
    assert ("ssl_certificate_key /run/credentials/smg-front.service/tls.key;" in conf) == tls
    unit = render("smg-front.service.j2", sglang_router_host=host)
    assert ("LoadCredential=tls.key:/etc/smg/front/tls.key" in unit) == tls


def test_smg_listens_on_loopback_behind_the_front_and_never_sees_a_client_key():
    args = json.loads(render("router-args.json.j2", sglang_router_port=8123))
    assert args[args.index("--host") + 1] == "127.0.0.1" and args[args.index("--port") + 1] == "18123"
    assert args[args.index("--prometheus-host") + 1] == "127.0.0.1"
    smg = render("smg.service.j2")
    assert "tenant-api-keys" not in smg and "LoadCredential=gateway-key:/etc/smg/gateway-key" in smg
    front = render("smg-front.service.j2")
    assert "LoadCredential=tenant-api-keys:/etc/smg/tenant-api-keys" in front
    assert "upstream smg {\n        server 127.0.0.1:18000;" in render("front.conf.j2")


def test_the_key_files_nginx_reads_take_every_character_as_written(tmp_path):
    credentials, runtime = tmp_path / "credentials", tmp_path / "run"
    credentials.mkdir()
    runtime.mkdir()
    (credentials / "tenant-api-keys").write_text('# tenant:key\nlab:-a$b"c\\d:e\nother:plain\n')
    (credentials / "gateway-key").write_text('g$w"\\\n')
    subprocess.run(
        [sys.executable, str(ROLE / "files/smg-front-keys"), str(runtime)],
        check=True,
        env=dict(os.environ, CREDENTIALS_DIRECTORY=str(credentials)),
    )
    assert (
        runtime / "client-keys.map"
    ).read_text() == '"Bearer -a$b\\"c\\\\d:e" 1;  # lab\n"Bearer plain" 1;  # other\n'
    # in a header value nginx expands "$name": a "$" goes through the geo variable holding one
    assert (runtime / "gateway-auth.conf").read_text() == (
        'proxy_set_header Authorization "Bearer g${gpulxc_dollar}w\\"\\\\";\n'
    )
    assert {oct(p.stat().st_mode & 0o777) for p in runtime.iterdir()} == {"0o600"}


@pytest.mark.parametrize(
    "ports, message",
    [
        ({"sglang_router_smg_port": 8000}, "sglang_router_port and sglang_router_smg_port are both 8000"),
        ({"sglang_router_smg_port": 29000}, "sglang_router_smg_port and sglang_router_prometheus_port are both 29000"),
        ({"sglang_router_prometheus_port": 8000}, "sglang_router_port and sglang_router_prometheus_port are both 8000"),
        (
            {"sglang_router_smg_port": 29000, "sglang_router_port": 29000},
            "sglang_router_port and sglang_router_smg_port and sglang_router_prometheus_port are all 29000",
        ),
        ({"sglang_router_smg_port": 30000}, "sglang_router_smg_port 30000 is the port of an SGLang instance"),
        ({"sglang_router_port": 60000}, "sglang_router_smg_port 70000 is not a port (1 to 65535)"),
    ],
)
def test_the_front_and_smg_and_metrics_each_need_their_own_port(ports, message):
    found = errors(sglang_router_host="127.0.0.1", **ports)
    assert any(e.startswith(message) for e in found), found


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.5", "::", "gpu-node.lan"])
def test_metrics_beyond_loopback_are_refused(host):
    found = errors(sglang_router_host="127.0.0.1", sglang_router_prometheus_host=host)
    assert (
        f"sglang_router_prometheus_host {host} is reachable from other machines, and the metrics listener of smg"
        in (" ".join(found))
    )
    assert not [
        e for e in errors(sglang_router_host="127.0.0.1", sglang_router_prometheus_host="::1") if "metrics" in e
    ]


CERT = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN EC PRIVATE KEY-----\nMHc\n-----END EC PRIVATE KEY-----\n"


@pytest.mark.parametrize(
    "tls, message",
    [
        ({"sglang_router_tls_certificate": CERT}, "sglang_router_tls_certificate and sglang_router_tls_private_key go"),
        ({"sglang_router_tls_private_key": KEY}, "sglang_router_tls_certificate and sglang_router_tls_private_key go"),
        (
            {"sglang_router_tls_certificate": "/etc/ssl/mine.pem", "sglang_router_tls_private_key": KEY},
            "sglang_router_tls_certificate is not a PEM certificate",
        ),
        (
            {"sglang_router_tls_certificate": KEY, "sglang_router_tls_private_key": KEY},
            "sglang_router_tls_certificate is not a PEM certificate",
        ),
        (
            {"sglang_router_tls_certificate": CERT, "sglang_router_tls_private_key": CERT},
            "sglang_router_tls_private_key is not a PEM private key",
        ),
        ({"sglang_router_tls_names": ["0.0.0.0"]}, "sglang_router_tls_names: 0.0.0.0 is not a host name"),
        ({"sglang_router_tls_names": ["-gpu"]}, "sglang_router_tls_names: -gpu is not a host name"),
        ({"sglang_router_tls_names": ["gpu node"]}, "sglang_router_tls_names: gpu node is not a host name"),
        ({"sglang_router_tls_names": ["https://gpu"]}, "sglang_router_tls_names: https://gpu is not a host name"),
    ],
)
def test_bad_tls_settings_are_refused(tls, message):
    found = errors(sglang_router_api_keys=KEYS, **tls)
    assert any(e.startswith(message) for e in found), found


def test_good_tls_settings_pass():
    good = {
        "sglang_router_tls_certificate": CERT,
        "sglang_router_tls_private_key": KEY,
        "sglang_router_tls_names": ["gpu-node.lan", "10.0.0.5", "fd00::5"],
    }
    assert errors(sglang_router_api_keys=KEYS, **good) == []


def test_keyed_servers_behind_the_router_are_no_longer_refused():
    assert errors(sglang_router_api_keys=KEYS, sglang_router_services={**SERVICES, "api_key": True}) == []
