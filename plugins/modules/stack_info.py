#!/usr/bin/python
# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: stack_info
short_description: Read what a gpulxc.sglang run left in the container - the stack's versions, the model, the router
version_added: 0.2.0
description:
  - Reads the installed versions of the stack's packages from the C(*.dist-info) of the SGLang and router virtual
    environments (O(venv), O(router_venv)), as the C(importlib.metadata) of the container's Python sees them.
  - Reads the served model from the first instance's configuration (the lowest-numbered C(instance-N.yaml) in
    O(config_dir)) - C(served-model-name), else C(model-path).
  - Reads each instance's address, port and whether it demands a key from its configuration.
  - Reads where clients reach the router (its front, C(front/front.json) in O(router_dir), else the address in
    C(router-args.json)), its certificate's fingerprint, and whether it demands a
    client key (a key in C(tenant-api-keys)); never the key itself. A router bound to every address is reported
    at the container's first address (C(hostname -I)).
  - Changes nothing.
notes:
  - >-
    PyYAML is not part of the container's system Python (the module runs there), so the instance configuration is
    read as the flat C(key: value) file the role writes - one key a line, JSON or single-quoted strings unquoted,
    comments skipped - and, as C(yaml.safe_load) in SGLang's own parser does, the B(last) occurrence of a key wins.
author:
  - gpulxc.sglang developers (@gpulxc)
extends_documentation_fragment:
  - gpulxc.sglang.attributes
  - gpulxc.sglang.attributes.info_module
options:
  venv:
    description: The SGLang virtual environment (gpulxc.sglang.gpulxc's C(gpulxc_venv)).
    type: path
    default: /opt/sglang/venv
  router_venv:
    description: The router's virtual environment (C(gpulxc_router_venv)).
    type: path
    default: /opt/smg/venv
  router_dir:
    description: The router's configuration directory (C(gpulxc_router_dir)); no router when it holds no arguments.
    type: path
    default: /etc/smg
  config_dir:
    description: The instances' configuration directory (C(gpulxc_config_dir)).
    type: path
    default: /etc/sglang
  packages:
    description: The distributions reported, in this order (names compared in lower case, C(_) read as C(-)).
    type: list
    elements: str
    default: [sglang, torch, flashinfer-python, sglang-kernel, nvidia-cuda-nvcc, smg]
"""

EXAMPLES = r"""
- name: Read the stack's versions, the served model and the router's address
  gpulxc.sglang.stack_info:
    venv: "{{ ansible_local.gpulxc_stack.venv | default(omit) }}"
  register: stack

- name: Show them
  ansible.builtin.debug:
    msg: "{{ stack.stack }}; {{ stack.model }} at {{ stack.router.url if stack.router else 'no router' }}"
"""

RETURN = r"""
versions:
  description: The installed version of each package of O(packages) found in either virtual environment.
  returned: always
  type: dict
  sample: {sglang: 0.5.12, torch: 2.11.0, smg: 1.13.0}
stack:
  description: The versions as one line, in the order of O(packages).
  returned: always
  type: str
  sample: sglang 0.5.12, torch 2.11.0, smg 1.13.0
model:
  description: The first instance's C(served-model-name), else its C(model-path); null without a configuration.
  returned: always
  type: str
  sample: Qwen3.6-27B
config:
  description: The instance configuration the model was read from; null when there is none.
  returned: always
  type: str
  sample: /etc/sglang/instance-0.yaml
router:
  description: The router, null when O(router_dir) holds no C(router-args.json).
  returned: always
  type: dict
  contains:
    url: {description: Where clients reach it (its front)., type: str, sample: "https://10.0.0.5:8000"}
    keyed: {description: It demands a client key., type: bool, sample: true}
    host: {description: The address its front binds., type: str, sample: 0.0.0.0}
    metrics:
      description:
        - Where smg's own Prometheus listener is (plain HTTP, no key; the front serves it at C(/metrics) of its
          C(url)), null when its arguments name no port.
      type: dict
      sample: {host: 127.0.0.1, port: 29000}
    tls:
      description: The front's certificate (its path and SHA-256 fingerprint), null when it serves plain HTTP.
      type: dict
      sample: {certificate: /etc/smg/front/tls.crt, sha256: "3F:0A:...:9C"}
servers:
  description: Each instance's address, port and whether it demands a key (C(api-key) set; never the key), from its
    configuration in O(config_dir); an instance that names no host binds sglang's default V(127.0.0.1).
  returned: always
  type: list
  elements: dict
  sample: [{instance: 0, host: 127.0.0.1, port: 30000, keyed: false}]
