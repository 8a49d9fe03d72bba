"""sglang_services' instances: one per GPU by default, or several on one GPU (sglang_services_instances), each
with its port, NCCL port, memory fraction and the instances before it on its GPU; the input rules for them
(tasks/preflight.yml templated as Ansible does); the files each instance gets (its config and environment file)."""

from pathlib import Path

import pytest
import yaml
from ansible.template import Templar, trust_as_template
from conftest import trusted

ROLE = Path(__file__).resolve().parents[3] / "roles/sglang_services"
DECIDE = "Decide the instances and the attention backend from the container's GPUs and the stack"
CHECK = "Check the services' settings"
STACK = {"attention_backends": {"12.0": ["flashinfer", "triton"]}, "fallback_attention_backend": "triton"}


def task(name, file="preflight.yml"):
    (found,) = [t for t in yaml.safe_load((ROLE / "tasks" / file).read_text()) if t.get("name") == name]
    return found


def decided(gpus=8, **extra):
    """The facts the first preflight task sets, for a container with `gpus` GPUs of SM 12.0."""
    defaults = yaml.safe_load((ROLE / "defaults/main.yml").read_text())
    layout = yaml.safe_load((ROLE.parent / "gpulxc/defaults/main.yml").read_text())  # the dependency's
    variables = {**trusted(layout), **trusted(defaults), **trusted(yaml.safe_load((ROLE / "vars/main.yml").read_text())),
                 "gpulxc_venv": "/opt/sglang/venv", "gpulxc_env_file": "/etc/sglang/cuda.env",
                 "gpulxc_config_dir": "/etc/sglang", "gpulxc_cache_dir": "/var/cache/sglang",
                 "gpulxc_facts_dir": "/etc/ansible/facts.d", "gpulxc_router_dir": "/etc/smg",
                 "gpulxc_stack_dir": "/opt/sglang", "ansible_managed": "managed",
                 "gpu_preflight_result": {"indexes": list(range(gpus)), "capabilities": ["12.0"] * gpus},
                 "ansible_local": {"gpulxc_stack": STACK}, "sglang_services_model_source": "/mnt/models/m",
                 "inventory_hostname": "ct200", "pct_container_node": "pve1",
                 **extra}  # fmt: skip
    fact = task(DECIDE)
    templar = Templar(variables={**variables, **trusted(fact["vars"])})
    facts = {k: templar.template(trusted(v)) for k, v in fact["ansible.builtin.set_fact"].items()}
    return {**variables, **facts}


def errors(gpus=8, **extra):
    variables = decided(gpus, **extra)
    rules = task(CHECK)
    return Templar(variables={**variables, **trusted(rules["vars"])}).template(trust_as_template("{{ _errors }}"))


def test_the_default_is_one_instance_per_gpu_numbered_by_it():
    facts = decided(sglang_services_gpus=[2, 5])
    assert facts["_sglang_services_plan"] == [
        {"number": 2, "gpu": 2, "port": 30002, "nccl_port": 31002, "mem_fraction_static": 0.88, "after": [], "rank": 0},
        {"number": 5, "gpu": 5, "port": 30005, "nccl_port": 31005, "mem_fraction_static": 0.88, "after": [], "rank": 0},
    ]  # fmt: skip
    urls = [i["url"] for i in facts["_sglang_services_instances"]]
    assert urls == ["http://127.0.0.1:30002", "http://127.0.0.1:30005"]
    assert errors(sglang_services_gpus=[2, 5]) == []
    assert errors() == []


def test_several_instances_share_a_gpu_each_with_its_port_fraction_and_the_ones_before_it():
    third = {"gpu": 0, "mem_fraction_static": 0.3}
    instances = [third, {"gpu": 1}, {**third, "port": 40000}, third]
    facts = decided(sglang_services_instances=instances)
    plan = {i["number"]: i for i in facts["_sglang_services_plan"]}
    assert [(plan[n]["gpu"], plan[n]["port"], plan[n]["nccl_port"], plan[n]["mem_fraction_static"]) for n in plan] == [
        (0, 30000, 31000, 0.3), (1, 30001, 31001, 0.88), (0, 40000, 31002, 0.3), (0, 30003, 31003, 0.3)]  # fmt: skip
    assert [plan[n]["after"] for n in plan] == [[], [], [0], [0, 2]]
    published = facts["_sglang_services_instances"]
    assert [(i["name"], i["gpu"], i["url"]) for i in published][2] == ("sglang@2", 0, "http://127.0.0.1:40000")
    assert errors(sglang_services_instances=instances) == []


def render(name, facts, instance):
    source = (ROLE / "templates" / name).read_text()
    return Templar(variables={**facts, "instance": instance}).template(trust_as_template(source))


