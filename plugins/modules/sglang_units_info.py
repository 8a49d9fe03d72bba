#!/usr/bin/python
# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_units_info
short_description: Read the state of the SGLang instances' systemd units in the container
version_added: 0.2.0
description:
  - Reads, with one C(systemctl list-units) and one C(systemctl show) call, every C(sglang@N.service) instance
    asked for and every one present (loaded, or enabled through a C(*.wants/) link), and the model staging unit
    C(sglang-model-stage.service).
  - For each instance asked for - its C(ActiveState), its unit file state, its main PID and whether it runs with an
    outdated environment file (O(env_file)) - a C(KEY=value) line of the file missing from its process's
    environment (systemd restarted it while the file was drifted, or the file changed since it started). Lines
    systemd would unquote or unescape (quotes, backslashes, whitespace) are not compared.
  - Lists what the role acts on - the instances to start (not running or not enabled), the failed ones (systemd
    gave up on them), those with a stale environment, and the instances present that were not asked for (running
    or enabled).
  - Lists the unit drop-ins added by hand - the C(*.conf) files systemd applies to an instance or the staging
    unit (C(DropInPaths)) from a directory named for that unit or the C(sglang@.service) template, in
    C(/etc/systemd/system) or C(/run/systemd/system); the role writes none, so each one changes an instance
    behind the inventory's back. Drop-ins of other directories (a distribution's, the node-wide C(service.d))
    are not listed.
  - Changes nothing.
author:
  - gpulxc.sglang developers (@gpulxc)
extends_documentation_fragment:
  - gpulxc.sglang.attributes
  - gpulxc.sglang.attributes.info_module
options:
  instances:
    description: The GPU indexes of the instances wanted (C(sglang@<index>.service)).
    type: list
    elements: int
    required: true
  env_file:
    description: The environment file the instances read (C(EnvironmentFile=)); when omitted, no instance is stale.
    type: path
  instance_env_file:
    description:
      - Each instance's own environment file, read after O(env_file) (a later C(EnvironmentFile=)), C(%i) in the path
        standing for the instance's number. Its lines are compared too, and a variable it sets replaces the one
        O(env_file) sets (as systemd reads them).
    type: str
    version_added: 0.3.0
  kept_drop_ins:
    description: Drop-ins the caller writes itself, left out of RV(drop_ins) and RV(drop_in_instances).
    type: list
    elements: path
    default: []
  config_dir:
    description:
      - The instances' configuration directory (C(instance-<index>.yaml)); with it each running instance's share
        of its GPU is reported (RV(instances[].share)), read before the role writes new configurations.
    type: path
"""

EXAMPLES = r"""
- name: Read the sglang units
  gpulxc.sglang.sglang_units_info:
    instances: [0, 1, 2, 3]
    env_file: /etc/sglang/cuda.env
  register: units

- name: Start the instances not running or not enabled
  ansible.builtin.systemd_service:
    name: "sglang@{{ item }}.service"
    state: started
    enabled: true
  loop: "{{ units.to_start }}"
