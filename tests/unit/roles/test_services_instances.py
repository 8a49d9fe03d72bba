"""sglang_services' instances: one per GPU by default, or several on one GPU (sglang_services_instances), each
with its port, NCCL port, memory fraction and the instances before it on its GPU (gpulxc.sglang.services_plan); the
files each instance gets (its config and environment file); the instances that move before any start
(services_moving), and those that restart and the canary (restart_plan). The refused input:
test_services_errors.yaml."""

import json

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from services import ROLE, decided, errors, moving, render, restarts


def plan(**given):
    return decided(**given)["_sglang_services_plan"]


def test_the_default_is_one_instance_per_gpu_numbered_by_it():
    assert plan(sglang_services_gpus=[2, 5])["servers"] == [
        {"number": 2, "gpu": 2, "port": 30002, "nccl_port": 31002, "mem_fraction_static": 0.88, "after": [], "rank": 0},
        {"number": 5, "gpu": 5, "port": 30005, "nccl_port": 31005, "mem_fraction_static": 0.88, "after": [], "rank": 0},
    ]
    urls = [i["url"] for i in plan(sglang_services_gpus=[2, 5])["instances"]]
    assert urls == ["http://127.0.0.1:30002", "http://127.0.0.1:30005"]
    assert errors(sglang_services_gpus=[2, 5]) == []
    assert errors() == []


def test_several_instances_share_a_gpu_each_with_its_port_fraction_and_the_ones_before_it():
    third = {"gpu": 0, "mem_fraction_static": 0.3}
    instances = [third, {"gpu": 1}, {**third, "port": 40000}, third]
    planned = plan(sglang_services_instances=instances)
    servers = {i["number"]: i for i in planned["servers"]}
    assert [(s["gpu"], s["port"], s["nccl_port"], s["mem_fraction_static"]) for s in servers.values()] == [
        (0, 30000, 31000, 0.3),
        (1, 30001, 31001, 0.88),
        (0, 40000, 31002, 0.3),
        (0, 30003, 31003, 0.3),
    ]
    assert [s["after"] for s in servers.values()] == [[], [], [0], [0, 2]]
    published = planned["instances"]
    assert [(i["name"], i["gpu"], i["url"]) for i in published][2] == ("sglang@2", 0, "http://127.0.0.1:40000")
    assert errors(sglang_services_instances=instances) == []


def test_each_instance_gets_its_gpu_port_and_fraction_and_waits_for_the_ones_before_it_on_its_gpu():
    instances = [{"gpu": 3, "mem_fraction_static": 0.4}, {"gpu": 3, "port": 40000, "mem_fraction_static": 0.5}]
    facts = decided(sglang_services_instances=instances)
    first, second = facts["_sglang_services_plan"]["servers"]
    config = yaml.safe_load(render("instance.yaml.j2", facts, second))
    assert (config["port"], config["nccl-port"], config["mem-fraction-static"]) == (40000, 31001, 0.5)
    env = render("instance.env.j2", facts, second).splitlines()
    assert "CUDA_VISIBLE_DEVICES=3" in env
    assert 'GPULXC_GPU_BEFORE="http://127.0.0.1:30000,/etc/sglang/instance-0.yaml"' in env
    assert 'GPULXC_GPU_BEFORE=""' in render("instance.env.j2", facts, first).splitlines()
    unit = render("sglang@.service.j2", facts, first)
    assert "EnvironmentFile=/etc/sglang/instance-%i.env" in unit.splitlines()
    assert "ExecStartPre=/usr/bin/python3 /usr/local/lib/sglang-gpu-turn.py" in unit.splitlines()
    assert "TimeoutStartSec=1800" in unit.splitlines()  # the wait and a cold start, not systemd's 90 s
    assert "CUDA_VISIBLE_DEVICES=%i" not in unit


def test_the_files_loop_writes_each_instances_configuration_and_environment_file():
    """files.yml's per-instance files come from one template (instance_files.json.j2), which renders the two
    templates of each instance."""
    facts = decided(sglang_services_instances=[{"gpu": 3}, {"gpu": 4}], sglang_services_api_key="k")
    loader = DataLoader()
    loader.set_basedir(str(ROLE))
    scope = {**facts, "role_path": str(ROLE), "ansible_search_path": [str(ROLE)]}
    text = Templar(loader=loader, variables=scope).template(
        trust_as_template("{{ lookup('ansible.builtin.template', 'instance_files.json.j2') }}")
    )
    written = json.loads(text)
    servers = facts["_sglang_services_plan"]["servers"]
    assert [(f["path"], f["group"], f["mode"], f.get("secret")) for f in written] == [
        ("/etc/sglang/instance-0.yaml", "sglang", "0640", True),
        ("/etc/sglang/instance-0.env", "root", "0644", None),
        ("/etc/sglang/instance-1.yaml", "sglang", "0640", True),
        ("/etc/sglang/instance-1.env", "root", "0644", None),
    ]
    assert written[2]["content"] == render("instance.yaml.j2", facts, servers[1])
    assert written[3]["content"] == render("instance.env.j2", facts, servers[1])


