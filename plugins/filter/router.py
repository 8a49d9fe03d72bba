# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan of role gpulxc.sglang.sglang_router (documented in router_plan.yml next to this file): its settings and
what the services published, in; the workers, ports, front and files the tasks apply, and every refusal, out.
The role's preflight is one call of it and one assert on its errors."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.gpulxc.sglang.plugins.filter.worker_urls import worker_urls
from ansible_collections.gpulxc.sglang.plugins.test.bind_address import bind_address
from ansible_collections.gpulxc.sglang.plugins.test.loopback import loopback
from ansible_collections.gpulxc.sglang.plugins.test.plain_text import plain_text

# What the plan reads: the role's variables of those names (preflight.yml passes each).
SETTINGS = (
    "sglang_router_version",
    "sglang_router_venv",
    "sglang_router_dir",
    "sglang_router_host",
    "sglang_router_port",
    "sglang_router_smg_port",
    "sglang_router_prometheus_host",
    "sglang_router_prometheus_port",
    "sglang_router_tls_certificate",
    "sglang_router_tls_private_key",
    "sglang_router_tls_names",
    "sglang_router_worker_urls",
    "sglang_router_services",
    "sglang_router_fleet_containers",
    "sglang_router_worker_startup_check_interval",
    "sglang_router_shutdown_grace_period",
    "sglang_router_api_keys",
    "sglang_router_worker_api_key",
    "sglang_router_worker_api_key_allow_plain_text",
)
PORTS = ("sglang_router_port", "sglang_router_smg_port", "sglang_router_prometheus_port")
WILDCARDS = ("0.0.0.0", "::")


def _int(value):
    """Jinja's int filter, as the checks always read a number: an integer, a float cut, anything else 0."""
    try:
        return int(value, 10) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return 0


def _unique(values):
    """Ansible's unique filter: the first of each, strings compared without case (Jinja's unique)."""
    try:
        seen, found = set(), []
        for value in values:
            key = value.lower() if isinstance(value, str) else value
            if key not in seen:
                seen.add(key)
                found.append(value)
        return found
    except TypeError:  # an unhashable value: Ansible's own unique, by equality
        return [value for n, value in enumerate(values) if value not in values[:n]]


def _field(entry, name, default=""):
    return entry.get(name, default) if isinstance(entry, Mapping) else default


def _key_errors(keys):
    """The client keys' messages: written in plain text; unusable (by entry number: no key is ever shown), since smg
    splits TENANT:KEY at the first colon and trims both parts; a tenant or a key given twice."""
    unusable = []
    for n, entry in enumerate(keys):
        tenant, key = str(_field(entry, "tenant") or ""), str(_field(entry, "key") or "")
        if not tenant or re.search(r"[:\s]", tenant) or not key or key != key.strip():
            unusable.append(str(n))
    tenants = [str(_field(entry, "tenant")) for entry in keys]
    repeated = list(dict.fromkeys(t for n, t in enumerate(tenants) if t in tenants[:n]))  # at its second time
    given = [_field(entry, "key") for entry in keys]
    plain = (
        "sglang_router_api_keys holds a key written in plain text (an inventory, a vars file, a playbook or the"
        " command line): keep the keys in Ansible Vault, a lookup or an extra-vars file passed with -e @file."
    )
    return plain if any(plain_text(key) for key in given) else "", [
        "sglang_router_api_keys entries %s (counted from 0): each needs a tenant without a colon or a space and a key"
        " without spaces around it (smg reads TENANT:KEY split at the first colon, each part trimmed)."
        % ", ".join(unusable)
        if unusable
        else "",
        "sglang_router_api_keys names a tenant more than once: %s." % ", ".join(repeated) if repeated else "",
        "sglang_router_api_keys holds the same key twice: give each tenant its own."
        if len(_unique(given)) < len(keys)
        else "",
    ]


def _port_errors(ports, instance_ports):
    errors = []
    for name, port in ports.items():
        if port < 1 or port > 65535:
            errors.append("%s %d is not a port (1 to 65535)." % (name, port))
        elif port in instance_ports:
            errors.append(
                "%s %d is the port of an SGLang instance (published by sglang_services): pick another." % (name, port)
            )
    return errors


def _same_ports(ports):
    """One message per port two or three of the router's listeners share (by port, smallest first)."""
    errors = []
    for port in sorted(set(ports.values())):
        names = [name for name, value in ports.items() if value == port]
        if len(names) > 1:
            errors.append(
                "%s %s %d: each needs its own port."
                % (" and ".join(names), "are both" if len(names) == 2 else "are all", port)
            )
    return errors


