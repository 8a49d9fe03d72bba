"""Every role's meta/argument_specs.yml matches its defaults/main.yml (names, and literal defaults)."""

from pathlib import Path

import pytest
import yaml

ROLES = sorted(p for p in (Path(__file__).resolve().parents[2] / "roles").iterdir() if p.is_dir())


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_spec_and_defaults_name_the_same_variables(role):
    defaults = yaml.safe_load((role / "defaults/main.yml").read_text()) or {}
    options = yaml.safe_load((role / "meta/argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert sorted(defaults) == sorted(options)
    for name in defaults:
        assert name.startswith(role.name + "_"), f"{name} lacks the role prefix"


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_literal_defaults_are_documented_as_they_are(role):
    defaults = yaml.safe_load((role / "defaults/main.yml").read_text()) or {}
    options = yaml.safe_load((role / "meta/argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    for name, value in defaults.items():
        if isinstance(value, str) and "{{" in value:
            continue  # templated defaults are documented by the expression they default to
        if options[name].get("required"):
            continue
        assert options[name].get("default") == value, name
