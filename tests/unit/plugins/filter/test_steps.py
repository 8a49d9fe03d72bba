"""The filters that turn a role's plan and its modules' results into the arguments of its steps
(plugins/filter/services_steps.py, router_restarts and router_front_repairs in router.py, uv_install.py,
stack_removal.py), as plain functions: the cases are in test_steps.yaml (the filter, its input, its arguments and
what it returns)."""

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.gpulxc.sglang.plugins.filter import router, services_steps, stack_removal, uv_install

FILTERS = {
    **services_steps.FilterModule().filters(),
    **router.FilterModule().filters(),
    **uv_install.FilterModule().filters(),
    **stack_removal.FilterModule().filters(),
}
CASES = yaml.safe_load(Path(__file__).with_suffix(".yaml").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case):
    found = FILTERS[case["filter"]](case["input"], *case.get("args", []), **case.get("kwargs", {}))
    expected = case["expected"]
    if isinstance(expected, dict) and isinstance(found, dict) and case.get("parts"):
        found = {key: found[key] for key in expected}
    assert found == expected


def test_every_new_filter_has_a_case():
    tested = {case["filter"] for case in CASES}
    assert sorted(set(FILTERS) - tested - {"router_plan"}) == []


def test_uv_install_refuses_a_role_it_does_not_know():
    with pytest.raises(AnsibleFilterError, match="sglang_stack, sglang_router"):
        uv_install.uv_install("", role="wheelhouse")