def test_each_instance_gets_its_gpu_port_and_fraction_and_waits_for_the_ones_before_it_on_its_gpu():
    instances = [{"gpu": 3, "mem_fraction_static": 0.4}, {"gpu": 3, "port": 40000, "mem_fraction_static": 0.5}]
    facts = decided(sglang_services_instances=instances)
    first, second = facts["_sglang_services_plan"]
    config = yaml.safe_load(render("instance.yaml.j2", facts, second))
    assert (config["port"], config["nccl-port"], config["mem-fraction-static"]) == (40000, 31001, 0.5)
    env = render("instance.env.j2", facts, second).splitlines()
    assert "CUDA_VISIBLE_DEVICES=3" in env
    assert 'GPULXC_GPU_BEFORE="http://127.0.0.1:30000,/etc/sglang/instance-0.yaml"' in env
    assert 'GPULXC_GPU_BEFORE=""' in render("instance.env.j2", facts, first).splitlines()
    unit = render("sglang@.service.j2", {**facts, "_sglang_services_available": [3]}, first)
    assert "EnvironmentFile=/etc/sglang/instance-%i.env" in unit.splitlines()
    assert "ExecStartPre=/usr/bin/python3 /usr/local/lib/sglang-gpu-turn.py" in unit.splitlines()
    assert "TimeoutStartSec=1800" in unit.splitlines()  # the wait and a cold start, not systemd's 90 s
    assert "CUDA_VISIBLE_DEVICES=%i" not in unit


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"sglang_services_instances": [{"gpu": 0, "mem_fraction_static": 0.5}] * 2},
         "sglang_services_instances: the memory fractions of the instances on one GPU sum to 0.95 at most (GPU 0: 1.0"
         " (instances 0, 1)): lower their mem_fraction_static or move one to another GPU."),
        ({"sglang_services_instances": [{"gpu": 1}, {"gpu": 1}]}, "(GPU 1: 1.76 (instances 0, 1))"),  # the default 0.88
        ({"sglang_services_instances": [{"gpu": 0}, {"gpu": 9}, {"gpu": 12}]},
         "sglang_services_instances names GPUs the container does not have: [9, 12] (it has [0, 1, 2, 3, 4, 5, 6,"),
        ({"sglang_services_instances": [{"gpu": 0}, {"gpu": 1, "port": 30000}]},
         "sglang_services_instances: instances share the ports [30000]"),
        ({"sglang_services_instances": [{"gpu": 0}, {"gpu": 1, "port": 31000}]},  # instance 0's NCCL port
         "sglang_services_instances: instances share the ports [31000]"),
        ({"sglang_services_instances": [{"gpu": 0, "port": 80}]}, "every port of sglang_services_instances, must stay"),
        ({"sglang_services_instances": [{"gpu": 0, "port": 70000}]}, "every port of sglang_services_instances, must"),
        ({"sglang_services_instances": [{"gpu": 0, "mem_fraction_static": 0}]},
         "sglang_services_instances: a mem_fraction_static must be between 0 and 1 (got [0.0])."),
        ({"sglang_services_instances": [{"gpu": 0, "mem_fraction_static": 1.2}]}, "between 0 and 1 (got [1.2])."),
        ({"sglang_services_instances": [{"gpu": 0}], "sglang_services_gpus": [0]},
         "set sglang_services_gpus or sglang_services_instances, not both"),
        ({"sglang_services_gpus": [0, 9]}, "sglang_services_gpus [0, 9] names GPUs the container does not have: [9]"),
        ({"sglang_services_port_base": 65530}, "plus the highest GPU index 7, and every port"),
    ],
)  # fmt: skip
def test_bad_instances_are_refused_naming_the_variable(extra, message):
    found = errors(**extra)
    assert any(message in error for error in found), found


MOVING = "Decide which instances move to another GPU or change their share of a shared one"


def moving(running, **extra):
    """The instances the role stops before any start; running: {index: (gpu, fraction)} as they run now."""
    facts = decided(**extra)
    stop = task(MOVING, "main.yml")
    present = {
        "instances": [{"index": n, "share": {"gpu": g, "mem_fraction_static": f}} for n, (g, f) in running.items()]
    }
    templar = Templar(variables={**facts, "sglang_services_present_result": present, **trusted(stop["vars"])})
    return templar.template(trust_as_template("{{ _moving }}"))


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
    unit = render("sglang@.service.j2", {**facts, "_sglang_services_available": [0]}, facts["_sglang_services_plan"][0])
    assert 'Environment="HF_ENDPOINT=http://proxy/a%%2Fb"' in unit.splitlines()


RESTART = "Decide which instances restart, and whether one moves to a new stack first (the canary)"


