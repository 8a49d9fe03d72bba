"""Check mode writes no stack fact: sglang_stack notes the fact it would write (sglang_stack_predicted_fact) and
sglang_services reads that one instead - the stack its servers would start from, the attention backends of its
profile - so that check mode predicts the servers' restarts onto a new stack (tests/lab/test_fleet.py runs it)."""

from pathlib import Path

import yaml
from ansible.template import Templar, trust_as_template
from services import STACK, decided

STACK_ROLE = Path(__file__).resolve().parents[3] / "roles/sglang_stack"
VENV = "/opt/sglang/venv"
RUNNING = {**STACK, "venv": VENV, "stack": "/opt/sglang/stacks/1111111111111111"}
# the stack a run would switch to, of a profile whose backends for SM 12.0 differ
PREDICTED = {**STACK, "attention_backends": {"12.0": ["triton"]}, "venv": VENV,
             "stack": "/opt/sglang/stacks/2222222222222222"}  # fmt: skip


def read(**extra):
    """(the stack the servers start from, the attention backend chosen) as sglang_services decides them."""
    variables = decided(ansible_local={"gpulxc_stack": RUNNING}, **extra)
    stack = Templar(variables=variables).template(trust_as_template("{{ _sglang_services_stack }}"))
    return stack, variables["_sglang_services_plan"]["backend"]


def test_the_servers_start_from_the_stack_its_fact_names():
    assert read() == (RUNNING["stack"], "flashinfer")


def test_in_check_mode_from_the_stack_the_stack_role_would_switch_to():
    assert read(sglang_stack_predicted_fact=PREDICTED) == (PREDICTED["stack"], "triton")


def test_the_stack_role_notes_the_fact_it_would_write_only_in_check_mode():
    tasks = {t["name"]: t for t in yaml.safe_load((STACK_ROLE / "tasks/install.yml").read_text())}
    note = tasks["Note the stack check mode predicts, for sglang_services"]
    assert note["ansible.builtin.set_fact"] == {"sglang_stack_predicted_fact": "{{ _sglang_stack_fact }}"}
    assert note["when"] == "sglang_stack_fact_result is changed and ansible_check_mode"
    published = tasks["Publish the installed stack for the roles after this one (a local fact)"]
    assert published["gpulxc.sglang.file_set"]["files"][0]["content"] == "{{ _sglang_stack_fact | to_nice_json }}\n"
