# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Role sglang_services' decisions (documented in services_plan.yml, services_moving.yml and restart_plan.yml next
to this file): the plan of the instances and its input errors, which instances move before any start, and which
restart and which goes first as the canary. The role's tasks only apply them."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.gpulxc.sglang.plugins.plugin_utils.jinja_values import jinja_float as _float
from ansible_collections.gpulxc.sglang.plugins.plugin_utils.jinja_values import jinja_int as _int
from ansible_collections.gpulxc.sglang.plugins.filter.net import loopback_host
from ansible_collections.gpulxc.sglang.plugins.filter.server_config import server_config_errors
from ansible_collections.gpulxc.sglang.plugins.test.bind_address import bind_address
from ansible_collections.gpulxc.sglang.plugins.test.loopback import loopback

PREFIX = "sglang_services_"
# every key the role writes itself -> its variable (a repeat in sglang_services_extra_flags is refused)
SOURCES = {
    "model-path": "sglang_services_model_path",
    "served-model-name": "sglang_services_served_model_name",
    "host": "sglang_services_host",
    "port": "sglang_services_port_base (or a port of sglang_services_instances)",
    "nccl-port": "sglang_services_nccl_port_base",
    "attention-backend": "sglang_services_attention_backend",
    "reasoning-parser": "sglang_services_reasoning_parser",
    "mem-fraction-static": (
        "sglang_services_mem_fraction_static (or a mem_fraction_static of sglang_services_instances)"
    ),
    "max-running-requests": "sglang_services_max_running_requests",
    "context-length": "sglang_services_context_length",
    "chunked-prefill-size": "sglang_services_chunked_prefill_size",
    "mamba-scheduler-strategy": "sglang_services_mamba_scheduler_strategy",
    "mamba-radix-cache-strategy": "sglang_services_mamba_scheduler_strategy",
    "mamba-ssm-dtype": "sglang_services_mamba_ssm_dtype",
    "trust-remote-code": "sglang_services_trust_remote_code",
    "enable-metrics": "sglang_services_enable_metrics",
    "extra-metric-labels": "sglang_services_metric_labels",
    "api-key": "sglang_services_api_key",
}
# the reference's config keys and the variable each comes from, in the order the file holds them
SETTINGS = {
    "model-path": "model_path",
    "served-model-name": "served_model_name",
    "host": "host",
    "attention-backend": None,  # the plan's choice
    "reasoning-parser": "reasoning_parser",
    "max-running-requests": "max_running_requests",
    "context-length": "context_length",
    "chunked-prefill-size": "chunked_prefill_size",
    "mamba-scheduler-strategy": "mamba_scheduler_strategy",
    "mamba-ssm-dtype": "mamba_ssm_dtype",
    "trust-remote-code": "trust_remote_code",
    "enable-metrics": "enable_metrics",
}
SERVER_LABELS = ["gpu", "model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank", "dp_rank"]
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
DROP_IN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
DROP_IN_TEXT = re.compile(r"^\s*\[")
WILDCARDS = ("0.0.0.0", "::")


def _bool(value):
    return boolean(value, strict=False)


def _text(value):
    """A value as Jinja's `string` filter writes it (a vaulted one decrypted); '' for an empty one."""
    return str(value) if value else ""


def _unique(items):
    found = []
    for item in items:
        if item not in found:
            found.append(item)
    return found


def _shared(items):
    """The items that occur more than once, in the order of their first."""
    return [item for item in _unique(items) if items.count(item) > 1]


def _changed(result):
    """Ansible's `changed` test on a registered result."""
    if not isinstance(result, Mapping):
        return False
    if "changed" in result:
        return bool(result["changed"])
    results = result.get("results")
    return isinstance(results, list) and any(isinstance(r, Mapping) and r.get("changed") for r in results)


