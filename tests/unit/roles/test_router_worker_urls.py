"""sglang_router's workers (gpulxc.sglang.worker_urls in its plan, gpulxc.sglang.router_plan, which router-args.json.j2
and the re-admit task read): smg knows a worker by the exact string it was registered with, and the services role
drains an instance by the URL it published, so every worker URL reaches smg in that one form, and what cannot be a
worker is refused by entry number before anything changes."""

import json

import pytest
import router_role
from ansible_collections.gpulxc.sglang.plugins.filter.worker_urls import worker_urls

INSTANCES = ["http://127.0.0.1:30000", "http://127.0.0.1:30001"]
SERVICES = {
    "instances": [{"unit": f"sglang@{n}.service", "url": u, "port": 30000 + n} for n, u in enumerate(INSTANCES)]
}


def loopback_router(extra):
    return {"sglang_router_services": SERVICES, "sglang_router_host": "127.0.0.1", **extra}


def errors(**extra):
    """The plan's refusals (gpulxc.sglang.router_plan, as tasks/preflight.yml calls it)."""
    return router_role.errors(**loopback_router(extra))


def registered(**extra):
    """The --worker-urls smg is started with (router-args.json as the role renders it from the plan)."""
    args = json.loads(router_role.render("router-args.json.j2", **loopback_router(extra)))
    start = args.index("--worker-urls") + 1
    return args[start : args.index("--policy")]


@pytest.mark.parametrize(
    ("given", "instance"),
    [
        ("http://127.0.0.1:30000", 0),
        ("http://127.0.0.1:30000/", 0),
        ("HTTP://LOCALHOST:30000", 0),
        ("http://localhost:30001/", 1),
        ("http://[::1]:30001", 1),
        ("http://127.0.0.2:30000", 0),
    ],
)
def test_a_url_of_an_instance_becomes_the_one_it_is_drained_by(given, instance):
    assert errors(sglang_router_worker_urls=[given]) == []
    assert registered(sglang_router_worker_urls=[given]) == [INSTANCES[instance]]


@pytest.mark.parametrize(
    ("given", "normal"),
    [
        ("http://10.0.0.5:30000/", "http://10.0.0.5:30000"),
        ("HTTPS://Node7.Example.org:8443", "https://node7.example.org:8443"),
        ("http://[FD00::5]:30000/", "http://[fd00::5]:30000"),
        ("http://127.0.0.1:30002", "http://127.0.0.1:30002"),
    ],
)
def test_another_worker_is_normalised(given, normal):
    assert errors(sglang_router_worker_urls=[given]) == []
    assert registered(sglang_router_worker_urls=[given]) == [normal]


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("127.0.0.1:30000", "needs the scheme"),
        ("ftp://127.0.0.1:30000", "needs the scheme"),
        ("-http://x:1", "needs the scheme"),
        ("http://", "names no host"),
        ("http://:30000", "names no host"),
        ("http://h:0", "has a port outside"),
        ("http://h:70000", "is not a URL"),
        ("http://h:port", "is not a URL"),
        ("http://h:30000/v1", "has a path"),
        ("http://h:30000/?x=1", "has a path"),
        ("http://h:30000#f", "has a path"),
        ("http://user:pw@h:30000", "carries credentials"),
        ("http://h :30000", "whitespace"),
        ("", "is empty"),
        ("http://h:30000\n", "whitespace"),
        ("http://[::1:30000", "is not a URL"),
    ],
)
def test_what_cannot_be_a_worker_is_refused_by_entry_number(given, why):
    found = errors(sglang_router_worker_urls=["http://127.0.0.1:30000", given])
    assert [e for e in found if e.startswith("sglang_router_worker_urls entry 1 (") and why in e], found
    assert "pw" not in str(worker_urls(["http://user:pw@h:1"])["urls"])


@pytest.mark.parametrize(
    "pair",
    [
        ["http://127.0.0.1:30000", "http://127.0.0.1:30000/"],
        ["http://localhost:30000", "http://127.0.0.1:30000"],
        ["http://10.0.0.5:1", "HTTP://10.0.0.5:1/"],
    ],
)
def test_the_same_worker_twice_is_refused(pair):
    found = errors(sglang_router_worker_urls=pair)
    assert [e for e in found if e.startswith("sglang_router_worker_urls entries 0 and 1 are the same worker")], found


def test_no_worker_urls_means_every_published_instance_as_published():
    assert registered() == INSTANCES
    assert errors() == []
