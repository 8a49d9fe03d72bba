# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: stack_profile
short_description: Load and check an SGLang stack profile
version_added: 0.2.0
description:
  - Returns the profile of one SGLang release - its pins, supported Pythons, CUDA wheels and attention
    backends - from C(profiles/<name>.yml) of this collection, or from the absolute path of a file of your own
    with the same keys.
  - Checks its keys and types; an error names C(sglang_stack_profile), the variable that picks it.
author:
  - gpulxc.sglang developers (@gpulxc)
options:
  _terms:
    description: A profile name (V(sglang-0.5.12)) or the absolute path of a profile file.
    required: true
  flags:
    description:
      - Include the release's launch-flag table (C(flags), generated from its own parser). Left out by default -
        it is large, and a profile the roles keep as a fact is copied into every later task's variables.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Show the pins of the default profile
  ansible.builtin.debug:
    msg: "{{ lookup('gpulxc.sglang.stack_profile', 'sglang-0.5.12').packages }}"
"""

RETURN = r"""
_raw:
  description:
    - The profile (name, pythons, packages, cuda, attention_backends, fallback_attention_backend, and flag_names,
      the flags of the reference's launch command this release spells differently; empty where none is).
  type: list
  elements: dict
"""

import os

import yaml
from ansible.errors import AnsibleLookupError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.lookup import LookupBase

# <collection root>/plugins/lookup/stack_profile.py: the same from a checkout and an installed tarball
PROFILES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "profiles")


def shipped():
    return (
        sorted(name[:-4] for name in os.listdir(PROFILES) if name.endswith(".yml")) if os.path.isdir(PROFILES) else []
    )


def _versions(value):
    return isinstance(value, dict) and value and all(isinstance(v, (str, int, float)) for v in value.values())


def _cuda_problems(cuda):
    if not isinstance(cuda, dict):
        return ["cuda must be a mapping (family, runtime, runtime_override, nvrtc)"]
    errors = [] if _versions(cuda.get("family")) else ["cuda.family must map the compiler wheels to exact versions"]
    errors += [
        f"cuda.{key} must be an exact version"
        for key in ("runtime", "nvrtc")
        if not isinstance(cuda.get(key), (str, int, float))
    ]
    if not isinstance(cuda.get("runtime_override"), bool):
        errors.append("cuda.runtime_override must be true or false")
    return errors


def problems(profile):
    """Every way the profile does not fit the schema, one message each."""
    if not isinstance(profile, dict):
        return ["it is not a mapping"]
    errors = []
    if not isinstance(profile.get("name"), str):
        errors.append("name must be a string")
    if not (isinstance(profile.get("pythons"), list) and profile["pythons"]):
        errors.append("pythons must be a list of X.Y versions")
    if not _versions(profile.get("packages")):
        errors.append("packages must map names to exact versions")
    errors += _cuda_problems(profile.get("cuda"))
    backends = profile.get("attention_backends")
    if not (isinstance(backends, dict) and all(isinstance(v, list) and v for v in backends.values())):
        errors.append("attention_backends must map compute capabilities (X.Y) to lists of backends")
    if not isinstance(profile.get("fallback_attention_backend"), str):
        errors.append("fallback_attention_backend must be a backend name")
    names = profile.get("flag_names", {})
    if not (isinstance(names, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in names.items())):
        errors.append("flag_names must map the reference's flag names to this release's")
    return errors


def load(term, flags=False):
    path = term if os.path.isabs(term) else os.path.join(PROFILES, f"{term}.yml")
    if not os.path.isfile(path):
        raise AnsibleLookupError(
            f"sglang_stack_profile: there is no profile '{term}'. This collection ships {shipped()}; or give the"
            " absolute path of a profile file of your own."
        )
    with open(path) as handle:
        try:
            profile = yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError as error:
            raise AnsibleLookupError(f"sglang_stack_profile: {path} is not YAML: {error}") from error
    errors = problems(profile)
    if errors:
        raise AnsibleLookupError(f"sglang_stack_profile: {path}: " + "; ".join(errors) + ".")
    # versions as strings: YAML reads 13.2 as a float
    profile["packages"] = {name: str(version) for name, version in profile["packages"].items()}
    profile["pythons"] = [str(python) for python in profile["pythons"]]
    cuda = profile["cuda"]
    cuda["family"] = {name: str(version) for name, version in cuda["family"].items()}
    cuda["runtime"], cuda["nvrtc"] = str(cuda["runtime"]), str(cuda["nvrtc"])
    profile.setdefault("flag_names", {})
    if not flags:
        profile.pop("flags", None)
    return profile


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        flags = boolean(kwargs.pop("flags", False), strict=True)
        if kwargs:
            raise AnsibleLookupError(f"stack_profile takes only the option flags, not {sorted(kwargs)}")
        return [load(str(term), flags) for term in terms]
