# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lists role sglang_services' steps act on (documented in the .yml files of the same names next to this file):
the units and URLs of a set of instances, the slices of a health wait, the JIT caches to remove, the units and paths
a removal takes. services.py decides; these only turn its plan and the modules' results into arguments."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping

from ansible.module_utils.parsing.convert_bool import boolean


# the shared layout's caches (before each stack had its own): its stamp and SGLang's and DeepGEMM's per instance
LEGACY_CACHE = re.compile(r"(tvm-ffi|triton|torchinductor|\.gpulxc-jit-stack|(sglang|deep_gemm)-[0-9]+)$")
# a staging unit in one of these states is stopped already
STOPPED = ("inactive", "failed", "")


def _indexes(items):
    """Instance numbers from numbers or published instances (each with its `index`)."""
    return [int(item["index"]) if isinstance(item, Mapping) else int(item) for item in items or []]


def _int(value):
    """As Jinja's `int`: 0 for what is not a number (the argument specs check the types)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def services_units(instances):
    """Each instance's unit (sglang@<index>.service), from its number or its published instance."""
    return [f"sglang@{index}.service" for index in _indexes(instances)]


def services_urls(plan, indexes):
    """The URLs of the plan's instances among `indexes` (numbers or published instances), in the plan's order."""
    wanted = set(_indexes(indexes))
    return [instance["url"] for instance in plan.get("instances", []) if instance["index"] in wanted]


def services_start_order(plan, to_start):
    """The instances to start (numbers), the first of each GPU first (the plan's `rank`): a second one's start waits
    in its ExecStartPre until the first listens."""
    wanted = set(_indexes(to_start))
    servers = [server for server in plan.get("servers", []) if server["number"] in wanted]
    return [server["number"] for server in sorted(servers, key=lambda server: server["rank"])]


def services_wait(instances, deadline=0, interval=1):
    """The names a health wait names (`sglang@0, sglang@1`) and its loop: one slice of `interval` seconds each, two
    more than the deadline holds (the first resumes nothing, the last fails naming what it saw)."""
    slices = _int(deadline) // max(_int(interval), 1)
    return {
        "names": ", ".join(str(instance["name"]) for instance in instances or []),
        "slices": list(range(slices + 2)),
    }


def services_jit(stack, *, jit_root, cache_dir, in_place, found=None):
    """Where the JIT caches are looked for, and those to remove: the caches of stacks no longer on disk (the stacks
    sit beside `stack`; a venv installed in place keeps only its own), and the shared layout's."""
    stack = str(stack)
    stacks_dir = posixpath.dirname(stack)
    search = [jit_root, cache_dir] + ([] if in_place else [stacks_dir])
    paths = [item["path"] for item in (found or {}).get("files", [])]
    on_disk = {posixpath.basename(stack)}
    if not in_place:
        on_disk |= {posixpath.basename(path) for path in paths if path.startswith(stacks_dir + "/")}
    gone = [path for path in paths if path.startswith(jit_root + "/") and posixpath.basename(path) not in on_disk]
    legacy = [
        path
        for path in paths
        if path.startswith(cache_dir + "/")
        and "/" not in path[len(cache_dir) + 1 :]
        and LEGACY_CACHE.fullmatch(path[len(cache_dir) + 1 :])
    ]
    if f"{cache_dir}/.cache" in paths:
        legacy.append(f"{cache_dir}/.cache/flashinfer")
    return {"search": search, "remove": gone + legacy}


def services_jit_clear(jit_dir, *, caches, instance_caches=None):
    """The JIT caches of an in-place venv's cache directory to clear: the named ones and the per-instance ones
    found."""
    return [f"{jit_dir}/{cache}" for cache in caches] + [
        item["path"] for item in (instance_caches or {}).get("files", [])
    ]


def services_running(present):
    """The numbers of the instances running (module sglang_units_info's result)."""
    return [instance["index"] for instance in present.get("instances", []) if instance.get("running")]


def services_files(
    plan,
    *,
    user,
    cache_dir,
    jit_root,
    jit_dir,
    facts_dir,
    drop_in_dir,
    api_key="",
    model="",
    enable_metrics=True,
    stack="",
):
    """What the role's one file_set call writes besides the templates: the directories (the drop-ins' only when
    the role writes one), the drop-ins as files, the services' fact (`published`) and its path."""
    owned = {"owner": user, "group": user, "mode": "0755"}
    root = {"owner": "root", "group": "root"}
    directories = [{"path": cache_dir, **owned}, {"path": jit_root, **owned}, {"path": jit_dir, **owned}]
    directories += [{"path": facts_dir, **root, "mode": "0755"}]
    directories += [{"path": drop_in_dir, **root, "mode": "0755"}] if plan["drop_ins"] else []
    return {
        "directories": directories,
        "drop_ins": [{**drop_in, **root, "mode": "0644"} for drop_in in plan["drop_ins"]],
        # ansible_local.gpulxc_services, for the router, the health check, the summary and the next run's canary
        "published": {
            "instances": plan["instances"],
            "api_key": len(api_key or "") > 0,
            "model": model,
            # each server's --extra-metric-labels but its gpu (none: metrics off), for sglang_monitoring's targets
            "metric_labels": plan["metric_labels"] if boolean(enable_metrics, strict=False) else None,
            "stack": stack,
        },
        "fact_path": f"{facts_dir}/gpulxc_services.fact",
    }


def services_changed(files, paths):
    """Whether module file_set changed one of `paths` (its `changed_paths`)."""
    return bool(set((files or {}).get("changed_paths", [])) & set(paths))


def services_stage_job(argv, *, timeout, check_mode=False):
    """The model staging command as a job: in check mode it runs in the task (async 0) with --dry-run (it copies
    nothing)."""
    return {"argv": list(argv) + (["--dry-run"] if check_mode else []), "async": 0 if check_mode else timeout}


def services_removal(units, *, configs=None, files=(), cache_dir="", facts_dir="", model_path=""):
    """What the removal stops and disables (every instance present, the staging unit when it runs or is enabled),
    and the paths it deletes: `files`, the drop-ins found, the configurations found, the cache, the fact, and a
    model staged in /dev/shm with its partial copy."""
    staging = units.get("staging", {})
    stopping = list(units.get("unwanted", []))
    if staging.get("active", "") not in STOPPED or staging.get("enabled") == "enabled":
        stopping.append(staging["unit"])
    staged = [model_path, f"{model_path}.partial"] if re.match("/dev/shm/[^/]", str(model_path)) else []
    paths = (
        list(files)
        + list(units.get("drop_ins", []))
        + sorted((configs or {}).get("stdout_lines", []))
        + [cache_dir, f"{facts_dir}/gpulxc_services.fact"]
        + staged
    )
    return {"units": stopping, "paths": paths}


class FilterModule:
    def filters(self):
        return {
            "services_units": services_units,
            "services_urls": services_urls,
            "services_start_order": services_start_order,
            "services_wait": services_wait,
            "services_jit": services_jit,
            "services_jit_clear": services_jit_clear,
            "services_running": services_running,
            "services_removal": services_removal,
            "services_files": services_files,
            "services_changed": services_changed,
            "services_stage_job": services_stage_job,
        }
