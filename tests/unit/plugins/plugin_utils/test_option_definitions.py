"""gpulxc.sglang's option definitions registered at a plugin's import: the same definitions ansible-core's loader
makes from the plugin's DOCUMENTATION (fragments merged), and the loader then parses nothing."""

import importlib
import sys

from ansible import constants as C
from ansible.plugins import loader as plugin_loader
from ansible.plugins.loader import connection_loader


def test_pct_ssh_registers_at_import_what_the_loader_would_parse(monkeypatch):
    module = sys.modules[connection_loader.get("gpulxc.sglang.pct_ssh", class_only=True).__module__]
    definitions = C.config._plugins["connection"]
    parses = []
    real_load = plugin_loader.yaml.load

    def load(stream, Loader):
        if Loader is plugin_loader.AnsibleLoader and "name: pct_ssh" in stream:  # the loader parsing DOCUMENTATION
            parses.append(stream)
        return real_load(stream, Loader=Loader)

    monkeypatch.setattr(plugin_loader.yaml, "load", load)

    monkeypatch.delitem(definitions, module.__name__)
    connection_loader._load_config_defs(module.__name__, module, module.__file__)
    assert parses  # without a registration, the loader parses DOCUMENTATION with its tag-keeping loader
    loaders = definitions.pop(module.__name__)
    parses.clear()

    importlib.reload(module)  # what a worker process does: import the plugin, then ask the loader
    connection_loader._load_config_defs(module.__name__, module, module.__file__)
    assert parses == []  # registered at import: the loader's own parse is skipped
    assert definitions[module.__name__] == loaders
    assert "vmid" in loaders and "pipelining" in loaders  # its own option and the connection_pipelining fragment's
