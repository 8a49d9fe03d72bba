# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan of role gpulxc.sglang.sglang_monitoring (documented in monitoring_plan.yml and monitoring_files.yml
next to this file): its settings and what sglang_services and sglang_router published, in; the scrape job's name,
the files' paths, the file_sd targets and every refusal, out. The role's preflight is one call of it and one assert
on its errors; monitoring_files puts the rendered scrape job, the targets and the front's certificate together."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from numbers import Number

from ansible.errors import AnsibleFilterError
from ansible.plugins.filter.core import to_bool, to_nice_json

# What the plan reads: the role's variables of those names (preflight.yml passes each).
SETTINGS = (
    "sglang_monitoring_dir",
    "sglang_monitoring_host",
    "sglang_monitoring_address",
    "sglang_monitoring_scrape_interval",
    "sglang_monitoring_credentials_file",
    "sglang_monitoring_down_for",
    "sglang_monitoring_unhealthy_for",
    "sglang_monitoring_queue_threshold",
    "sglang_monitoring_queue_for",
    "sglang_monitoring_kv_cache_threshold",
    "sglang_monitoring_kv_cache_for",
    "sglang_monitoring_services",
    "sglang_monitoring_router",
)
# the settings Prometheus reads as durations, in the order the message names them
DURATIONS = (
    "sglang_monitoring_scrape_interval",
    "sglang_monitoring_down_for",
    "sglang_monitoring_unhealthy_for",
    "sglang_monitoring_queue_for",
    "sglang_monitoring_kv_cache_for",
)
DURATION = re.compile(r"^[0-9]+(ms|s|m|h|d|w|y)$")


def _text(value):
    """A value as a template writes it inside a message (ansible-core 2.19 writes None as nothing)."""
    return "" if value is None else str(value)


def _mapping(value):
    return value if isinstance(value, Mapping) else {}


def _errors(s, front, host):
    """One message per refused setting or missing fact, in the order the assert has always shown them."""
    directory, credentials = s["sglang_monitoring_dir"], s["sglang_monitoring_credentials_file"]
    queue, kv_cache = s["sglang_monitoring_queue_threshold"], s["sglang_monitoring_kv_cache_threshold"]
    services = _mapping(s["sglang_monitoring_services"])
    instances = services.get("instances") or []
    bad = [name for name in DURATIONS if not DURATION.match(_text(s[name]))]
    messages = [
        "sglang_monitoring_dir %s is not an absolute path: set the directory of the Prometheus configuration on"
        " %s (for example /etc/prometheus/gpulxc)." % (_text(directory), _text(s["sglang_monitoring_host"]))
        if not _text(directory).startswith("/") or "/../" in _text(directory) + "/"
        else "",
        "%s: a Prometheus duration, such as 30s, 1m or 2h." % ", ".join(bad) if bad else "",
        "sglang_monitoring_queue_threshold is %s; it must be 0 or more (requests waiting on one server)." % _text(queue)
        if not isinstance(queue, Number) or queue < 0
        else "",
        "sglang_monitoring_kv_cache_threshold is %s; it must be a fraction between 0 and 1." % _text(kv_cache)
        if not isinstance(kv_cache, Number) or not 0 < float(kv_cache) <= 1
        else "",
        "sglang_monitoring_address is empty: set where Prometheus reaches the container (a name or address)."
        if not _text(s["sglang_monitoring_address"] or "")
        else "",
        "sglang_monitoring_credentials_file %s is not an absolute path." % _text(credentials)
        if credentials and not _text(credentials).startswith("/")
        else "",
        "the front of %s requires a client key (sglang_router_api_keys): set sglang_monitoring_credentials_file"
        " to a file on %s that holds one." % (host, _text(s["sglang_monitoring_host"]))
        if to_bool(front.get("keyed", False)) and not credentials
        else "",
        "no servers on %s (ansible_local.gpulxc_services): run sglang_services first (site.yml does)." % host
        if not instances
        else "",
        "no router front on %s publishes its metrics (ansible_local.gpulxc_router.front): run sglang_router"
        " first (site.yml does)." % host
        if "metrics" not in front
        else "",
        "the servers of %s run with sglang_services_enable_metrics false: nothing to scrape." % host
        if instances and services.get("metric_labels") is None
        else "",
    ]
    return [message for message in messages if message]