def _servers(given, available):
    """Instance N: sglang_services_instances' entry N, else the GPU N of the wanted ones; each with the instances
    before it on its GPU (its unit waits for them) and how many they are."""
    port_base, nccl_base = _int(given["port_base"]), _int(given["nccl_port_base"])
    if given["instances"]:
        planned = [
            {
                "number": n,
                "gpu": _int(entry.get("gpu", -1)),
                "port": _int(entry.get("port", port_base + n)),
                "nccl_port": nccl_base + n,
                "mem_fraction_static": _float(entry.get("mem_fraction_static", given["mem_fraction_static"])),
            }
            for n, entry in enumerate(given["instances"])
        ]
    else:
        wanted = [_int(g) for g in given["gpus"]] if given["gpus"] else available
        planned = [
            {
                "number": g,
                "gpu": g,
                "port": port_base + g,
                "nccl_port": nccl_base + g,
                "mem_fraction_static": _float(given["mem_fraction_static"]),
            }
            for g in wanted
        ]
    for server in planned:
        server["after"] = [o["number"] for o in planned if o["gpu"] == server["gpu"] and o["number"] < server["number"]]
        server["rank"] = len(server["after"])
    return planned


def _backends(stack, found, servers):
    """Per SM of the GPUs the instances use: what the stack's release runs there; and what runs on all of them."""
    used = [server["gpu"] for server in servers]
    sms = _unique(str(gpu.get("compute_capability")) for gpu in found.get("gpus", []) if gpu.get("index") in used)
    if not sms:  # gpu_preflight did not list the GPUs: every SM present
        sms = [str(sm) for sm in found.get("capabilities", [""])]
    table = stack.get("attention_backends", {})
    fallback = [stack.get("fallback_attention_backend", "triton")]
    per_sm, common = {}, None
    for sm in sms:
        per_sm[sm] = table.get(sm, fallback)
        common = per_sm[sm] if common is None else [b for b in common if b in per_sm[sm]]
    return per_sm, common or []


def _settings_errors(given, plan, flags, api_key):
    """What sglang's config merger or parser would refuse in the instances' configuration."""
    labels = {"extra-metric-labels": _json_labels(plan["metric_labels"])} if _bool(given["enable_metrics"]) else {}
    written = {**plan["config"], **labels, **({"api-key": api_key} if api_key else {})}
    return server_config_errors(written, flags, SOURCES, given["extra_flags"])


def _json_labels(labels):
    """Each instance's labels as the release's parser takes them (JSON in a string), its GPU's 0 for the check."""
    return json.dumps({**labels, "gpu": "0"})


def _backend_errors(given, plan, found_gpus, flags):
    backend, backends, per_sm = plan["backend"], plan["backends"], plan["sm_backends"]
    gpus = [server["gpu"] for server in plan["servers"]]
    # a name sglang's parser does not know is refused by the flag check alone (its choices)
    parser_backends = flags.get("--attention-backend", {}).get("choices", [backend])
    errors = []
    if backends and backend not in backends and backend in parser_backends:
        missing = []
        for sm, runs in per_sm.items():
            if backend in runs:
                continue
            on = [g["index"] for g in found_gpus if g.get("compute_capability") == sm and g.get("index") in gpus]
            where = f" (GPUs {', '.join(str(g) for g in on)})" if on else ""
            missing.append(f"SM {sm}{where}, which runs {', '.join(runs)}")
        errors.append(
            f"sglang_services_attention_backend {backend} does not run on {', '.join(missing)} with the stack"
            f" profile {plan['profile']}: pick one of {', '.join(backends)}, or leave it empty for the default."
        )
    if not backends:
        errors.append(
            f"the stack profile {plan['profile']} has no attention backend that runs on all of"
            f" {', '.join('SM ' + sm for sm in per_sm)}: serve GPUs of one kind (sglang_services_gpus or"
            " sglang_services_instances)."
        )
    return errors