def test_instances_moving_between_gpus_or_resizing_on_a_shared_one_are_stopped_before_any_start():
    two_on_0 = [{"gpu": 0, "mem_fraction_static": 0.45}, {"gpu": 1}, {"gpu": 0, "mem_fraction_static": 0.45}]
    default = {n: (n, 0.88) for n in range(8)}
    # from one per GPU to two on GPU 0: instance 2 moves, instance 0 shrinks on a GPU now shared
    assert moving(default, sglang_services_instances=two_on_0) == [0, 2]
    # and back: instance 0 grows on a GPU shared until now, instance 2 moves back
    assert moving({0: (0, 0.45), 1: (1, 0.88), 2: (0, 0.45)}) == [0, 2]
    # a new fraction for every instance, one per GPU: a rolling restart, not a stop
    assert moving(default, sglang_services_mem_fraction_static=0.8) == []
    assert moving(default) == []
    assert moving({0: (0, 0.45), 1: (1, 0.88), 2: (0, 0.45)}, sglang_services_instances=two_on_0) == []


def test_a_percent_sign_in_the_environment_reaches_the_server_as_written():
    """systemd expands specifiers in Environment= (%i, %n...): a value's % is written %%."""
    facts = decided(sglang_services_environment={"HF_ENDPOINT": "http://proxy/a%2Fb"})
    unit = render("sglang@.service.j2", facts, facts["_sglang_services_plan"]["servers"][0])
    assert 'Environment="HF_ENDPOINT=http://proxy/a%%2Fb"' in unit.splitlines()


def restarted(*args, **given):
    return restarts(*args, **given)["restart"]


def test_the_instances_a_removed_drop_in_applied_to_are_restarted_and_no_others():
    assert restarted() == []
    assert restarted(drop_ins=[3]) == [3]  # sglang@3.service.d/...
    assert restarted(drop_ins=list(range(8))) == list(range(8))  # sglang@.service.d/...: every instance
    assert restarted(drop_ins=[3], started=[3]) == []  # started after the reload: it runs without it already
    assert restarted(["/etc/sglang/instance-1.yaml"], drop_ins=[3], stale=[5]) == [1, 3, 5]
    assert restarted(["/etc/systemd/system/sglang@.service"], drop_ins=[3]) == list(range(8))


def canary(
    previous, now="/opt/sglang/stacks/bbbbbbbbbbbbbbbb", changed=("/etc/systemd/system/sglang@.service",), **given
):
    """The canary the restarts start with: the stack the instances ran (their fact) and the one they start now."""
    stack = {"attention_backends": {"12.0": ["flashinfer"]}, "venv": "/opt/sglang/venv", "stack": now}
    local = {"gpulxc_stack": stack, "gpulxc_services": {"stack": previous} if previous else {}}
    found = restarts(changed, sglang_services_venv="/opt/sglang/venv", ansible_local=local, **given)["canary"]
    return [i["name"] for i in found]


def test_a_new_stack_under_running_instances_makes_the_first_to_restart_a_canary():
    old = "/opt/sglang/stacks/aaaaaaaaaaaaaaaa"
    assert canary(old) == ["sglang@0"]
    assert canary(old, sglang_services_gpus=[3, 5]) == ["sglang@3"]
    assert canary(old, changed=["/etc/sglang/instance-5.env"], sglang_services_gpus=[3, 5]) == ["sglang@5"]
    assert canary("/opt/sglang/stacks/bbbbbbbbbbbbbbbb") == []  # the same stack: a plain rolling restart
    assert canary("") == []  # no stack recorded (a first run, or the fact of an older collection)
    assert canary(old, changed=[]) == []  # nothing to restart
    assert canary(old, check_mode=True) == []


def test_the_others_restart_a_batch_at_a_time_after_the_canary():
    unit = ("/etc/systemd/system/sglang@.service",)
    assert restarts(unit, sglang_services_gpus=[0, 1, 2])["batches"] == [[0], [1], [2]]
    assert restarts(unit, sglang_services_gpus=[0, 1, 2], sglang_services_restart_batch=2)["batches"] == [[0, 1], [2]]
    assert restarts(unit, sglang_services_gpus=[0, 1, 2], sglang_services_restart_batch=0)["batches"] == [[0, 1, 2]]
    local = {
        "gpulxc_stack": {"venv": "/opt/sglang/venv", "stack": "/opt/sglang/stacks/b"},
        "gpulxc_services": {"stack": "/opt/sglang/stacks/a"},
    }
    after_canary = restarts(unit, sglang_services_gpus=[0, 1, 2], ansible_local=local)
    assert ([i["index"] for i in after_canary["canary"]], after_canary["batches"]) == ([0], [[1], [2]])


SANDBOX = "[Service]\nSystemCallFilter=\n"


def test_a_changed_declared_drop_in_restarts_every_instance_as_a_changed_unit_does():
    declared = "/etc/systemd/system/sglang@.service.d/sandbox.conf"
    assert restarted([declared], sglang_services_unit_drop_ins={"sandbox": SANDBOX}) == list(range(8))
    assert restarted([declared]) == []  # not declared: not the role's file


def test_a_declared_drop_in_is_accepted_and_its_path_kept_from_the_removal():
    planned = plan(sglang_services_unit_drop_ins={"sandbox": SANDBOX})
    assert planned["drop_in_paths"] == ["/etc/systemd/system/sglang@.service.d/sandbox.conf"]
    assert planned["drop_ins"] == [{"path": "/etc/systemd/system/sglang@.service.d/sandbox.conf", "content": SANDBOX}]
