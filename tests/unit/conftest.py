"""Unit tests load the collection from the checkout's collection path (made by tools/bootstrap)."""

from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.plugins.loader import init_plugin_loader
from ansible.template import trust_as_template

REPO = Path(__file__).resolve().parents[2]
init_plugin_loader([str(REPO / ".ansible/collections")])


class ModuleExit(Exception):
    """exit_json was called; args[0] is the result."""


class ModuleFail(Exception):
    """fail_json was called; args[0] is the result."""


@pytest.fixture
def module_exits(monkeypatch):
    """Make a module's exit_json/fail_json raise ModuleExit/ModuleFail with the result."""

    def exit_json(self, **kwargs):
        raise ModuleExit(kwargs)

    def fail_json(self, **kwargs):
        raise ModuleFail(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    return ModuleExit, ModuleFail


def trusted(value):
    """A role file's strings marked as templates, as Ansible marks what it loads from the role."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {k: trusted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [trusted(v) for v in value]
    return value