def _instance_errors(given, plan):
    listed = bool(given["instances"])
    servers, available = plan["servers"], plan["available"]
    source = "sglang_services_instances" if listed else f"sglang_services_gpus {given['gpus']}"
    gpus = [server["gpu"] for server in servers]
    ports = [server["port"] for server in servers] + [server["nccl_port"] for server in servers]
    fractions = [server["mem_fraction_static"] for server in servers]
    bad_fractions = [f for f in fractions if not f > 0] + [f for f in fractions if not f < 1]
    oversold = []
    for gpu in sorted(_unique(gpus)):
        on = [server for server in servers if server["gpu"] == gpu]
        total = sum(server["mem_fraction_static"] for server in on)
        if total > 0.95 + 1e-9:
            numbers = ", ".join(str(server["number"]) for server in on)
            oversold.append(f"GPU {gpu}: {round(total, 3)} (instances {numbers})")
    missing = [gpu for gpu in _unique(gpus) if gpu not in available]
    top = max(plan["indexes"]) if plan["indexes"] else 0
    return [
        "set sglang_services_gpus or sglang_services_instances, not both (the instances name their GPUs)."
        if listed and given["gpus"]
        else None,
        f"{source} names GPUs the container does not have: {missing} (it has {available})." if missing else None,
        "no GPU to serve." if not plan["indexes"] else None,
        f"sglang_services_port_base {given['port_base']} (and sglang_services_nccl_port_base"
        f" {given['nccl_port_base']}) plus the highest {'instance number ' if listed else 'GPU index '}{top}, and"
        " every port of sglang_services_instances, must stay a port from 1024 to 65535."
        if ports and not (min(ports) >= 1024 and max(ports) <= 65535)
        else None,
        f"sglang_services_instances: instances share the ports {sorted(_shared(ports))} (an instance N listens on its"
        " port and uses sglang_services_nccl_port_base + N for NCCL): give each its own."
        if _shared(ports)
        else None,
        f"sglang_services_mem_fraction_static is {given['mem_fraction_static']}; it must be between 0 and 1."
        if not 0 < _float(given["mem_fraction_static"]) < 1
        else None,
        f"sglang_services_instances: a mem_fraction_static must be between 0 and 1 (got {bad_fractions})."
        if listed and bad_fractions
        else None,
        "sglang_services_instances: the memory fractions of the instances on one GPU sum to 0.95 at most ("
        f"{'; '.join(oversold)}): lower their mem_fraction_static or move one to another GPU."
        if oversold
        else None,
    ]


def _count_errors(given):
    return [
        f"sglang_services_restart_batch is {given['restart_batch']}; it must be 0 (all at once) or more."
        if _int(given["restart_batch"]) < 0
        else None,
        f"sglang_services_model_stage_reserve_mb is {given['model_stage_reserve_mb']}; it must be 0 or more (MiB kept"
        " free in /dev/shm)."
        if _int(given["model_stage_reserve_mb"]) < 0
        else None,
        f"sglang_services_drain_timeout is {given['drain_timeout']}; it must be 0 or more (seconds)."
        if _int(given["drain_timeout"]) < 0
        else None,
        f"sglang_services_restart_sec is {given['restart_sec']}; it must be 0 or more (seconds)."
        if _int(given["restart_sec"]) < 0
        else None,
    ]