"""

import glob
import hashlib
import json
import os
import re
import ssl

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpulxc.sglang.plugins.module_utils._dists import canonical, installed_versions

INSTANCE = re.compile(r"^instance-([0-9]+)\.yaml$")
EVERY_ADDRESS = ("0.0.0.0", "::", "")


def versions(venvs, wanted):
    sites = [s for venv in venvs for s in sorted(glob.glob(os.path.join(venv, "lib", "python3*", "site-packages")))]
    return installed_versions(sites, wanted)


def scalar(text):
    """A flat YAML value as the role writes it: a JSON (double-quoted) or single-quoted string, else plain."""
    text = text.strip()
    if text.startswith('"'):
        try:
            return json.loads(text)
        except ValueError:
            return text.strip('"')
    if len(text) > 1 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    return text.split(" #", 1)[0].strip()


def flat_yaml(text):
    """`key: value` lines; a later line of the same key replaces the earlier one, as in yaml.safe_load."""
    settings = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#") or ":" not in line or line[0].isspace():
            continue
        key, value = line.split(":", 1)
        settings[key.strip()] = scalar(value)
    return settings


def first_config(directory):
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    indexed = sorted((int(m.group(1)), name) for name in names if (m := INSTANCE.match(name)))
    return os.path.join(directory, indexed[0][1]) if indexed else None


def model(path):
    if path is None:
        return None
    try:
        with open(path) as handle:
            settings = flat_yaml(handle.read())
    except OSError:
        return None
    return settings.get("served-model-name") or settings.get("model-path") or None


def servers(directory):
    """Per instance configuration: the address it binds (sglang 0.5.12's default 127.0.0.1 when the file names
    none), its port and whether it demands a key (never the key)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = []
    for number, name in sorted((int(m.group(1)), name) for name in names if (m := INSTANCE.match(name))):
        try:
            with open(os.path.join(directory, name)) as handle:
                settings = flat_yaml(handle.read())
        except OSError:
            continue
        port = settings.get("port", "30000")
        port = int(port) if port.isdigit() else port
        found.append(
            {
                "instance": number,
                "host": settings.get("host") or "127.0.0.1",
                "port": port,
                "keyed": bool(settings.get("api-key")),
            }
        )
    return found


def fingerprint(path):
    """The SHA-256 fingerprint of a PEM certificate (its first), as openssl prints it; None without one."""
    try:
        with open(path) as handle:
            der = ssl.PEM_cert_to_DER_cert(handle.read())
    except (OSError, ValueError):
        return None
    digest = hashlib.sha256(der).hexdigest().upper()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


def router(module, directory):
    try:
        with open(os.path.join(directory, "router-args.json")) as handle:
            args = json.load(handle)
    except (OSError, ValueError):
        return None
    named = ("--host", "--port", "--prometheus-host", "--prometheus-port")
    option = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i] in named}
    # clients reach the front (front/front.json); a router without one is reached where smg binds
    try:
        with open(os.path.join(directory, "front", "front.json")) as handle:
            front = json.load(handle)
    except (OSError, ValueError):
        front = {"host": option.get("--host", "0.0.0.0"), "port": option.get("--port", "30000"), "tls": False}
    host = bound = str(front["host"])
    if host in EVERY_ADDRESS:
        rc, out, _err = module.run_command([module.get_bin_path("hostname", required=True), "-I"])
        addresses = out.split() if rc == 0 else []
        host = addresses[0] if addresses else host
    if ":" in host:
        host = "[%s]" % host
    try:
        with open(os.path.join(directory, "tenant-api-keys")) as handle:
            keyed = any(line.strip() and not line.startswith("#") for line in handle)
    except OSError:
        keyed = False
    metrics = None
    if "--prometheus-port" in option:
        metrics = {"host": option.get("--prometheus-host", "0.0.0.0"), "port": int(option["--prometheus-port"])}
    tls = None
    if front.get("tls"):
        certificate = os.path.join(directory, "front", "tls.crt")
        tls = {"certificate": certificate, "sha256": fingerprint(certificate)}
    scheme = "https" if tls else "http"
    return {"url": f"{scheme}://{host}:{front['port']}", "keyed": keyed, "host": bound, "metrics": metrics, "tls": tls}


def main():
    module = AnsibleModule(
        argument_spec={
            "venv": {"type": "path", "default": "/opt/sglang/venv"},
            "router_venv": {"type": "path", "default": "/opt/smg/venv"},
            "router_dir": {"type": "path", "default": "/etc/smg"},
            "config_dir": {"type": "path", "default": "/etc/sglang"},
            "packages": {
                "type": "list",
                "elements": "str",
                "default": ["sglang", "torch", "flashinfer-python", "sglang-kernel", "nvidia-cuda-nvcc", "smg"],
            },
        },
        supports_check_mode=True,
    )
    params = module.params
    wanted = [canonical(name) for name in params["packages"]]
    found = versions([params["venv"], params["router_venv"]], wanted)
    config = first_config(params["config_dir"])
    module.exit_json(
        changed=False,
        versions=found,
        stack=", ".join(f"{name} {found[name]}" for name in wanted if name in found),
        model=model(config),
        config=config,
        router=router(module, params["router_dir"]),
        servers=servers(params["config_dir"]),
    )


if __name__ == "__main__":
    main()
