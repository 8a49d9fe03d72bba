"""Unit tests load the collection from the checkout's collection path (made by tools/bootstrap)."""

from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.plugins.loader import init_plugin_loader
from ansible.template import trust_as_template

REPO = Path(__file__).resolve().parents[2]
init_plugin_loader([str(REPO / ".ansible/collections")])


def pytest_configure(config):
    # tools/test runs the tests marked timed before the lab and the rest beside it at nice 19, where a busy lab
    # leaves them seconds without a CPU: a fake server answering late, a thread not joined in time
    config.addinivalue_line("markers", "timed: its waits, threads or fake servers time what it tests")


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


def load_standin(directory, profile="sglang-0.5.12"):
    """The lab's port of sglang's config merger and parser (lab/standin/sglang/launch_server.py), fed the
    profile's flag table as the lab's wheel of that release is."""
    import importlib.util  # noqa: PLC0415 - only the tests that take this fixture load the stand-in
    import json  # noqa: PLC0415

    import yaml  # noqa: PLC0415

    table = directory / "flags.json"
    table.write_text(json.dumps(yaml.safe_load((REPO / f"profiles/{profile}.yml").read_text())["flags"]))
    spec = importlib.util.spec_from_file_location("standin_config_parser", REPO / "lab/standin/sglang/launch_server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.FLAGS = table
    return module


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    """The stand-in with sglang 0.5.12's flags."""
    return load_standin(tmp_path_factory.mktemp("standin"))