def _network_errors(given, plan, hostvars, api_key, plain_text):
    router = _text(given["router_container"])
    elsewhere, host, advertise = plan["router_elsewhere"], given["host"], given["advertise_host"]
    # empty is left out of the config: sglang 0.5.12's own default then binds 127.0.0.1 (server_args.py:387)
    bound = host or "127.0.0.1"
    advertised = advertise or bound
    known = router in hostvars
    router_key = _text(hostvars[router].get("sglang_services_api_key", "")) if elsewhere and known else ""
    keyless = _bool(given["allow_keyless_network"])
    return [
        f"sglang_services_router_container {router} is no host of the inventory: name the container whose router"
        " fronts these instances, or leave it empty for this one."
        if elsewhere and not known
        else None,
        f"sglang_services_router_container is {router}, whose router cannot reach servers bound to {bound} here: set"
        " sglang_services_host to an address it reaches (0.0.0.0 binds all), with sglang_services_api_key."
        if elsewhere and loopback(bound)
        else None,
        f"sglang_services_router_container is {router}, which cannot reach the instances at {advertised}: set"
        " sglang_services_advertise_host to the address it reaches this container at."
        if elsewhere and not loopback(bound) and (advertised in WILDCARDS or loopback(advertised))
        else None,
        f"sglang_services_api_key is not the key of the servers of {router}, whose router fronts these instances too:"
        " smg sends every worker one key, so give every container of the gateway the same."
        if elsewhere and known and router_key != api_key
        else None,
        f"sglang_services_advertise_host {advertise} is neither an IP address nor a host name (one address other"
        " machines reach, not 0.0.0.0 or ::)."
        if _text(advertise) and (not bind_address(advertise) or str(advertise) in WILDCARDS)
        else None,
        f"sglang_services_progress_interval is {given['progress_interval']}; it must be 0 (one silent wait) or more"
        " (seconds between two lines of progress)."
        if _int(given["progress_interval"]) < 0
        else None,
        f"sglang_services_host {host} is neither an IP address nor a host name."
        if _text(host) and not bind_address(host)
        else None,
        f"sglang_services_host {host} is reachable from other machines and the servers have no key: set"
        " sglang_services_api_key (docs/secrets.md), bind 127.0.0.1 (the router, sglang_router, is the way in from"
        " other machines), or set sglang_services_allow_keyless_network to true."
        if not (loopback(bound) or api_key or keyless)
        else None,
        f"sglang_services_host {host} is reachable from other machines, and sglang serves /metrics there without its"
        " key (sglang 0.5.12 leaves /health and /metrics open): set sglang_services_enable_metrics to false, bind"
        " 127.0.0.1 (the front of the router serves the /metrics of each server at /metrics/workers/N, with a client"
        " key), or set sglang_services_allow_keyless_network to true."
        if not (loopback(bound) or keyless) and api_key and _bool(given["enable_metrics"])
        else None,
        "sglang_services_api_key is written in plain text (an inventory, a vars file, a playbook or the command line):"
        " keep it in Ansible Vault (ansible-vault encrypt_string --name sglang_services_api_key), a lookup (for"
        " example lookup('ansible.builtin.env', ...)) or an extra-vars file passed with -e @file, or set"
        " sglang_services_api_key_allow_plain_text to true to accept it."
        if api_key and not _bool(given["api_key_allow_plain_text"]) and plain_text
        else None,
    ]


def _shape_errors(given, plan):
    drop_ins, labels = given["unit_drop_ins"], given["metric_labels"]
    bad_drop_ins = _unique(
        [str(k) for k in drop_ins if not DROP_IN_NAME.match(str(k))]
        + [str(k) for k, v in drop_ins.items() if not isinstance(v, str)]
        + [str(k) for k, v in drop_ins.items() if isinstance(v, str) and not DROP_IN_TEXT.match(v)]
    )
    names = [str(k) for k in labels]
    bad_labels = _unique(
        [n for n in names if not LABEL_NAME.match(n)]
        + [n for n in names if n.startswith("__")]
        + [n for n in names if n in SERVER_LABELS]
    )
    nested = [str(k) for k, v in labels.items() if isinstance(v, (list, dict, tuple, set))]
    stage = plan["stage"]
    return [
        f"sglang_services_model_path {given['model_path']} is under /dev/shm, which a reboot empties: set"
        " sglang_services_model_source to the absolute path of its persistent copy in the container (for example a"
        " bind mount from the node, pct_container_mounts), or keep the model on persistent storage."
        if stage and not str(given["model_source"]).startswith("/")
        else None,
        f'sglang_services_unit_drop_ins: {", ".join(bad_drop_ins)}: each is a name (letters, digits, ".", "_",'
        ' "-"; the file /etc/systemd/system/sglang@.service.d/<name>.conf) and its text, starting with a section'
        " such as [Service]."
        if bad_drop_ins
        else None,
        f'sglang_services_metric_labels: {", ".join(bad_labels)}: each label name is letters, digits and "_", not'
        f' starting with a digit or "__", and none the servers set themselves ({", ".join(SERVER_LABELS)}).'
        if bad_labels
        else None,
        f"sglang_services_metric_labels: {', '.join(nested)}: the value of a label is a string or a number, not a"
        " list or a mapping."
        if nested
        else None,
        "sglang_services_model_path is empty: set the model directory the servers load (--model-path)."
        if not _text(given["model_path"])
        else None,
        "sglang_services_served_model_name is empty: set the name the servers serve the model by (the smoke test and"
        " the router ask for it)."
        if not _text(given["served_model_name"])
        else None,
    ]


