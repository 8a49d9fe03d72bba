"""Role sglang_services' decisions called as plain functions: the role's defaults (templated as Ansible templates
them, with the lab's shared layout) and a case's variables, handed to gpulxc.sglang.services_plan, services_moving
and restart_plan (plugins/filter/services.py) as tasks/preflight.yml, moving.yml and restart.yml hand them; the
templates rendered from the plan. The variables a case may give besides the role's: gpulxc_gpus,
ansible_local, sglang_stack_profile, sglang_stack_predicted_fact, hostvars, inventory_hostname."""

from functools import cache
from pathlib import Path

import yaml
from ansible.template import Templar, trust_as_template
from ansible_collections.gpulxc.sglang.plugins.filter.services import (
    restart_plan,
    services_moving,
    services_plan,
    services_stack,
)
from ansible_collections.gpulxc.sglang.plugins.filter.services_steps import services_changed
from ansible_collections.gpulxc.sglang.plugins.lookup.stack_profile import load
from conftest import trusted

ROLE = Path(__file__).resolve().parents[3] / "roles/sglang_services"
STACK = {"attention_backends": {"12.0": ["flashinfer", "triton"]}, "fallback_attention_backend": "triton"}
LAYOUT = {
    "gpulxc_venv": "/opt/sglang/venv",
    "gpulxc_env_file": "/etc/sglang/cuda.env",
    "gpulxc_config_dir": "/etc/sglang",
    "gpulxc_cache_dir": "/var/cache/sglang",
    "gpulxc_facts_dir": "/etc/ansible/facts.d",
    "gpulxc_router_dir": "/etc/smg",
    "gpulxc_stack_dir": "/opt/sglang",
    "ansible_managed": "managed",
    "inventory_hostname": "ct200",
    "pct_container_node": "pve1",
    "sglang_services_model_source": "/mnt/models/m",
}
UNIT = "/etc/systemd/system/sglang@.service"


@cache
def _role_file(name):
    return trusted(yaml.safe_load((ROLE / name).read_text()))


@cache
def _layout():
    """The defaults of the role every role depends on (roles/gpulxc): gpulxc_stack among them."""
    return trusted(yaml.safe_load((ROLE.parent / "gpulxc/defaults/main.yml").read_text()))


@cache
def profile(name="sglang-0.5.12"):
    return load(name, flags=True)


def variables(gpus=8, **given):
    """Every variable the role's tasks and templates see, for a container with `gpus` GPUs of SM 12.0."""
    found = {"indexes": list(range(gpus)), "capabilities": ["12.0"] * gpus}
    return {
        **_layout(),
        **_role_file("defaults/main.yml"),
        **_role_file("vars/main.yml"),
        **LAYOUT,
        "gpulxc_gpus": found,
        "ansible_local": {"gpulxc_stack": STACK},
        **given,
    }


def inputs_venv(scope):
    return template(scope, "{{ sglang_services_venv }}")


def template(scope, expression):
    return Templar(variables=scope).template(trust_as_template(expression))


def decided(gpus=8, **given):
    """The variables and the plan (`_sglang_services_plan`), as preflight.yml decides it."""
    scope = variables(gpus, **given)
    (planned,) = [
        task for task in yaml.safe_load((ROLE / "tasks/preflight.yml").read_text()) if "_names" in task.get("vars", {})
    ]
    names = [name for name in _role_file("defaults/main.yml") if name in planned["vars"]["_names"]]
    inputs = {name: template(scope, "{{ " + name + " }}") for name in names}
    stack = template(scope, "{{ gpulxc_stack }}")
    # stack.yml: where the servers start from
    started = services_stack(stack, inputs_venv(scope), template(scope, "{{ sglang_services_cache_dir }}"))
    scope = {**scope, **{f"_sglang_services_{key}": value for key, value in started.items()}}
    plan = services_plan(
        inputs,
        profile=profile(stack.get("profile_source") or stack.get("profile") or "sglang-0.5.12"),
        gpus=template(scope, "{{ gpulxc_gpus }}"),
        stack=stack,
        hostname=scope["inventory_hostname"],
        hostvars=scope.get("hostvars", {}),
        drop_in_dir=template(scope, "{{ _sglang_services_drop_in_dir }}"),
    )
    return {**scope, "_sglang_services_plan": plan}


def errors(gpus=8, **given):
    return decided(gpus, **given)["_sglang_services_plan"]["errors"]


def render(name, facts, instance):
    source = (ROLE / "templates" / name).read_text()
    return Templar(variables={**facts, "instance": instance}).template(trust_as_template(source))


def moving(running, **given):
    """The instances the role stops before any start; running: {index: (gpu, fraction)} as they run now."""
    present = {
        "instances": [{"index": n, "share": {"gpu": g, "mem_fraction_static": f}} for n, (g, f) in running.items()]
    }
    return services_moving(present, decided(**given)["_sglang_services_plan"])


def restarts(changed_paths=(), drop_ins=None, started=(), stale=(), check_mode=False, **given):
    """restart_plan's answer (restart, canary, batches); drop_ins: the instances a removed drop-in applied to."""
    facts = decided(**given)
    plan = facts["_sglang_services_plan"]
    # configure.yml's note (services_changed): the unit or a declared drop-in of it changed
    unit_changed = services_changed({"changed_paths": list(changed_paths)}, [UNIT, *plan["drop_in_paths"]])
    return restart_plan(
        plan,
        files={"changed_paths": list(changed_paths)},
        present={"drop_in_instances": list(drop_ins or [])},
        drop_ins={"changed": drop_ins is not None},
        units={"stale_env": list(stale)},
        start={"results": [{"item": i, "changed": True} for i in started]},
        first={"changed": False},
        unit_changed=unit_changed,
        config_dir=template(facts, "{{ sglang_services_config_dir }}"),
        previous_stack=template(facts, "{{ ansible_local.gpulxc_services.stack | default('') }}"),
        stack=template(facts, "{{ _sglang_services_stack }}"),
        check_mode=check_mode,
        batch=template(facts, "{{ sglang_services_restart_batch }}"),
    )
