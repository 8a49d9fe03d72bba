"""Which pending change a running CT takes at once, per pve-container version (lab stand-in, test infrastructure).

Modelled on PVE::LXC::Config::vmconfig_hotplug_pending, as update_pct_config calls it for a running CT
(`src/PVE/LXC/Config.pm` of pve-container 6.1.10 = PVE 9 and 5.3.5 = PVE 8; the rows of lab/README.md's
fidelity table give the lines). The version is the node's, as `pveversion -v` reports it (pveversion.py):
the lab setting GPULXC_LAB_PVE (lab/setup) picks the release, the rules follow from its pve-container version.

- fast-plug keys ($LXC_FASTPLUG_OPTIONS), cpulimit, cpuunits, memory, swap and every netN: at once, both;
- a new mpN (a bind mount or a volume): at once on both ("don't try to hotplug over existing mp": a
  changed one stays pending); bind mounts are hot-plugged since pve-container 4.2-3;
- a new devN: at once only since pve-container 6.0.4 ("implement device hotplug", c702167; PVE 9);
  a changed devN never ("don't try to hotplug over existing dev"); on 5.x every devN stays pending;
- a deleted devN or mpN: never (the delete loop hot-deletes only fast-plug keys, swap, cpulimit,
  cpuunits, unusedN and net\\d);
- everything else (features, rootfs, ...): pending until the next start.
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess

from . import pveversion
from .config import ConfigError, parse_property_string

FASTPLUG = {"description", "onboot", "startup", "protection", "hostname", "hookscript", "cores", "tags", "lock"}
HOT_VALUES = {"cpulimit", "cpuunits", "memory", "swap"}
HOT_DELETES = FASTPLUG | {"swap", "cpulimit", "cpuunits"}
DEVICE_HOTPLUG_SINCE = (6, 0, 4)


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def container_version() -> str:
    """The node's pve-container version (what `pveversion -v` prints for it)."""
    return pveversion.release()["pve-container"]


def hotplug_allowed(key: str, conf: dict, version: str | None = None) -> bool:
    """Whether the pending new or changed `key` of `conf` (pct.py's parsed config) is applied to the running
    CT at once, on the node's pve-container `version` (default: the lab's)."""
    version = container_version() if version is None else version
    current = conf["main"]["keys"]
    family = re.match(r"([a-z]+?)(\d+)$", key)
    if key in FASTPLUG or key in HOT_VALUES:
        return True
    if not family:
        return False
    name = family.group(1)
    if name == "net":
        return True
    if name == "mp":
        # Lab deviation: only a bind mount (an absolute path) is hot-plugged; a new storage volume stays pending.
        source = parse_property_string(conf["pending"]["keys"].get(key, ""), "volume").get("volume", "")
        return key not in current and source.startswith("/")
    if name == "dev":
        return key not in current and version_tuple(version) >= DEVICE_HOTPLUG_SINCE
    return False


def hot_delete_allowed(key: str) -> bool:
    """Whether deleting `key` on a running CT takes effect at once (the same on 8 and 9)."""
    return key in HOT_DELETES or bool(re.fullmatch(r"net\d|unused\d+", key))


# --- a new bind mpN into the running CT (PVE::LXC::mountpoint_hotplug: open_tree + move_mount) ---------

SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_MOUNT_SETATTR = 428, 429, 442  # x86_64
OPEN_TREE_CLONE, AT_RECURSIVE, AT_EMPTY_PATH, MOVE_MOUNT_F_EMPTY_PATH = 1, 0x8000, 0x1000, 0x4
MOUNT_ATTR_RDONLY, AT_FDCWD, CLONE_NEWNS = 0x1, -100, 0x00020000


class MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def hotplug_mount(pid: int, source: str, target: str, read_only: bool) -> None:
    """Clone the node's `source` tree, enter the CT's mount namespace and move it onto `target` there."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not os.path.isdir(source):
        raise OSError(f"mount point '{source}' does not exist")
    tree = libc.syscall(SYS_OPEN_TREE, AT_FDCWD, source.encode(), OPEN_TREE_CLONE | os.O_CLOEXEC | AT_RECURSIVE)
    if tree < 0:
        raise OSError(ctypes.get_errno(), f"open_tree {source}")
    try:
        if read_only:
            attr = MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
            if (
                libc.syscall(
                    SYS_MOUNT_SETATTR, tree, b"", AT_EMPTY_PATH | AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr)
                )
                < 0
            ):
                raise OSError(ctypes.get_errno(), "mount_setattr")
        child = os.fork()
        if child == 0:  # setns(CLONE_NEWNS) needs a single-threaded process, and changes its root
            code = 1
            try:
                with open(f"/proc/{pid}/ns/mnt") as ns:
                    if libc.setns(ns.fileno(), CLONE_NEWNS) != 0:  # (os.setns needs Python 3.12)
                        raise OSError(ctypes.get_errno(), "setns")
                os.makedirs(target, exist_ok=True)
                moved = libc.syscall(SYS_MOVE_MOUNT, tree, b"", AT_FDCWD, target.encode(), MOVE_MOUNT_F_EMPTY_PATH)
                code = 0 if moved == 0 else 1
            finally:
                os._exit(code)
        _, status = os.waitpid(child, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise OSError(f"move_mount {source} -> {target} in the container failed")
    finally:
        os.close(tree)


def hotplug_mp(vmid: int, value: str) -> None:
    """A new bind mpN on the running CT, as pct.py's hotplug() calls it; ConfigError when it fails."""
    mp = parse_property_string(value, "volume")
    proc = subprocess.run(["lxc-info", "-n", str(vmid), "-pH"], capture_output=True, text=True, check=False)
    try:
        hotplug_mount(int(proc.stdout.strip()), mp["volume"], mp["mp"], mp.get("ro") in ("1", "true"))
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(str(exc)) from exc