def _published(server, address):
    """An instance as the role publishes it."""
    number = server["number"]
    return {
        "name": f"sglang@{number}",
        "index": number,
        "gpu": server["gpu"],
        "unit": f"sglang@{number}.service",
        "port": server["port"],
        "url": f"http://{address}:{server['port']}",
    }


def services_plan(
    inputs,
    *,
    profile,
    gpus=None,
    gpus_fact=None,
    stack=None,
    hostname="",
    hostvars=None,
    plain_text=False,
    drop_in_dir="/etc/systemd/system/sglang@.service.d",
):
    """The instances, their GPUs, ports, fractions and settings, the attention backend, and every input error."""
    if not isinstance(inputs, Mapping) or not isinstance(profile, Mapping):
        raise AnsibleFilterError("services_plan: the role's variables and the stack profile must be mappings")
    given = {name[len(PREFIX) :]: value for name, value in inputs.items() if name.startswith(PREFIX)}
    # gpu_preflight's result in this run, else its local fact
    gpus_fact = gpus_fact or {}
    found = gpus if "indexes" in (gpus or {}) else gpus_fact
    found_gpus = (gpus if "gpus" in (gpus or {}) else gpus_fact).get("gpus", [])
    available = [_int(index) for index in found.get("indexes", [])]
    servers = _servers(given, available)
    # the stack's release's backends for the GPUs' SM: sglang_stack's fact, else (a container the stack role has
    # not run on since the fact came) the profile itself
    chosen = stack or profile
    per_sm, backends = _backends(chosen, found, servers)
    backend = given["attention_backend"] or (backends[0] if backends else "")
    api_key = _text(given["api_key"])
    router = _text(given["router_container"])
    advertised = loopback_host(given["advertise_host"] or given["host"])
    settings = {key: given[name] if name else backend for key, name in SETTINGS.items()}
    for key in ("trust-remote-code", "enable-metrics"):
        settings[key] = _bool(settings[key])
    flag_names = profile.get("flag_names", {})
    plan = {
        "servers": servers,
        # what the role publishes (ansible_local.gpulxc_services) for the router, the health check and the summary
        "instances": [_published(server, advertised) for server in servers],
        "indexes": [server["number"] for server in servers],
        "available": available,
        "backend": backend,
        "backends": backends,
        "sm_backends": per_sm,
        "profile": chosen.get("profile", chosen.get("name", "")),
        # every instance's --config settings but its port, NCCL port and memory fraction (and the API key, kept out
        # of facts), under the release's names (the profile's flag_names); an empty optional one is left out
        "config": {
            flag_names.get(key, key): value for key, value in settings.items() if value is not None and value != ""
        },
        # --extra-metric-labels of every instance but its `gpu`: the labels given a value, as strings
        "metric_labels": {
            str(key): str(value)
            for key, value in given["metric_labels"].items()
            if value is not None and str(value) != ""
        },
        "stage": bool(re.match("/dev/shm/", str(given["model_path"]))),
        # the unit's drop-ins the role writes (sglang_services_unit_drop_ins): their paths and files
        "drop_in_paths": [f"{drop_in_dir}/{name}.conf" for name in given["unit_drop_ins"]],
        "drop_ins": [
            {"path": f"{drop_in_dir}/{name}.conf", "content": text} for name, text in given["unit_drop_ins"].items()
        ],
        # another container's router fronts the instances (a fleet's gateway): the drains and re-admissions run there
        "router_elsewhere": router not in ("", hostname),
        # where those run: that container, else "" (this one)
        "router_host": router if router not in ("", hostname) else "",
    }
    errors = (
        _instance_errors(given, plan)
        + _backend_errors(given, plan, found_gpus, profile.get("flags", {}))
        + _shape_errors(given, plan)[:1]
        + _count_errors(given)
        + _network_errors(given, plan, hostvars or {}, api_key, plain_text)
        + _shape_errors(given, plan)[1:]
    )
    plan["errors"] = [error for error in errors if error] + _settings_errors(
        given, plan, profile.get("flags", {}), api_key
    )
    return plan