def _tls_errors(s):
    certificate, key = s["sglang_router_tls_certificate"], s["sglang_router_tls_private_key"]
    names = [str(name) for name in s["sglang_router_tls_names"]]
    bad_names = [n for n in names if not bind_address(n)] + [n for n in names if n in (*WILDCARDS, "")]
    return [
        "sglang_router_tls_certificate and sglang_router_tls_private_key go together: set both, or neither (the role"
        " makes a certificate then)."
        if bool(len(certificate)) != bool(len(key))
        else "",
        "sglang_router_tls_certificate is not a PEM certificate (-----BEGIN CERTIFICATE-----)."
        if len(certificate) and "-----BEGIN CERTIFICATE-----" not in str(certificate)
        else "",
        "sglang_router_tls_private_key is not a PEM private key (-----BEGIN ... PRIVATE KEY-----)."
        if len(key) and not re.search(r"-----BEGIN [A-Z ]*PRIVATE KEY-----", str(key))
        else "",
        "sglang_router_tls_private_key is written in plain text (an inventory, a vars file, a playbook or the command"
        " line): keep it in Ansible Vault, a lookup (of a root-only file on the controller, for example) or an"
        " extra-vars file passed with -e @file."
        if len(key) and plain_text(key)
        else "",
        "sglang_router_tls_names: %s is not a host name or an IP address (each is one name the made certificate"
        " holds)." % ", ".join(bad_names)
        if bad_names
        else "",
    ]


def router_plan(settings, fleet_instances=(), inventory=(), inventory_hostname=""):
    """The router's plan from its settings (SETTINGS), the instances of the containers it fronts besides its own
    (fleet_instances), the inventory's hosts and this host's name."""
    if not isinstance(settings, Mapping):
        raise AnsibleFilterError(
            "router_plan expects a mapping of the role's variables, got %s" % type(settings).__name__
        )
    wrong = sorted(set(SETTINGS) ^ set(settings))
    if wrong:
        raise AnsibleFilterError("router_plan: settings missing or unknown: %s" % ", ".join(wrong))
    s = settings
    host, prometheus_host = s["sglang_router_host"], s["sglang_router_prometheus_host"]
    services, api_keys, fleet = s["sglang_router_services"], list(s["sglang_router_api_keys"] or []), []
    instances = list(_field(services, "instances", None) or [])
    # the workers as smg registers them, each in the one form the services role drains it by (worker_urls)
    instance_urls = [_field(i, "url", None) for i in [*instances, *(fleet_instances or [])]]
    given = worker_urls(s["sglang_router_worker_urls"], instance_urls)
    workers = given["urls"] if s["sglang_router_worker_urls"] else instance_urls
    if s["sglang_router_fleet_containers"]:
        named = [str(c) for c in s["sglang_router_fleet_containers"]]
        fleet = [c for c in named if c not in inventory] + [c for c in named if c == inventory_hostname]
    ports = {name: _int(s[name]) for name in PORTS}
    worker_key = s["sglang_router_worker_api_key"]
    plain_keys, key_errors = _key_errors(api_keys)
    errors = [
        *_port_errors(ports, [_field(i, "port", None) for i in instances]),
        *given["errors"],
        *[
            "%s %s is neither an IP address nor a host name." % (name, str(s[name]))
            for name in ("sglang_router_host", "sglang_router_prometheus_host")
            if not bind_address(s[name])
        ],
        "sglang_router_fleet_containers: %s is no other host of the inventory (each is a container whose published"
        " instances this router fronts)." % ", ".join(fleet)
        if fleet
        else "",
        "no worker: set sglang_router_worker_urls or run sglang_services first."
        if not (s["sglang_router_worker_urls"] or _field(services, "instances", ["not read yet"]))
        else "",
        "sglang_router_host %s is reachable from other machines: set sglang_router_api_keys (docs/secrets.md says"
        " from where), or bind 127.0.0.1." % str(host)
        if not (loopback(host) or api_keys)
        else "",
        plain_keys,
        "sglang_router_worker_api_key is written in plain text (an inventory, a vars file, a playbook or the command"
        " line): keep it in Ansible Vault, a lookup or an extra-vars file passed with -e @file (playbooks/router.yml"
        " passes the key of the servers by default), or set sglang_router_worker_api_key_allow_plain_text to true to"
        " accept it."
        if len(worker_key or "")
        and plain_text(worker_key)
        and not boolean(s["sglang_router_worker_api_key_allow_plain_text"], strict=False)
        else "",
        *key_errors,
        "sglang_router_worker_startup_check_interval is %s; it must be 1 or more (seconds between probes of a"
        " starting worker)." % str(s["sglang_router_worker_startup_check_interval"])
        if _int(s["sglang_router_worker_startup_check_interval"]) < 1
        else "",
        "sglang_router_shutdown_grace_period is %s; it must be 1 or more (seconds smg serves what runs after"
        " SIGTERM)." % str(s["sglang_router_shutdown_grace_period"])
        if _int(s["sglang_router_shutdown_grace_period"]) < 1
        else "",
        *_same_ports(ports),
        "sglang_router_prometheus_host %s is reachable from other machines, and the metrics listener of smg has no"
        " key or TLS: keep it on 127.0.0.1; the front serves it at /metrics on sglang_router_port, with a client key."
        % str(prometheus_host)
        if not loopback(prometheus_host)
        else "",
        *_tls_errors(s),
    ]
    tls = not loopback(host)
    front_dir = "%s/front" % s["sglang_router_dir"]
    # where clients reach the router (front/front.json, for gpulxc.sglang.stack_info; key order kept for the file)
    front = {
        "host": host,
        "port": ports["sglang_router_port"],
        "tls": tls,
        # whether every route but /liveness and /readiness needs a client key (a Prometheus then sends one)
        "keyed": len(api_keys) > 0,
        # what a Prometheus scrapes there: smg's metrics, and each worker's (the Nth: /metrics/workers/N)
        "metrics": {"router": "/metrics", "workers": {url: "/metrics/workers/%d" % n for n, url in enumerate(workers)}},
    }
    return {
        "errors": [error for error in errors if error],
        "workers": workers,
        "tls": tls,
        # how the role reaches its own front
        "scheme": "https" if tls else "http",
        # the names the certificate the role makes holds: loopback, a specific bind address, the operator's
        "tls_names": _unique(
            ["127.0.0.1", "::1", *([] if host in WILDCARDS else [host]), *s["sglang_router_tls_names"]]
        ),
        "front_dir": front_dir,
        "front": front,
        # what the router publishes (ansible_local.gpulxc_router): its venv and directory, its front
        "fact": {"venv": s["sglang_router_venv"], "dir": s["sglang_router_dir"], "front": front},
        # smg at its pin: the router venv's one resolve (and the wheelhouse's router lock)
        "requirements": ["smg==%s" % s["sglang_router_version"]],
        # what each unit reads: a change restarts that one
        "smg_files": [
            "/usr/local/lib/smg-launch.py",
            "%s/router-args.json" % s["sglang_router_dir"],
            "/etc/systemd/system/smg.service",
        ],
        "front_files": [
            "/usr/local/lib/smg-front-keys.py",
            "%s/nginx.conf" % front_dir,
            "/etc/systemd/system/smg-front.service",
        ],
    }


