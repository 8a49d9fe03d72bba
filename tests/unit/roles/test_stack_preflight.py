"""sglang_stack's checks before anything changes (tasks/preflight.yml templated as Ansible does): each whole-number
setting is refused naming itself, for every class of bad value; the defaults pass."""

from pathlib import Path

import pytest
import yaml
from ansible.template import Templar, trust_as_template
from conftest import trusted

ROLE = Path(__file__).resolve().parents[3] / "roles/sglang_stack"


def errors(**extra):
    defaults = yaml.safe_load((ROLE / "defaults/main.yml").read_text())
    (check,) = [t for t in yaml.safe_load((ROLE / "tasks/preflight.yml").read_text())
                if t.get("name") == "Check the profile supports the Python the venv is made from"]  # fmt: skip
    variables = {**trusted(defaults), "gpulxc_venv": "/opt/sglang/venv", "gpulxc_stack_dir": "/etc/sglang/stack",
                 "sglang_stack_profile_data": {"pythons": ["3.11"]},
                 "uv_venv_container_result": {"python": {"version": "3.11"}}, **extra}  # fmt: skip
    return Templar(variables={**variables, **trusted(check["vars"])}).template(trust_as_template("{{ _errors }}"))


def test_the_defaults_pass():
    assert errors() == []


@pytest.mark.parametrize("value", [0, -1, "two", 1.5, ""])
@pytest.mark.parametrize(
    ("variable", "message"),
    [
        ("sglang_stack_keep_stacks", "keep at least 1 stack"),
        ("sglang_stack_install_timeout", "give the seconds the install may take"),
        ("sglang_stack_progress_interval", "give the seconds between two lines of progress"),
    ],
)
def test_a_bad_whole_number_is_named(variable, message, value):
    found = errors(**{variable: value})
    assert len(found) == 1 and found[0].startswith(f"{variable} is {value}: {message}"), found


def test_keeping_one_stack_or_many_is_accepted():
    assert errors(sglang_stack_keep_stacks=1) == [] and errors(sglang_stack_keep_stacks=5) == []
