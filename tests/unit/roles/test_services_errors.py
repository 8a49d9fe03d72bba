"""Input role sglang_services refuses before anything changes, naming the variable and the fix, and input it takes:
the cases (test_services_errors.yaml) through gpulxc.sglang.services_plan."""

from pathlib import Path

import pytest
import yaml
from services import errors

CASES = yaml.safe_load((Path(__file__).with_suffix(".yaml")).read_text())


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_the_input_is_refused_naming_its_variable_or_taken(case):
    found = errors(**case["vars"])
    if case.get("accepted"):
        assert found == []
    elif "label" in case:  # a label name Prometheus or the server refuses: the one error
        assert len(found) == 1 and found[0].startswith(f"sglang_services_metric_labels: {case['label']}: each label")
    elif "message" in case:
        check = str.startswith if case.get("starts") else str.__contains__
        assert any(check(error, case["message"]) for error in found), found
    else:  # a declared drop-in that is no name and unit text
        drop_ins = [error for error in found if "sglang_services_unit_drop_ins" in error]
        assert drop_ins and "starting with a section such as [Service]" in drop_ins[0], found
    assert case.get("hidden", "\0") not in str(found)
