"""sglang_router's client keys (its plan, gpulxc.sglang.router_plan): smg 1.13.0 reads each as
TENANT:KEY split at the first colon, both parts trimmed (smg/router_args.py in the wheel), so a tenant with a
colon or a space, a key with spaces around it, an empty part or a repeat is refused - by entry number, never
showing a key."""

import pytest
import router_role
from ansible._internal._datatag._tags import Origin  # what the plain_text test reads

SERVICES = {"instances": [{"unit": "sglang@0.service", "url": "http://127.0.0.1:30000", "port": 30000}]}
SECRET = "s3cret-never-shown"


def errors(**extra):
    """The plan's refusals (gpulxc.sglang.router_plan, as tasks/preflight.yml calls it)."""
    return router_role.errors(**{"sglang_router_services": SERVICES, **extra})


def test_good_keys_pass():
    keys = [{"tenant": "team-a", "key": SECRET}, {"tenant": "-team.b_2", "key": "-x:y"}]  # "-" and ":" in a key
    assert errors(sglang_router_api_keys=keys) == []


@pytest.mark.parametrize(
    "entry",
    [
        {"tenant": "a:b", "key": SECRET},
        {"tenant": "a b", "key": SECRET},
        {"tenant": " a", "key": SECRET},
        {"tenant": "a\t", "key": SECRET},
        {"tenant": "", "key": SECRET},
        {"key": SECRET},
        {"tenant": None, "key": SECRET},
        {"tenant": "a", "key": " " + SECRET},
        {"tenant": "a", "key": SECRET + "\n"},
        {"tenant": "a", "key": ""},
        {"tenant": "a"},
    ],
)
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


def test_a_worker_key_written_in_an_inventory_is_refused_without_showing_it(tmp_path):
    """The key as ansible-core 2.19 reads it from an inventory file (its Origin tag: the file, line and column);
    tests/lab/test_router.py gives one on the command line, test_plain_text.py has every other source."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(f"sglang_router_worker_api_key: {SECRET}\n")
    key = Origin(path=str(inventory), line_num=1, col_num=len("sglang_router_worker_api_key: ") + 1).tag(SECRET)
    found = errors(sglang_router_worker_api_key=key)
    assert any(e.startswith("sglang_router_worker_api_key is written in plain text") for e in found), found
    assert SECRET not in str(found)
    assert not any(
        "sglang_router_worker_api_key" in e
        for e in errors(sglang_router_worker_api_key=key, sglang_router_worker_api_key_allow_plain_text=True)
    )
    # from a module's result (no origin), or none at all: not refused
    for value in (SECRET, ""):
        assert not any("sglang_router_worker_api_key" in e for e in errors(sglang_router_worker_api_key=value))


def test_the_key_file_holds_each_tenant_and_key_as_given():
    """tenant-api-keys, which smg-front-keys reads (the comment line skipped): one TENANT:KEY a line."""
    keys = [{"tenant": "lab", "key": '-a$b"c:d'}, {"tenant": "other", "key": "plain"}]
    header = "# tenant:key, one a line (gpulxc.sglang.sglang_router)\n"
    assert router_role.render("tenant-api-keys.j2", sglang_router_api_keys=keys) == (
        header + 'lab:-a$b"c:d\nother:plain\n'
    )
    assert router_role.render("tenant-api-keys.j2") == header
