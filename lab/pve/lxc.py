"""Drive real LXC for the lab's `pct` (test infrastructure).

Renders /var/lib/lxc/<vmid>/config from the Proxmox config the way Proxmox applies it, with one
translation: this host's `devices` cgroup controller is v1 (a v1/v2 hybrid), where LXC ignores
`lxc.cgroup2.*` ("Ignoring cgroup2 limits on legacy cgroup system"), so device and memory rules are
written as `lxc.cgroup.*` when the host has no unified devices controller. The Proxmox config keeps
Proxmox's `lxc.cgroup2.*` form.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from .config import ConfigError, parse_property_string
from .schema import device_rdev, indexed_key

LXC_DIR = Path("/var/lib/lxc")
# The lab's simulated NVIDIA kernel driver: what /proc/driver/nvidia/version shows on a real node,
# and, since containers share the node's kernel, in every container too.
SIMULATED_PROC_DRIVER = Path("/var/lib/gpulxc-lab/proc/driver")
CGROUP_V1_DEVICES = Path("/sys/fs/cgroup/devices")


def legacy_cgroups() -> bool:
    """True on a host whose devices controller is cgroup v1 (this lab host), False on pure cgroup v2."""
    return CGROUP_V1_DEVICES.is_dir()


def translate_cgroup_key(key: str) -> str:
    if legacy_cgroups() and key.startswith("lxc.cgroup2."):
        sub = key[len("lxc.cgroup2.") :]
        if sub == "memory.max":
            return "lxc.cgroup.memory.limit_in_bytes"
        return "lxc.cgroup." + sub
    return key


def lxc_path(vmid: int) -> Path:
    return LXC_DIR / str(vmid)


def passthrough_dir(vmid: int) -> Path:
    return lxc_path(vmid) / "passthrough"


def state(vmid: int) -> str:
    """'running' or 'stopped', from lxc-info."""
    if not (lxc_path(vmid) / "config").exists():
        return "stopped"
    proc = subprocess.run(["lxc-info", "-n", str(vmid), "-sH"], capture_output=True, text=True, check=False)
    return "running" if proc.stdout.strip() == "RUNNING" else "stopped"


def make_passthrough_node(vmid: int, key: str, value: str) -> tuple[str, str, str]:
    """Create the node copy Proxmox makes under passthrough/ (mknod, mode, uid/gid).

    Returns (cgroup rule, host node path, path inside the CT without the leading slash).
    Raises ConfigError("Device ... does not exist") like Proxmox at every start.
    """
    dev = parse_property_string(value, "path")
    path = dev["path"]
    kind, major, minor, _mode = device_rdev(path)
    node = passthrough_dir(vmid) / path.lstrip("/")
    node.parent.mkdir(parents=True, exist_ok=True)
    if node.exists() or node.is_symlink():
        node.unlink()
    mode = int(dev.get("mode", "0660"), 8)
    devtype = 0o020000 if kind == "c" else 0o060000
    os.mknod(node, devtype | mode, os.makedev(major, minor))
    os.chmod(node, mode)
    os.chown(node, int(dev.get("uid", 0)), int(dev.get("gid", 0)))
    perms = "r" if dev.get("deny-write") in ("1", "true") else "rw"
    rule = f"{kind} {major}:{minor} {perms}"
    return rule, str(node), path.lstrip("/")


def render(vmid: int, keys: dict, raw: list[tuple[str, str]], rootfs_dir: str) -> str:
    """The LXC config for the Proxmox config `keys` (+ raw lxc lines)."""
    lines = [
        f"lxc.uts.name = {keys.get('hostname', f'CT{vmid}')}",
        f"lxc.arch = {keys.get('arch', 'amd64')}",
        "lxc.include = /usr/share/lxc/config/common.conf",
        "lxc.apparmor.profile = unconfined",
        "lxc.autodev = 1",
        "lxc.mount.auto = proc:mixed sys:mixed cgroup:mixed",
        f"lxc.rootfs.path = dir:{rootfs_dir}",
        # The lab's CTs share the host network: netN is stored and checked but not realised here. A CT with
        # no netN has no network, as LXC gives it on Proxmox: a network namespace of its own with only lo.
        "lxc.net.0.type = " + ("none" if any(indexed_key(k) and indexed_key(k)[0] == "net" for k in keys) else "empty"),
    ]
    memory_key = translate_cgroup_key("lxc.cgroup2.memory.max")
    lines.append(f"{memory_key} = {int(keys.get('memory', 512)) * 1024 * 1024}")
    allow_key = translate_cgroup_key("lxc.cgroup2.devices.allow")
    for key in sorted(keys, key=_index_order):
        idx = indexed_key(key)
        if not idx:
            continue
        if idx[0] == "mp":
            mp = parse_property_string(keys[key], "volume")
            source = mp["volume"]
            if not os.path.isdir(source) and not os.path.isfile(source):
                raise ConfigError(f"mount point '{source}' does not exist")
            opts = "rbind,create=dir" if os.path.isdir(source) else "bind,create=file"
            if mp.get("ro") in ("1", "true"):
                opts += ",ro"
            lines.append(f"lxc.mount.entry = {source} {mp['mp'].lstrip('/')} none {opts} 0 0")
        elif idx[0] == "dev":
            rule, node, target = make_passthrough_node(vmid, key, keys[key])
            lines.append(f"{allow_key} = {rule}")
            lines.append(f"lxc.mount.entry = {node} {target} none bind,create=file 0 0")
    if SIMULATED_PROC_DRIVER.is_dir():
        lines.append(f"lxc.mount.entry = {SIMULATED_PROC_DRIVER} proc/driver none bind,ro 0 0")
    for key, value in raw:
        lines.append(f"{translate_cgroup_key(key)} = {value}")
    return "".join(line + "\n" for line in lines)


def _index_order(key: str) -> tuple[str, int]:
    idx = indexed_key(key)
    return (idx[0], idx[1]) if idx else (key, -1)


def reset_passthrough(vmid: int) -> None:
    """Remove the node copies of the last start; render() makes them anew from the current devN."""
    if passthrough_dir(vmid).exists():
        shutil.rmtree(passthrough_dir(vmid))


def write_lxc_config(vmid: int, text: str) -> None:
    path = lxc_path(vmid)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config").write_text(text)


def hotplug_device(vmid: int, key: str, value: str) -> None:
    """Proxmox's device_passthrough_hotplug: make the node, allow it, put it into the running CT."""
    _rule, node, target = make_passthrough_node(vmid, key, value)
    dev = parse_property_string(value, "path")
    ct_path = "/" + target
    # lxc-device creates the node inside the CT and adds the cgroup rule (v1 or v2, as the host has).
    run(["lxc-device", "-n", str(vmid), "add", node, ct_path])
    mode = dev.get("mode", "0660")
    owner = f"{dev.get('uid', 0)}:{dev.get('gid', 0)}"
    attach(vmid, ["/bin/sh", "-c", 'chmod "$1" "$3" && chown "$2" "$3"', "sh", mode, owner, ct_path])


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)
    if proc.returncode != 0:
        raise ConfigError(f"command '{' '.join(cmd)}' failed: exit code {proc.returncode}\n{proc.stderr.strip()}")
    return proc


def attach(vmid: int, cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return run(["lxc-attach", "-n", str(vmid), "--clear-env", "--", *cmd], **kwargs)