def restarted(changed_paths=(), drop_ins=None, started=(), stale=(), *, what="_restart", **extra):
    """The instances the rolling restart visits; drop_ins: the instances a removed drop-in applied to."""
    facts = decided(**extra)
    restart = task(RESTART, "main.yml")
    results = {
        "sglang_services_files_result": {"changed_paths": list(changed_paths)},
        "sglang_services_start_result": {"results": [{"item": i, "changed": True} for i in started]},
        "sglang_services_first_result": {"changed": False},
        "sglang_services_units_result": {"stale_env": list(stale)},
        "sglang_services_present_result": {"drop_in_instances": list(drop_ins or [])},
        "sglang_services_drop_ins_result": {"changed": drop_ins is not None},
    }
    note = task("Note whether the unit or a drop-in of it changed", "main.yml")["ansible.builtin.set_fact"]
    unit_changed = Templar(variables={**facts, **results}).template(trusted(note["_sglang_services_unit_changed"]))
    templar = Templar(variables={**facts, **results, "_sglang_services_unit_changed": unit_changed,
                                 **trusted(restart["vars"])})  # fmt: skip
    if what == "_restart":
        return templar.template(trust_as_template("{{ _restart }}"))
    return templar.template(trusted(restart["ansible.builtin.set_fact"][what]))


def test_the_instances_a_removed_drop_in_applied_to_are_restarted_and_no_others():
    assert restarted() == []
    assert restarted(drop_ins=[3]) == [3]  # sglang@3.service.d/...
    assert restarted(drop_ins=list(range(8))) == list(range(8))  # sglang@.service.d/...: every instance
    assert restarted(drop_ins=[3], started=[3]) == []  # started after the reload: it runs without it already
    assert restarted(["/etc/sglang/instance-1.yaml"], drop_ins=[3], stale=[5]) == [1, 3, 5]
    assert restarted(["/etc/systemd/system/sglang@.service"], drop_ins=[3]) == list(range(8))


def canary(
    previous, now="/opt/sglang/stacks/bbbbbbbbbbbbbbbb", changed=("/etc/systemd/system/sglang@.service",), **extra
):
    """The canary the restarts start with: the stack the instances ran (their fact) and the one they start now."""
    stack = {**STACK, "venv": "/opt/sglang/venv", "stack": now}
    local = {"gpulxc_stack": stack, "gpulxc_services": {"stack": previous} if previous else {}}
    found = restarted(changed, what="_sglang_services_canary", sglang_services_venv="/opt/sglang/venv",
                      ansible_local=local, **{"ansible_check_mode": False, **extra})  # fmt: skip
    return [i["name"] for i in found]


def test_a_new_stack_under_running_instances_makes_the_first_to_restart_a_canary():
    old = "/opt/sglang/stacks/aaaaaaaaaaaaaaaa"
    assert canary(old) == ["sglang@0"]
    assert canary(old, sglang_services_gpus=[3, 5]) == ["sglang@3"]
    assert canary(old, changed=["/etc/sglang/instance-5.env"], sglang_services_gpus=[3, 5]) == ["sglang@5"]
    assert canary("/opt/sglang/stacks/bbbbbbbbbbbbbbbb") == []  # the same stack: a plain rolling restart
    assert canary("") == []  # no stack recorded (a first run, or the fact of an older collection)
    assert canary(old, changed=[]) == []  # nothing to restart
    assert canary(old, ansible_check_mode=True) == []


def test_a_changed_declared_drop_in_restarts_every_instance_as_a_changed_unit_does():
    declared = "/etc/systemd/system/sglang@.service.d/sandbox.conf"
    assert restarted([declared], sglang_services_unit_drop_ins={"sandbox": SANDBOX}) == list(range(8))
    assert restarted([declared]) == []  # not declared: not the role's file


SANDBOX = "[Service]\nSystemCallFilter=\n"


@pytest.mark.parametrize(
    "drop_ins",
    [
        {"../escape": SANDBOX},  # a path out of the drop-in directory
        {"sub/dir": SANDBOX},
        {"": SANDBOX},
        {"with space": SANDBOX},
        {".hidden": SANDBOX},
        {"sandbox": "SystemCallFilter=\n"},  # no section: systemd would ignore the lines
        {"sandbox": {"Service": {"SystemCallFilter": ""}}},  # not a text
        {"sandbox": None},
    ],
    ids=["dotdot", "slash", "empty", "space", "leading-dot", "no-section", "dict", "null"],
)
def test_a_declared_drop_in_that_is_not_a_name_and_a_unit_text_is_refused(drop_ins):
    found = [e for e in errors(sglang_services_unit_drop_ins=drop_ins) if "sglang_services_unit_drop_ins" in e]
    assert found and "starting with a section such as [Service]" in found[0], found


def test_a_declared_drop_in_is_accepted_and_its_path_kept_from_the_removal():
    assert errors(sglang_services_unit_drop_ins={"sandbox": SANDBOX, "10-nice_v2": "\n[Service]\nNice=5\n"}) == []
    facts = decided(sglang_services_unit_drop_ins={"sandbox": SANDBOX})
    templar = Templar(variables=facts)
    paths = templar.template(trust_as_template("{{ _sglang_services_drop_in_paths }}"))
    assert paths == ["/etc/systemd/system/sglang@.service.d/sandbox.conf"]
    kept = task("Read the sglang units of the container (which exist, run or are enabled)", "main.yml")
    assert templar.template(trusted(kept["gpulxc.sglang.sglang_units_info"]["kept_drop_ins"])) == paths
