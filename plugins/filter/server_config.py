# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: server_config_errors
short_description: What SGLang's C(--config) merger and parser would refuse in an instance's configuration
version_added: 0.2.0
description:
  - Checks the keys and values an instance's C(--config) file would hold against the release's flag table (the
    stack profile's C(flags), generated from the real parser), by the rules of sglang 0.5.12's config merger
    (C(ConfigArgumentMerger)) and its C(argparse) parser, so that the role refuses them before anything changes
    instead of a server failing at start.
  - "The merger writes each key as C(--<key>) exactly as it is, so a key must be a flag's full long name without
    the leading C(--): an underscore spelling (C(mem_fraction_static)) and a unique prefix (C(mem-frac)) are
    refused, an unknown key with the close names. A flag whose action is neither C(store) nor C(store_true)
    (C(BooleanOptionalAction), the only C(--no-) flags, and the deprecated switches) cannot be set from a config
    file. A C(store_true) flag takes V(true) or V(false); any other a value of its type (V(int), V(float) - an
    int is accepted -, V(human_readable_int), JSON for V(loads) and V(json_list_type), a string; a boolean or a
    mapping is no value of it) within its choices; a list only where the flag takes several values (C(nargs)
    V(+) or V(*)), each item checked as a value; a value starting with C(-) other than a negative number is
    refused, as the parser would take it for a flag."
  - Returns one message per refused key, naming the variable to fix and the fix; an empty list when
    everything passes. The values of C(api-key), C(admin-api-key) and C(ssl-keyfile-password) are never shown.
author:
  - gpulxc.sglang developers (@gpulxc)
options:
  _input:
    description:
      - The settings the role writes itself, config key to value; a V(null) value is left out of the file (the
        server's default) and not checked.
    type: dict
    required: true
  flags:
    description: The flag table, the stack profile's C(flags) (C(--name) to C(names), C(action), C(type), C(nargs),
      C(choices)).
    type: dict
    required: true
  sources:
    description:
      - Config key to the variable it comes from, for every key the role writes itself (also those not in
        O(_input), such as an instance's port); the messages name these variables.
      - A key of O(_input) not listed here is named by the key itself.
    type: dict
    default: {}
  extra:
    description: More flags, config key to value (V(sglang_services_extra_flags)); one that sets a flag the role
      writes itself (O(sources), an alias or an underscore spelling of it too) is refused, naming the variable to
      set instead.
    type: dict
    default: {}
  extra_name:
    description: The variable O(extra) comes from, for the messages (C(<extra_name>['<key>'])).
    type: str
    default: sglang_services_extra_flags
"""

EXAMPLES = r"""
- name: An underscore key, a value the parser would take for a flag and a flag the role sets itself
  ansible.builtin.debug:
    msg: >-
      {{ {'context-length': 8192} | gpulxc.sglang.server_config_errors(_profile.flags,
           {'context-length': 'sglang_services_context_length', 'port': 'sglang_services_port_base'},
           {'cuda_graph_max_bs': 16, 'chat-template': '-x', 'port': 40000}) }}
  vars:
    _profile: "{{ lookup('gpulxc.sglang.stack_profile', 'sglang-0.5.12', flags=true) }}"
  # ["sglang_services_extra_flags['cuda_graph_max_bs']: sglang's config merger writes the key as it is
  #   (--cuda_graph_max_bs), which its parser does not know: write it cuda-graph-max-bs.", ...]
"""

RETURN = r"""
_value:
  description: One message per refused key.
  type: list
  elements: str
"""

import difflib
import json
import re

from ansible.errors import AnsibleFilterError

# argparse's _negative_number_matcher: such a string is a value, any other one starting with '-' an option
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
SECRETS = {"api-key", "admin-api-key", "ssl-keyfile-password"}
TYPE_NAMES = {
    "int": "an integer",
    "float": "a number",
    "human_readable_int": "an integer (or one with a k/K/m/M suffix, such as 8k)",
    "loads": "JSON (a string holding it)",
    "json_list_type": "JSON (a string holding it)",
}


def _human_readable_int(text):
    if text and text[-1] in "kKmM":
        return int(float(text[:-1]) * {"k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6}[text[-1]])
    return int(text)


# the parser's type functions (sglang/srt/server_args.py), applied to the string the merger passes
CONVERT = {
    "int": int,
    "float": float,
    "human_readable_int": _human_readable_int,
    "loads": json.loads,
    "json_list_type": json.loads,
}


def _shape_problem(kind, value, shown):
    """Why a value of this Python type is no value of the flag's type, or None."""
    wanted = TYPE_NAMES.get(kind, "a string")
    if isinstance(value, bool):
        return f"true/false is not {wanted}" + ("" if kind in TYPE_NAMES else " (quote it to mean the string)")
    if isinstance(value, (dict, list)) or value is None:
        shape = "a mapping" if isinstance(value, dict) else "a list" if isinstance(value, list) else "null"
        json_hint = " (give the JSON as a string)" if kind in ("loads", "json_list_type") else ""
        return f"{shape} is not {wanted}{json_hint}"
    if kind in ("int", "human_readable_int") and isinstance(value, float):
        return f"{shown(value)} is not {wanted}"
    return None


def _value_problem(entry, value, secret=False):
    """Why the parser would refuse `value` (one value, as the merger passes it: str(value)) for the flag, or None."""
    shown = (lambda _: "the value") if secret else repr
    kind = entry.get("type", "str")
    problem = _shape_problem(kind, value, shown)
    text = str(value)
    if not problem and text.startswith("-") and not NEGATIVE_NUMBER.match(text):
        problem = (
            "a value starting with '-' that is not a negative number: sglang's parser would take it for a flag"
            ' ("expected one argument"), whatever the quoting: give one that does not start with it'
        )
    converted = text
    if not problem and kind in CONVERT:
        try:
            converted = CONVERT[kind](text)
        except (ValueError, TypeError):
            problem = f"{shown(text)} is not {TYPE_NAMES[kind]}"
    choices = entry.get("choices")
    if not problem and choices and converted not in choices and text not in [str(choice) for choice in choices]:
        problem = f"{shown(text)} is not one of its choices ({', '.join(str(choice) for choice in choices)})"
    return problem


def _problem(key, entry, value, secret=False):
    """Why the merger or the parser would refuse `key: value` for the flag, or None."""
    action = entry["action"]
    if action not in ("store", "store_true"):
        return (
            f"--{key} ({action}) cannot be set from a config file: sglang's config merger refuses any flag whose"
            " action is not store or store_true (Unsupported config option); remove it"
        )
    if action == "store_true":
        shown = "the value" if secret else repr(value)
        return None if isinstance(value, bool) else f"--{key} is a switch: give true or false, not {shown}"
    if not isinstance(value, list):
        problem = _value_problem(entry, value, secret)
        return f"--{key}: {problem}" if problem else None
    if value and str(entry.get("nargs")) not in ("+", "*"):  # the merger leaves an empty list out
        return f"--{key} takes one value, not a list"
    problems = [problem for problem in (_value_problem(entry, item, secret) for item in value) if problem]
    return f"--{key}: an item of the list: {problems[0]}" if problems else None


def _key_problem(key, dashed, entries):
    """Why the key is not a flag's exact long name, or None."""
    if dashed == "config":
        return "the config file cannot name another one (--config): remove it"
    if key in entries:
        return None
    if dashed in entries:
        return (
            f"sglang's config merger writes the key as it is (--{key}), which its parser does not know: write it"
            f" {dashed}"
        )
    starts = sorted(name for name in entries if name.startswith(dashed))
    if len(starts) == 1:
        return f"{key} is only the start of a flag's name: write it in full, {starts[0]}"
    close = difflib.get_close_matches(dashed, list(entries), n=3, cutoff=0.6)
    return f"{key} is not a flag of sglang's server" + (f" (did you mean {' or '.join(close)}?)" if close else "")


def server_config_errors(settings, flags, sources=None, extra=None, extra_name="sglang_services_extra_flags"):
    for name, given in (("_input", settings), ("flags", flags), ("sources", sources), ("extra", extra)):
        if given is not None and not isinstance(given, dict):
            raise AnsibleFilterError(f"server_config_errors: {name} must be a mapping, got {given!r}")
    sources, extra = sources or {}, extra or {}
    if not flags:
        return ["the stack profile has no flag table (flags): the servers' settings cannot be checked."]
    entries = {}  # every long name without its dashes -> (its flag, the entry)
    for flag, entry in flags.items():
        for name in entry["names"]:
            entries[name[2:]] = (flag, entry)
    # the flags the role writes itself -> their variable
    owned = {entries[key][0]: variable for key, variable in sources.items() if key in entries}

    def check(key, value, where, own):
        if not isinstance(key, str):
            return f"{where}: a key must be a flag's name, not {key!r}."
        dashed = key.replace("_", "-")
        found = entries.get(key) or entries.get(dashed)
        if not own and found and found[0] in owned:
            return f"{where}: sets {found[0]}, which the role writes itself from {owned[found[0]]}: set that instead."
        problem = _key_problem(key, dashed, entries) or _problem(key, found[1], value, found[0][2:] in SECRETS)
        return f"{where}: {problem}." if problem else None

    # a setting of the role's own that is null is left out (the server's default)
    errors = [check(key, value, sources.get(key, key), True) for key, value in settings.items() if value is not None]
    errors += [check(key, value, f"{extra_name}[{key!r}]", False) for key, value in extra.items()]
    return [error for error in errors if error]


class FilterModule:
    def filters(self):
        return {"server_config_errors": server_config_errors}
