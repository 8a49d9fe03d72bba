"""gpulxc.sglang.pve_cluster_info: the parsing of /cluster/status and /cluster/resources (in pve-manager's format,
tests/unit/fixtures/pve-api), the placement decision, classes of bad answers, and the calls it makes through
proxmoxer (a stand-in ProxmoxAPI: the https backend's requests are tested against the lab's API stand-in in
tests/unit/lab/test_pve_api.py)."""

import json
from pathlib import Path
from typing import ClassVar

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpulxc.sglang.plugins.modules import pve_cluster_info as mod
from conftest import ModuleExit as Exit
from conftest import ModuleFail as Fail

API = Path(__file__).resolve().parents[2] / "fixtures/pve-api"


def data(name):
    return json.loads((API / name).read_text())["data"]


STATUS, RESOURCES = data("cluster-status.json"), data("cluster-resources-vm.json")


def test_status_gives_the_cluster_and_its_members_sorted():
    cluster, members = mod.parse_status(STATUS)
    assert cluster == {"name": "prod", "quorate": True, "nodes": 3}
    assert [(m["name"], m["nodeid"], m["online"], m["local"]) for m in members] == [
        ("pve1", 1, True, True),
        ("pve2", 2, True, False),
        ("pve3", 3, False, False),
    ]


def test_a_standalone_node_is_its_own_only_member():
    cluster, members = mod.parse_status(data("cluster-status-standalone.json"))
    assert cluster == {}
    assert members == [{"name": "pve", "nodeid": 0, "online": True, "local": True}]


@pytest.mark.parametrize(
    ("vmid", "node", "hostname", "placement"),
    [
        (250, "pve1", "sglang-250", "absent"),
        (200, "pve2", "sglang-200", "here"),
        (200, "pve1", "sglang-200", "migrated"),  # our CT, on another node
        (200, "pve1", "", "migrated"),  # no name to tell: a CT with that id elsewhere is taken as ours, moved
        (200, "pve1", "other", "taken"),  # another CT with that id
        (201, "pve2", "sglang-201", "migrated"),  # its node has not reported its name yet
        (201, "pve1", "sglang-201", "here"),
        (300, "pve1", "sglang-300", "taken"),  # a VM
        (300, "pve3", "sglang-300", "taken"),  # a VM on the very node
    ],
)
def test_placement(vmid, node, hostname, placement):
    result = mod.decide(STATUS, RESOURCES, vmid, node, hostname)
    assert result["placement"] == placement
    assert result["node_member"]


def test_the_guest_entry_keeps_what_the_rules_name():
    guest = mod.decide(STATUS, RESOURCES, 200, "pve1", "x")["guest"]
    assert guest == {
        "id": "lxc/200",
        "vmid": 200,
        "node": "pve2",
        "type": "lxc",
        "name": "sglang-200",
        "status": "running",
    }
    assert mod.decide(STATUS, RESOURCES, 201, "pve1", "x")["guest"]["status"] == "unknown"


def test_node_defaults_to_the_answering_member_and_a_stranger_is_no_member():
    result = mod.decide(STATUS, RESOURCES, 250, "", "")
    assert (result["node"], result["local_node"], result["node_member"]) == ("pve1", "pve1", True)
    result = mod.decide(STATUS, RESOURCES, 250, "pve4", "")
    assert (result["node"], result["node_member"]) == ("pve4", False)


def test_vmids_as_strings_and_other_resource_types_are_read():
    resources = [
        {"id": "node/pve1", "type": "node", "node": "pve1"},
        {"id": "lxc/200", "vmid": "200", "node": "pve2", "type": "lxc", "status": "stopped"},
    ]
    assert mod.find_guest(resources, 200)["node"] == "pve2"


@pytest.mark.parametrize(
    ("status", "resources"),
    [
        ({"errors": "b'<html>'"}, RESOURCES),  # proxmoxer's answer to a body that is not JSON
        ([], RESOURCES),  # no node
        ([{"id": "node/pve1"}], RESOURCES),  # no type
        ([{"type": "node", "local": 1}], RESOURCES),  # no name
        ([{"type": "node", "name": "pve1", "online": "yes"}], RESOURCES),  # not a boolean
        (STATUS, {"errors": "x"}),
        (STATUS, ["lxc/200"]),
        (STATUS, [{"type": "lxc", "node": "pve1"}]),  # no vmid
        (STATUS, [{"type": "lxc", "vmid": 200}]),  # no node
    ],
)
def test_bad_answers_are_refused(status, resources):
    with pytest.raises(mod.AnswerError):
        mod.decide(status, resources, 200, "pve1", "")


