"""Unit tests load the collection from the checkout's collection path (made by tools/bootstrap)."""

from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.plugins.loader import init_plugin_loader

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
