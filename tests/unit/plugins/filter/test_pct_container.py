"""gpulxc.sglang.pct_container_plan: role pct_container's decisions, from its variables and what its preflight read.
The cases are in test_pct_container.yaml; the cases of the node and the cluster answering are plain functions below.
Every message must stay word for word as the role has always written it: the lab tests look for them."""

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.gpulxc.sglang.plugins.filter.pct_container import VARIABLES, pct_container_plan

REPO = Path(__file__).resolve().parents[4]
ROLE = REPO / "roles/pct_container"
DEFAULTS = yaml.safe_load((ROLE / "defaults/main.yml").read_text())
CASES = yaml.safe_load(Path(__file__).with_suffix(".yaml").read_text())
SKIPPED = {"skipped": True, "changed": False}


def plan(role=(), facts=(), hosts=(), me="ct200"):
    """The plan of container `me` (CT 200 on node pve unless `hosts` says) with the role's defaults over `role`."""
    hosts = {host: dict(v) for host, v in dict(hosts).items()}
    hostvars = {"pve": {}, "pve2": {}}
    play = [] if me in hosts else [me]
    for host, v in (({} if me in hosts else {me: {}}) | hosts).items():
        in_play, defaults = v.pop("play", True), v.pop("defaults", False)
        hostvars[host] = {
            **(DEFAULTS if defaults else {}),
            "inventory_hostname": host,
            "pct_container_node": "pve",
            **v,
        }
        play += [host] if in_play and host in hosts else []
    variables = {
        **DEFAULTS,
        "pct_container_vmid": 200,
        "pct_container_hostname": me,
        "pct_container_node": "pve",
        **{k: v for k, v in hosts.get(me, {}).items() if k != "inventory_hostname"},
        **dict(role),
    }
    found = {
        "inventory_hostname": me,
        "pct_container_probe_result": SKIPPED,
        "pct_container_cluster_result": SKIPPED,
        "pct_container_installer_stat_result": SKIPPED,
        **dict(facts),
    }
    return pct_container_plan({name: variables[name] for name in VARIABLES}, found, hostvars, play, list(hostvars))


def leader(found, run, me):
    """node_devices.yml's set_fact: the first of the plan's node_peers still in the run, else the container itself."""
    return next((host for host in found["node_peers"] if host in run), me)


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_case(case):
    role = {**case.get("role", {}), **{k: "x" * n for k, n in case.get("long", {}).items()}}
    me = case.get("me", "ct200")
    found = plan(role, case.get("facts", {}), case.get("hosts", {}), me)
    for key in ("errors", "cluster_errors", "gpu_overlaps", "node_peers"):
        if key in case:
            assert found[key] == case[key]
    if "starts" in case:
        assert len(found["errors"]) == len(case["starts"]), found["errors"]
        assert all(message.startswith(start) for message, start in zip(found["errors"], case["starts"], strict=True))
    if "contains" in case:
        assert len(found["errors"]) == len(case["contains"]), found["errors"]
        for message, fragments in zip(found["errors"], case["contains"], strict=True):
            assert [fragment for fragment in fragments if fragment not in message] == [], message
    if "leader" in case:
        assert leader(found, case["leader"]["run"], me) == case["leader"]["is"]


def test_the_role_reads_the_variables_the_plan_decides_on():
    assert yaml.safe_load((ROLE / "vars/main.yml").read_text())["_pct_container_plan_variables"] == list(VARIABLES)


def test_a_variable_left_out_is_named():
    with pytest.raises(AnsibleFilterError, match="lack pct_container_tags"):
        pct_container_plan(
            {name: DEFAULTS.get(name) for name in VARIABLES if name != "pct_container_tags"},
            {"inventory_hostname": "ct200"},
            {},
            [],
            [],
        )


# -- the node and the cluster answering (pct_info, pve_cluster_info), as plain functions ------------------------------

DRIVER = "580.95.05"
NODE = {
    "status": "running",
    "unprivileged": False,
    "gpu_indexes": [0, 1, 2, 3],
    "gpu_users": {},
    "template": {},
    "storage": {},
    "driver": {"version": DRIVER, "open": True},
    "pve": {"version": "9.0.3", "container": "6.1.10"},
    "files": {"/usr/bin/nvidia-modprobe": {"exists": True, "mode": "0755"}},
    "container": {"nvidia_userspace": DRIVER},
}


def on_node(role=(), hosts=(), installer=None, **changes):
    """The plan where the node answered (NODE, with `changes`) and the preflight noted its GPUs and driver."""
    probe = {**NODE, **changes}
    gpus = dict(role).get("pct_container_gpus", "all")
    notes = {
        "_pct_container_gpu_indexes": probe["gpu_indexes"] if gpus == "all" else sorted(gpus),
        "_pct_container_host_gpu_indexes": probe["gpu_indexes"],
        "_pct_container_host_driver": DRIVER,
        "_pct_container_installer": "/root/NVIDIA-Linux-x86_64-%s.run" % DRIVER,
    }
    facts = {"pct_container_probe_result": probe, **notes}
    if installer is not None:
        facts["pct_container_installer_stat_result"] = {"stat": {"exists": installer}}
    return plan(role, facts, hosts)