class FakeAPI:
    """proxmoxer.ProxmoxAPI: attribute paths, get(**params); records the calls."""

    calls: ClassVar[list] = []
    answers: ClassVar[dict] = {}

    def __init__(self, host, **kwargs):
        FakeAPI.calls.append(("init", host, kwargs))
        self.path = ""

    def __getattr__(self, name):
        child = object.__new__(FakeAPI)
        child.path = f"{self.path}/{name}"
        return child

    def get(self, **params):
        FakeAPI.calls.append(("get", self.path, params))
        answer = FakeAPI.answers[self.path]
        if isinstance(answer, Exception):
            raise answer
        return answer


ARGS = {
    "api_host": "pve1.example.com",
    "api_user": "ansible@pve",
    "api_token_id": "audit",
    "api_token_secret": "s3cret",
    "vmid": 200,
    "node": "pve1",
    "hostname": "sglang-200",
}


@pytest.fixture
def api(monkeypatch, module_exits):
    FakeAPI.calls = []
    FakeAPI.answers = {"/cluster/status": STATUS, "/cluster/resources": RESOURCES}
    monkeypatch.setattr(mod, "ProxmoxAPI", FakeAPI)
    monkeypatch.setattr(mod, "PROXMOXER_ERROR", None)
    return FakeAPI


def run(**args):
    with patch_module_args({**ARGS, **args}), pytest.raises((Exit, Fail)) as info:
        mod.main()
    return info.type, info.value.args[0]


CA = "/etc/ssl/pve-root-ca.pem"


def test_it_reads_the_two_paths_with_the_token(api):
    kind, result = run(ca_path=CA)
    assert kind is Exit and not result["changed"]
    assert result["placement"] == "migrated" and result["guest"]["node"] == "pve2"
    assert api.calls == [
        (
            "init",
            "pve1.example.com",
            {
                "port": 8006,
                "user": "ansible@pve",
                "token_name": "audit",
                "token_value": "s3cret",
                "timeout": 10,
                "verify_ssl": CA,
            },
        ),
        ("get", "/cluster/status", {}),
        ("get", "/cluster/resources", {"type": "vm"}),
    ]


@pytest.mark.parametrize(("validate", "verify"), [(True, True), (False, False)])
def test_validate_certs(api, validate, verify):
    run(validate_certs=validate)
    assert api.calls[0][2]["verify_ssl"] is verify


def test_a_refused_token_names_the_api_and_the_role(api):
    api.answers["/cluster/status"] = mod.ResourceException(401, "Unauthorized", "invalid token value!")
    kind, result = run()
    assert kind is Fail
    assert "pve1.example.com:8006 as ansible@pve!audit refused: 401 Unauthorized" in result["msg"]
    assert "PVEAuditor" in result["msg"] and "s3cret" not in result["msg"]


def test_an_unreachable_api_is_named(api):
    api.answers["/cluster/status"] = OSError("Connection refused")
    kind, result = run()
    assert kind is Fail and result["msg"].startswith("cannot read the Proxmox VE API at pve1.example.com:8006")


def test_an_unexpected_answer_is_named(api):
    api.answers["/cluster/resources"] = {"errors": "b'<html>'"}
    kind, result = run()
    assert kind is Fail and "unexpected answer from the Proxmox VE API" in result["msg"]


def test_without_proxmoxer_it_says_what_to_install(monkeypatch, module_exits):
    monkeypatch.setattr(mod, "PROXMOXER_ERROR", "Traceback ...")
    kind, result = run()
    assert kind is Fail and "proxmoxer" in result["msg"]


def test_without_requests_it_says_what_to_install(api, monkeypatch):
    monkeypatch.setattr(mod, "REQUESTS_ERROR", "Traceback ...")
    kind, result = run()
    assert kind is Fail and "requests" in result["msg"] and api.calls == []