def services_moving(present, plan):
    """The instances that move to another GPU, or change their share of a GPU shared before or now: stopped
    together before any start, so that each start fits the new plan."""
    old = [instance for instance in present.get("instances", []) if instance.get("share")]
    shared_before = _shared([instance["share"]["gpu"] for instance in old])
    shared_now = _shared([server["gpu"] for server in plan["servers"]])
    servers = {server["number"]: server for server in plan["servers"]}
    moving = []
    for instance in old:
        new, share = servers.get(instance["index"]), instance["share"]
        if new is None:
            continue
        if share["gpu"] != new["gpu"] or (
            share["mem_fraction_static"] != new["mem_fraction_static"]
            and (new["gpu"] in shared_now or share["gpu"] in shared_before)
        ):
            moving.append(instance["index"])
    return moving


def restart_plan(
    plan,
    *,
    files,
    present,
    drop_ins,
    units,
    start,
    first,
    unit_changed,
    config_dir,
    previous_stack,
    stack,
    check_mode=False,
    batch=1,
):
    """Which instances restart (all when the unit changed, else those whose configuration changed or whose drop-in
    went, not those just started, and those running with an outdated environment file), whether the first moves to
    a new stack alone first (the canary), and the batches of the others."""
    indexes, changed_paths = plan["indexes"], files.get("changed_paths", [])
    configs = [
        i
        for i in indexes
        if f"{config_dir}/instance-{i}.yaml" in changed_paths or f"{config_dir}/instance-{i}.env" in changed_paths
    ]
    dropped = present.get("drop_in_instances", []) if _changed(drop_ins) else []
    started = [r["item"] for r in start.get("results", []) if r.get("changed")]
    started += indexes[:1] if _changed(first) else []
    chosen = list(indexes) if _bool(unit_changed) else _unique(configs + list(dropped))
    restart = sorted(_unique([i for i in chosen if i not in started] + list(units.get("stale_env", []))))
    # a new stack under running instances: the first to restart moves to it alone first
    canary = []
    if restart and previous_stack not in ("", stack) and not _bool(check_mode):
        canary = [instance for instance in plan["instances"] if instance["index"] == restart[0]]
    rest = [i for i in restart if i not in [instance["index"] for instance in canary]]
    size = _int(batch) if _int(batch) > 0 else max(len(rest), 1)
    return {
        "restart": restart,
        "canary": canary,
        "batches": [rest[n : n + size] for n in range(0, len(rest), size)],
    }


def services_stack(stack, venv, cache_dir):
    """Where the servers start from, from sglang_stack's stack object (gpulxc_stack): its own directory when the object
    is of this venv, else the venv installed in place; its python (not the venv's link, so that a server keeps the
    stack it started with when the link is switched; it moves at its next start); and its JIT caches, in a directory
    of their own named as the stack (a new stack starts on a cold cache while the instances still on the old one keep
    theirs; a rollback finds the old one's warm). A venv installed in place has one, cleared when its lock changes."""
    stack = stack or {}
    own = stack.get("stack") if stack.get("venv", "") == venv and stack.get("stack") else venv
    root = f"{cache_dir}/stacks"
    return {
        "stack": own,
        "in_place": own == venv,
        "python": f"{own}/bin/python",
        "jit_root": root,
        "jit_dir": f"{root}/{os.path.basename(own.rstrip('/'))}",
    }


def failure_reason(result, task_name):
    """A failed task's name and message, the last failed item's for a loop (why a canary failed)."""
    items = [item for item in result.get("results", [result]) if item.get("failed")]
    return f"{task_name}: {(items[-1] if items else result).get('msg', 'failed')}"


class FilterModule:
    def filters(self):
        return {
            "services_plan": services_plan,
            "services_moving": services_moving,
            "restart_plan": restart_plan,
            "services_stack": services_stack,
            "failure_reason": failure_reason,
        }
