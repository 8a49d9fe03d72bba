"""gpulxc.sglang.pct_container_config, _config_report, _verify_errors, _node_steps and the plan's node_calls: role
pct_container's later phases (config.yml, start.yml, verify.yml, node_devices.yml) as plain functions."""

from pathlib import Path

import pytest
import yaml
from ansible_collections.gpulxc.sglang.plugins.filter.pct_container import (
    VARIABLES,
    pct_container_config,
    pct_container_config_report,
    pct_container_node_steps,
    pct_container_verify_errors,
)

DEFAULTS = yaml.safe_load((Path(__file__).resolve().parents[4] / "roles/pct_container/defaults/main.yml").read_text())
ROLE = {**DEFAULTS, "pct_container_vmid": 200, "pct_container_node": "pve", "pct_container_hostname": "ct200"}
NODES = [{"path": p, "major": m} for p, m in (("/dev/nvidiactl", 195), ("/dev/nvidia-uvm", 511), ("/dev/nvidia0", 195))]


def role(**changes):
    return [{**ROLE, **changes}[name] for name in VARIABLES]  # as query('ansible.builtin.vars', ...) gives them


@pytest.mark.parametrize(
    ("changes", "facts", "key", "expected"),
    [
        (
            {},
            {"_pct_container_gpu_indexes": [0]},
            "devices",
            [
                "/dev/nvidiactl,mode=0666",
                "/dev/nvidia-uvm,mode=0666",
                "/dev/nvidia-uvm-tools,mode=0666",
                "/dev/nvidia0,mode=0666",
            ],
        ),
        ({"pct_container_gpu_passthrough": "none"}, {}, "devices", []),
        ({"pct_container_net0": ""}, {}, "exclusive", ["net"]),
        ({"pct_container_exclusive_devices": True}, {}, "exclusive", ["dev"]),
        (
            {"pct_container_gpu_passthrough": "lxc"},
            {"_pct_container_gpu_indexes": [0], "_pct_container_device_nodes": NODES},
            "lxc",
            None,
        ),
    ],
)
def test_config(changes, facts, key, expected):
    found = pct_container_config(role(**changes), facts)
    if expected is None:  # lxc passthrough: the raw allow lines of the nodes' majors, after /dev/shm's
        assert found[key][:3] == [
            found[key][0],
            "lxc.cgroup2.devices.allow: c 195:* rwm",
            "lxc.cgroup2.devices.allow: c 511:* rwm",
        ]
        assert found[key][0].startswith("lxc.mount.entry: tmpfs dev/shm tmpfs size=")
    else:
        assert found[key] == expected


def test_the_owned_allow_lines():
    probe = {"char_devices": [{"name": "nvidia-uvm", "major": 511}, {"name": "fuse", "major": 10}]}
    own = pct_container_config(role(), {"pct_container_probe_result": probe})["lxc_exclusive"][2]
    assert own == r"^lxc\.cgroup2\.devices\.allow: c (?!(?:10):)[0-9]+:\* rwm$"
    own = pct_container_config(role(), {"_pct_container_device_nodes": NODES})["lxc_exclusive"][2]
    assert own == r"^lxc\.cgroup2\.devices\.allow: c (195|511):\* rwm$"


@pytest.mark.parametrize(
    ("result", "check_mode", "expected"),
    [
        (
            {"deleted": ["dev7", "tags"], "kept": {}, "pending": []},
            False,
            {"unnamed": {"deleted": ["dev7"], "kept": {}}, "pending_gpus": ""},
        ),
        ({"deleted": [], "kept": {}, "pending": ["features"]}, True, {"unnamed": {}, "pending_gpus": ""}),
        (
            {"deleted": ["mp1"], "kept": {}},
            True,
            {"unnamed": {"would be deleted": ["mp1"], "kept": {}}, "pending_gpus": ""},
        ),
    ],
)
def test_config_report(result, check_mode, expected):
    assert pct_container_config_report(result, check_mode) == expected


def test_a_pending_devn_is_said():
    assert pct_container_config_report({"pending": ["dev5"]})["pending_gpus"].startswith("The GPU list (devN) is")


CT = {"nvidia_userspace": "580", "smi_rc": 0, "smi_gpus": 2, "smi_lines": []}
FACTS = {"_pct_container_host_driver": "580", "_pct_container_gpu_indexes": [0, 1], "pct_container_config_result": {}}
WAITING = {"restart_required": True, "config": {"dev3": "/dev/nvidia0,mode=0666", "dev0": "/dev/nvidiactl"}}


@pytest.mark.parametrize(
    ("ct", "facts", "starts"),
    [
        (CT, FACTS, []),
        ({**CT, "nvidia_userspace": ""}, FACTS, ["pct_container: the NVIDIA userspace in CT 200 is 'not installed'"]),
        (
            {**CT, "smi_gpus": 1},
            FACTS,
            [
                "pct_container: nvidia-smi -L in CT 200 exited 0 and lists 1 GPU(s), but 2 are"
                " passed through ([0, 1]): . Look at"
            ],
        ),
        ({**CT, "smi_gpus": 1}, {**FACTS, "pct_container_config_result": WAITING}, []),  # one devN GPU until restart
        (
            {**CT, "smi_gpus": 2},
            {**FACTS, "pct_container_config_result": WAITING},
            ["pct_container: nvidia-smi -L in CT 200 exited 0 and lists 2 GPU(s), but 1 are passed through"],
        ),
        ({"nvidia_userspace": "580"}, FACTS, ["pct_container: nvidia-smi -L in CT 200 exited None and lists 0 GPU(s)"]),
    ],
)
def test_verify_errors(ct, facts, starts):
    found = pct_container_verify_errors(ct, role(), facts)
    assert len(found) == len(starts) and all(map(str.startswith, found, starts)), found


@pytest.mark.parametrize(
    ("run", "me", "leader", "calls"),
    [
        (["a", "b"], "a", "a", [["-c5"]]),
        (["a", "b"], "b", "a", []),
        (["b"], "b", "b", [["-c5"]]),
        ([], "c", "c", [["-c5"]]),
    ],
)
def test_node_steps(run, me, leader, calls):
    assert pct_container_node_steps({"node_peers": ["a", "b"], "node_calls": [["-c5"]]}, run, me) == {
        "leader": leader,
        "calls": calls,
    }
