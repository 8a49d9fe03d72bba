# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A plugin's option definitions, registered when the plugin is imported, parsed with libyaml's C loader.

ansible-core reads a plugin's options from its DOCUMENTATION with its own tag-keeping YAML loader in each
process that loads the plugin. It preloads its own connection plugins in the controller before it forks the
task workers, not a collection's, so every worker of a task on a gpulxc.sglang.pct_ssh host parses the
plugin's 470 lines again (about 7 ms a task). The loader asks the configuration manager whether it has the
plugin's definitions before it parses; registered here first, it finds them and parses nothing. The
definitions are the same (a unit test compares them with what the loader makes).
"""

from __future__ import annotations

import yaml
from ansible import constants as C
from ansible.plugins.loader import fragment_loader
from ansible.utils.plugin_docs import add_fragments

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def option_definitions(documentation, path):
    """The options of `documentation` (a plugin's DOCUMENTATION) with its documentation fragments merged in."""
    doc = yaml.load(documentation, Loader=_LOADER)  # a safe loader: libyaml's, or the pure one
    add_fragments(doc, path, fragment_loader=fragment_loader, is_module=False)
    return doc.get("options") or {}


def register(plugin_type, python_module_name, documentation, path):
    """Register the options of the plugin at `path` (the loader keys them by its Python module name)."""
    if not C.config.has_configuration_definition(plugin_type, python_module_name):
        C.config.initialize_plugin_configuration_definitions(
            plugin_type, python_module_name, option_definitions(documentation, path)
        )