def test_a_node_that_can_take_the_container_passes():
    assert on_node()["errors"] == []


def test_gpus_the_node_does_not_have_are_named_with_the_node_s():
    assert on_node({"pct_container_gpus": [2, 5, 4]})["errors"] == [
        "pct_container: on pve, pct_container_gpus asks for GPUs [4, 5] but the node has 4 GPU(s) ([0, 1, 2, 3] as"
        " its driver lists them): ask for fewer, or check the host driver."
    ]


def test_another_userspace_in_the_container_and_a_missing_installer_are_refused():
    (message,) = on_node(container={"nvidia_userspace": "570.1"})["errors"]
    assert message == (
        "pct_container: the NVIDIA userspace in CT 200 is '570.1' but the kernel driver on pve is 580.95.05; they"
        ' must be equal ("Driver/library version mismatch" otherwise). Set pct_container_driver_install to true'
        " (with NVIDIA-Linux-x86_64-580.95.05.run in pct_container_driver_installer_dir on the node), install"
        " 580.95.05 in the container yourself, or set pct_container_driver_check to false."
    )
    assert on_node(container={}, status="stopped")["errors"] == []  # a stopped CT is installed into after its start
    assert on_node({"pct_container_driver_install": True}, installer=False, container={})["errors"] == [
        "pct_container: /root/NVIDIA-Linux-x86_64-580.95.05.run is not on pve: download the NVIDIA driver 580.95.05"
        " installer (the same version as the node's kernel module) into pct_container_driver_installer_dir (/root)."
    ]


def test_a_node_without_devn_or_nvidia_modprobe_or_an_open_driver_is_refused_in_that_order():
    found = on_node(
        pve={"version": "8.1.3", "container": "5.0.6"},
        driver={"version": DRIVER, "open": False},
        files={"/usr/bin/nvidia-modprobe": {"exists": True, "mode": "0644"}},
    )["errors"]
    starts = [
        "pct_container: pve runs Proxmox VE 8.1.3 with pve-container 5.0.6, which has no devN passthrough",
        "pct_container: pct_container_nvidia_modprobe (/usr/bin/nvidia-modprobe) is not an executable file",
        "pct_container: on pve, the NVIDIA driver 580.95.05 is the proprietary kernel module",
    ]
    assert len(found) == 3 and all(map(str.startswith, found, starts)), found
    # raw lxc lines need no devN
    lxc = on_node({"pct_container_gpu_passthrough": "lxc"}, pve={"version": "8.1.3", "container": "5.0.6"})
    assert lxc["errors"] == []


def test_a_storage_that_cannot_take_the_rootfs_is_refused():
    storage = {
        "name": "local-lvm",
        "exists": True,
        "rootdir": True,
        "status": "active",
        "avail_kib": 100 * 1048576,
        "rootdir_storages": ["local-lvm", "tank"],
        "error": "",
    }
    assert on_node(status="absent", template={"exists": True}, storage=storage)["errors"] == [
        "pct_container: pct_container_rootfs_storage ('local-lvm') on pve has 100.0 GiB available;"
        " pct_container_rootfs_size_gb asks for 200. Free space there, ask for less, or pick another storage."
    ]
    (message,) = on_node(status="absent", template={"exists": True}, storage={**storage, "rootdir": False})["errors"]
    assert message.startswith("pct_container: pct_container_rootfs_storage ('local-lvm') on pve does not hold")
    assert "Set it to one that does: local-lvm, tank, or add rootdir" in message


CLUSTER = {"node": "pve", "node_member": True, "cluster": {"name": "lab"}, "members": [{"name": "pve"}, {"name": "b"}]}


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            {"node_member": False, "node": "pve3"},
            "pct_container: pct_container_node 'pve' (Proxmox node 'pve3', pct_container_pve_node) is not a member"
            " of the cluster lab that the API answers for (members: pve, b). Set pct_container_node to the inventory"
            " host of a member and pct_container_pve_node to its name.",
        ),
        (
            {"placement": "migrated", "guest": {"node": "b", "name": "", "type": "lxc"}},
            "pct_container: CT 200 ('name not reported') is on node b, not on pve: it was migrated there. Set"
            " pct_container_node to the inventory host of b (and pct_container_pve_node to b), or migrate it back (pct"
            " migrate 200 pve). Nothing was changed.",
        ),
        (
            {"placement": "taken", "guest": {"node": "b", "name": "build", "type": "qemu"}},
            "pct_container: vmid 200 is already used on node b by VM 'build' (pct_container_hostname is 'ct200'): set"
            " pct_container_vmid (or proxmox_vmid) to a free id (pvesh get /cluster/nextid). Nothing was changed.",
        ),
    ],
    ids=["not-a-member", "migrated", "taken"],
)
def test_the_cluster_s_refusals_name_the_node_the_guest_and_the_fix(answer, message):
    assert plan(facts={"pct_container_cluster_result": {**CLUSTER, "placement": "free", **answer}})[
        "cluster_errors"
    ] == [message]
    assert plan(facts={"pct_container_cluster_result": {**CLUSTER, "placement": "free"}})["cluster_errors"] == []