def _changed(result):
    return isinstance(result, Mapping) and bool(result.get("changed"))


def router_restarts(plan, *, files, smg=(), front=()):
    """Whether smg and whether the front restart: a file the unit reads changed (the plan's `smg_files`,
    `front_files`, among module file_set's `changed_paths`), or one of the results given for it changed."""
    changed = set((files or {}).get("changed_paths", []))
    return {
        "smg": bool(changed & set(plan["smg_files"])) or any(_changed(result) for result in smg),
        "front": bool(changed & set(plan["front_files"])) or any(_changed(result) for result in front),
    }


def router_front_repairs(lines, wheelhouse=""):
    """From the probe of the front's packages (`missing <package>`, `broken <package>` lines): those to install,
    those to install again, apt's commands for both, and where the packages must come from if apt fails."""
    missing = [line.split(" ")[-1] for line in lines if line.startswith("missing ")]
    broken = _unique([line.split(" ")[-1] for line in lines if line.startswith("broken ")])
    broken = [package for package in broken if package not in missing]
    flags = "-y -qq --no-install-recommends"
    commands = (
        (["apt-get update -qq"] if missing or broken else [])
        + ([f"apt-get install {flags} {' '.join(missing)}"] if missing else [])
        + ([f"apt-get install --reinstall {flags} {' '.join(broken)}"] if broken else [])
    )
    source = (
        "The container is air-gapped (uv_venv_wheelhouse): apt reaches only the sources its template configures."
        " Point them at a mirror the container reaches, or use a template that has nginx and openssl."
        if wheelhouse
        else "Check the container reaches its Debian mirror (apt sources; uv_venv_proxy does not apply to apt), or use"
        " a template that has nginx and openssl."
    )
    return {"missing": missing, "broken": broken, "commands": "\n".join(commands), "source": source}


class FilterModule:
    def filters(self):
        return {
            "router_plan": router_plan,
            "router_restarts": router_restarts,
            "router_front_repairs": router_front_repairs,
        }
