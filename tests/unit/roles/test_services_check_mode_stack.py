"""sglang_services reads sglang_stack's stack object (gpulxc_stack), which a check-mode run publishes as a real run
does - the stack its servers would start from, the attention backends of its profile - so that check mode predicts
the servers' restarts onto a new stack (tests/lab/test_fleet.py runs it); a run without sglang_stack reads the one
the container keeps (ansible_local.gpulxc_stack, through roles/gpulxc's defaults)."""

from ansible.template import Templar, trust_as_template
from services import STACK, decided

VENV = "/opt/sglang/venv"
RUNNING = {**STACK, "venv": VENV, "stack": "/opt/sglang/stacks/1111111111111111"}
# the stack a run would switch to, of a profile whose backends for SM 12.0 differ
PREDICTED = {
    **STACK,
    "attention_backends": {"12.0": ["triton"]},
    "venv": VENV,
    "stack": "/opt/sglang/stacks/2222222222222222",
}


def read(**extra):
    """(the stack the servers start from, the attention backend chosen) as sglang_services decides them."""
    variables = decided(ansible_local={"gpulxc_stack": RUNNING}, **extra)
    stack = Templar(variables=variables).template(trust_as_template("{{ _sglang_services_stack }}"))
    return stack, variables["_sglang_services_plan"]["backend"]


def test_the_servers_start_from_the_stack_its_fact_names():
    assert read() == (RUNNING["stack"], "flashinfer")


def test_in_check_mode_from_the_stack_the_stack_role_would_switch_to():
    assert read(gpulxc_stack=PREDICTED) == (PREDICTED["stack"], "triton")