"""

RETURN = r"""
instances:
  description: Each instance asked for, in the order asked.
  returned: always
  type: list
  elements: dict
  contains:
    index: {description: The GPU index., type: int, sample: 0}
    unit: {description: The unit., type: str, sample: sglang@0.service}
    active: {description: systemd's C(ActiveState)., type: str, sample: active}
    enabled: {description: 'The unit file state (C(enabled), C(disabled), empty when not found).', type: str}
    running: {description: 'C(active), C(activating) or C(reloading).', type: bool}
    failed: {description: C(ActiveState) is C(failed) - systemd gave up on it., type: bool}
    main_pid: {description: 'The main process, 0 when none.', type: int}
    drop_ins: {description: 'The drop-ins added by hand that apply to it.', type: list, elements: str}
    stale_env: {description: It runs with an environment other than O(env_file)'s now., type: bool}
    share:
      description:
        - With O(config_dir), for a running instance - the GPU it runs on (its process's C(CUDA_VISIBLE_DEVICES))
          and its C(mem-fraction-static) (its configuration file); else null.
      type: dict
      sample: {gpu: 0, mem_fraction_static: 0.45}
to_start:
  description: The indexes asked for that are not running or not enabled.
  returned: always
  type: list
  elements: int
  sample: [3]
failed_units:
  description: The units asked for that systemd gave up on (C(failed)).
  returned: always
  type: list
  elements: str
  sample: [sglang@5.service]
stale_env:
  description: The indexes asked for that run with an outdated environment file.
  returned: always
  type: list
  elements: int
  sample: []
unwanted:
  description: The instances present that were not asked for and are running or enabled.
  returned: always
  type: list
  elements: str
  sample: [sglang@7.service]
drop_ins:
  description: The drop-ins added by hand (see the description), each once.
  returned: always
  type: list
  elements: str
  sample: [/etc/systemd/system/sglang@.service.d/override.conf]
drop_in_instances:
  description: The indexes asked for that one of RV(drop_ins) applies to.
  returned: always
  type: list
  elements: int
  sample: [0, 1, 2, 3]
staging:
  description: The model staging unit.
  returned: always
  type: dict
  contains:
    unit: {description: Its name., type: str, sample: sglang-model-stage.service}
    present: {description: Its unit file exists (in C(/etc/systemd/system))., type: bool}
    active: {description: systemd's C(ActiveState)., type: str, sample: active}
    enabled: {description: The unit file state., type: str, sample: enabled}
"""

import glob
import os
import re

from ansible.module_utils.basic import AnsibleModule

SYSTEMD_DIR = "/etc/systemd/system"
PROC = "/proc"
STAGING = "sglang-model-stage.service"
TEMPLATE = "sglang@.service"
# where an administrator (/etc) or a runtime change (`systemctl set-property --runtime`, /run) puts a drop-in
DROP_IN_ROOTS = ("/etc/systemd/system", "/run/systemd/system")
INSTANCE = re.compile(r"^sglang@[0-9]+\.service$")
RUNNING = ("active", "activating", "reloading")
# the lines compared: KEY=value with no quote, backslash or whitespace (systemd takes those as written)
PLAIN_LINE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=[^\s\\\"']*$")


def parse_show(text):
    """`systemctl show -p ...` of several units: blocks of KEY=value separated by blank lines, by Id."""
    units = {}
    for block in text.strip().split("\n\n"):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if props.get("Id"):
            units[props["Id"]] = props
    return units


def hand_drop_ins(unit, paths, kept=()):
    """The drop-ins of `DropInPaths` (space-separated) from a directory named for `unit` or its template under
    DROP_IN_ROOTS, but those `kept`: the ones someone added to this unit by hand."""
    names = {f"{unit}.d"} | ({f"{TEMPLATE}.d"} if INSTANCE.match(unit) else set())
    return [
        path
        for path in paths.split()
        if os.path.dirname(os.path.dirname(path)) in DROP_IN_ROOTS
        and os.path.basename(os.path.dirname(path)) in names
        and path not in kept
    ]


def loaded_instances(text):
    """The first column of `systemctl list-units --plain --no-legend`, sglang@N.service only."""
    names = (line.replace("\u25cf", " ").split() for line in text.splitlines())
    return [fields[0] for fields in names if fields and INSTANCE.match(fields[0])]


def env_lines(path):
    if not path:
        return []
    try:
        with open(path) as handle:
            return [line.rstrip("\n") for line in handle if PLAIN_LINE.match(line.rstrip("\n"))]
    except OSError:
        return []


def process_env(pid):
    try:
        with open(os.path.join(PROC, str(pid), "environ"), "rb") as handle:
            return set(handle.read().decode("utf-8", "replace").split("\0"))
    except OSError:
        return None


def config_fraction(config_dir, index):
    """The mem-fraction-static line of instance-<index>.yaml, as the role writes it; None when absent."""
    try:
        with open(os.path.join(config_dir, f"instance-{index}.yaml")) as handle:
            for line in handle:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "mem-fraction-static":
                    return float(value.strip())
    except (OSError, ValueError):
        return None
    return None


def share(pid, config_dir, index):
    environ = process_env(pid) if pid > 0 else None
    if environ is None:
        return None
    visible = next((e.split("=", 1)[1] for e in environ if e.startswith("CUDA_VISIBLE_DEVICES=")), "")
    gpu = int(visible.split(",")[0]) if visible.split(",")[0].isdigit() else None
    return {"gpu": gpu, "mem_fraction_static": config_fraction(config_dir, index)}


def main():
    module = AnsibleModule(
        argument_spec={
            "instances": {"type": "list", "elements": "int", "required": True},
            "env_file": {"type": "path"},
            "instance_env_file": {"type": "str"},
            "config_dir": {"type": "path"},
            "kept_drop_ins": {"type": "list", "elements": "path", "default": []},
        },
        supports_check_mode=True,
    )
    wanted = [f"sglang@{i}.service" for i in module.params["instances"]]
    systemctl = module.get_bin_path("systemctl", required=True)
    rc, out, err = module.run_command(
        [systemctl, "list-units", "--all", "--plain", "--no-legend", "--no-pager", "sglang@*.service"]
    )
    if rc != 0:
        module.fail_json(msg=f"systemctl list-units failed: {err.strip() or out.strip()}")
    linked = [os.path.basename(p) for p in glob.glob(os.path.join(SYSTEMD_DIR, "*.wants", "sglang@*.service"))]
    present = sorted(set(loaded_instances(out)) | {u for u in linked if INSTANCE.match(u)})
    units = list(dict.fromkeys([*wanted, *present, STAGING]))
    props = ("Id", "ActiveState", "UnitFileState", "MainPID", "DropInPaths")
    rc, out, err = module.run_command([systemctl, "show", *(a for p in props for a in ("-p", p)), *units])
    if rc != 0:
        module.fail_json(msg=f"systemctl show failed: {err.strip() or out.strip()}")
    shown = parse_show(out)
    shared = env_lines(module.params["env_file"])

    def expected_for(index):
        """The lines of env_file, then of the instance's own file, a variable set twice taken from the later."""
        own = module.params["instance_env_file"]
        lines = {line.split("=", 1)[0]: line for line in shared}
        if own:
            lines.update({line.split("=", 1)[0]: line for line in env_lines(own.replace("%i", str(index)))})
        return list(lines.values())

    kept = set(module.params["kept_drop_ins"])

    instances = []
    for index in module.params["instances"]:
        unit = f"sglang@{index}.service"
        props = shown.get(unit, {})
        active, pid = props.get("ActiveState", ""), int(props.get("MainPID") or 0)
        expected = expected_for(index)
        environ = process_env(pid) if pid > 0 and expected else None
        instances.append(
            {
                "index": index,
                "unit": unit,
                "active": active,
                "enabled": props.get("UnitFileState", ""),
                "running": active in RUNNING,
                "failed": active == "failed",
                "main_pid": pid,
                "stale_env": environ is not None and any(line not in environ for line in expected),
                "share": share(pid, module.params["config_dir"], index)
                if module.params["config_dir"] and active in RUNNING
                else None,
                "drop_ins": hand_drop_ins(unit, props.get("DropInPaths", ""), kept),
            }
        )

    def unwanted(unit):
        props = shown.get(unit, {})
        return unit not in wanted and (props.get("ActiveState") in RUNNING or props.get("UnitFileState") == "enabled")

    staging = shown.get(STAGING, {})
    staging_drop_ins = staging.get("DropInPaths", "")
    module.exit_json(
        changed=False,
        instances=instances,
        to_start=[i["index"] for i in instances if not (i["running"] and i["enabled"] == "enabled")],
        failed_units=[i["unit"] for i in instances if i["failed"]],
        stale_env=[i["index"] for i in instances if i["stale_env"]],
        unwanted=[u for u in present if unwanted(u)],
        drop_ins=sorted(
            {p for i in instances for p in i["drop_ins"]} | set(hand_drop_ins(STAGING, staging_drop_ins, kept))
        ),
        drop_in_instances=[i["index"] for i in instances if i["drop_ins"]],
        staging={
            "unit": STAGING,
            "present": os.path.exists(os.path.join(SYSTEMD_DIR, STAGING)),
            "active": staging.get("ActiveState", ""),
            "enabled": staging.get("UnitFileState", ""),
        },
    )


if __name__ == "__main__":
    main()