def monitoring_plan(settings, inventory_hostname):
    """The monitoring's plan for the container inventory_hostname from the role's settings (SETTINGS)."""
    if not isinstance(settings, Mapping):
        raise AnsibleFilterError(
            "monitoring_plan expects a mapping of the role's variables, got %s" % type(settings).__name__
        )
    wrong = sorted(set(SETTINGS) ^ set(settings))
    if wrong:
        raise AnsibleFilterError("monitoring_plan: settings missing or unknown: %s" % ", ".join(wrong))
    s, host = settings, inventory_hostname
    # the container's front as sglang_router published it (where it listens, TLS, keys, each metrics path)
    front = _mapping(_mapping(s["sglang_monitoring_router"]).get("front"))
    services = _mapping(s["sglang_monitoring_services"])
    tls = to_bool(front.get("tls", False))
    directory, address = _text(s["sglang_monitoring_dir"]), _text(s["sglang_monitoring_address"])
    # host:port of the front, an IPv6 address in brackets
    endpoint = ("[%s]" % address if ":" in address else address) + ":" + _text(front.get("port", ""))
    # every target's labels: the servers' own metric labels (container, node, ...), so smg's series carry them too
    labels = {"container": host, **(services.get("metric_labels") or {}), "__scheme__": "https" if tls else "http"}
    metrics = _mapping(front.get("metrics"))
    workers = metrics.get("workers") or {}
    # file_sd: the router's metrics, then each server's through the front (its path there), labelled with its GPU
    targets = [
        {
            "targets": [endpoint],
            "labels": {
                **labels,
                "__metrics_path__": metrics.get("router"),
                "component": "router",
                "instance": host + "/router",
            },
        },
    ] + [
        {
            "targets": [endpoint],
            "labels": {
                **labels,
                "__metrics_path__": workers[server["url"]],
                "component": "server",
                "gpu": _text(server["gpu"]),
                "sglang_instance": server["name"],
                "instance": "%s/%s" % (host, server["name"]),
            },
        }
        for server in services.get("instances") or []
        if server["url"] in workers
    ]
    return {
        "errors": _errors(s, front, host),
        "front": front,
        "tls": tls,
        # one scrape job per container: each has its own front certificate (tls_config is the job's)
        "job": "gpulxc-sglang-" + host,
        "files": {
            "scrape": "%s/scrape/%s.yml" % (directory, host),
            "targets": "%s/targets/%s.json" % (directory, host),
            "cert": "%s/certs/%s.crt" % (directory, host),
            "rules": directory + "/rules/gpulxc-sglang.rules.yml",
            "dashboard": directory + "/dashboards/gpulxc-sglang.json",
        },
        "endpoint": endpoint,
        "targets": targets,
    }


def monitoring_files(plan, scrape, certificate=None):
    """The container's files for gpulxc.sglang.file_set: the scrape job (rendered), the targets, and with TLS the
    front's certificate (what ansible.builtin.slurp read of it)."""
    files = [
        {"path": plan["files"]["scrape"], "content": scrape, "mode": "0644"},
        {"path": plan["files"]["targets"], "content": to_nice_json(plan["targets"]) + "\n", "mode": "0644"},
    ]
    if plan["tls"]:
        content = base64.b64decode(_mapping(certificate)["content"]).decode("utf-8")
        files.append({"path": plan["files"]["cert"], "mode": "0644", "content": content})
    return files


class FilterModule:
    def filters(self):
        return {"monitoring_plan": monitoring_plan, "monitoring_files": monitoring_files}
