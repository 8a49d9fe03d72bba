"""sglang_stack's checks before anything changes (gpulxc.sglang.stack_errors, which tasks/preflight.yml calls): each
whole-number setting is refused naming itself, for every class of bad value; the defaults pass."""

from pathlib import Path

import pytest
import yaml
from ansible_collections.gpulxc.sglang.plugins.filter.stack import stack_errors
from ansible_collections.gpulxc.sglang.plugins.lookup.stack_profile import load

DEFAULTS = yaml.safe_load((Path(__file__).resolve().parents[3] / "roles/sglang_stack/defaults/main.yml").read_text())
NUMBERS = ("sglang_stack_keep_stacks", "sglang_stack_install_timeout", "sglang_stack_progress_interval")


def errors(**extra):
    given = {name: extra.get(name, DEFAULTS[name]) for name in NUMBERS}
    return stack_errors(
        load("sglang-0.5.12"),
        "3.11",
        "interpreter (uv_venv_python)",
        keep_stacks=given["sglang_stack_keep_stacks"],
        install_timeout=given["sglang_stack_install_timeout"],
        progress_interval=given["sglang_stack_progress_interval"],
    )


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
