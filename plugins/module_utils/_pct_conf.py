# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Proxmox VE container config (/etc/pve/lxc/<vmid>.conf): parse, compare, splice raw lxc lines.

PRIVATE: for this collection's modules only. The format follows pve-container's parse_pct_config /
write_pct_config: description comments, `key: value` lines, raw `lxc.*` lines, then `[pve:pending]`
and snapshot sections, each after a blank line.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

KEY_RE = re.compile(r"^([a-z][a-z_]*\d*):\s*(.+?)\s*$")
RAW_RE = re.compile(r"^(lxc\.[a-z0-9_\-.]+)(:|\s*=)\s*(.*?)\s*$")
SECTION_RE = re.compile(r"^\[([a-z][a-z0-9_\-]+|pve:pending)\]\s*$", re.IGNORECASE)

# Property-string keys: their default (bare) key, and keys Proxmox fills in that a request may omit.
PROPERTY_KEYS = {
    "features": (None, ()),
    "rootfs": ("volume", ()),
    "net": (None, ("hwaddr", "type")),
    "mp": ("volume", ()),
    "dev": ("path", ()),
}
BOOL_VALUES = {"1": "1", "yes": "1", "on": "1", "true": "1", "0": "0", "no": "0", "off": "0", "false": "0"}
# Boolean sub-keys of each property string (pve-container Config.pm's format descriptions). Proxmox
# accepts any of BOOL_VALUES' spellings and writes netN and mpN back with 1/0 (devN, features and
# rootfs as sent): compared as booleans, whichever Proxmox kept.
BOOL_SUBKEYS = {
    "features": {"nesting", "keyctl", "fuse", "mknod", "force_rw_sys"},
    "net": {"firewall", "link_down", "host-managed"},
    "mp": {"acl", "ro", "quota", "replicate", "shared", "backup", "keepattrs"},
    "rootfs": {"acl", "ro", "quota", "replicate", "shared"},
    "dev": {"deny-write"},
}


class PctConfError(Exception):
    pass


def parse(text):
    """{'main': {key: value}, 'lxc': [(key, value)], 'pending': {key: value}, 'snapshots': [names]}."""
    conf = {"main": {}, "lxc": [], "pending": {}, "snapshots": []}
    section = "main"
    description = []
    for line in text.splitlines():
        if line.startswith("#"):
            # the description: pve-container parse_pct_config decodes each comment line (decode_text)
            if section == "main":
                description.append(unquote(line[1:]))
            continue
        if not line.strip():
            continue
        match = SECTION_RE.match(line)
        if match:
            section = "pending" if match.group(1).lower() == "pve:pending" else "snapshot"
            if section == "snapshot":
                conf["snapshots"].append(match.group(1))
            continue
        if section == "snapshot":
            continue
        match = RAW_RE.match(line)
        if match:
            if section == "main":
                conf["lxc"].append((match.group(1), match.group(3)))
            continue
        match = KEY_RE.match(line)
        if not match:
            raise PctConfError("unable to parse config line: %s" % line)
        if not match.group(2).strip():
            # `features: ` (what `pct set --features ''` writes): no value, as Proxmox reads it
            continue
        conf[section][match.group(1)] = match.group(2)
    if description and "description" not in conf["main"]:
        conf["main"]["description"] = "\n".join(description)
    return conf


def pending_deletes(conf):
    return [k for k in re.split(r"[,;\s]+", conf["pending"].get("delete", "").lstrip("!")) if k]


def effective(conf):
    """The config as it will be after the next start: current values, pending values, pending deletes."""
    keys = dict(conf["main"])
    keys.update({k: v for k, v in conf["pending"].items() if k != "delete"})
    for key in pending_deletes(conf):
        keys.pop(key, None)
    return keys


def family(key):
    match = re.match(r"^(net|mp|dev|unused)\d+$", key)
    return match.group(1) if match else key


def parse_property_string(value, default_key=None):
    result = {}
    for part in str(value).split(","):
        if not part:
            continue
        if "=" in part:
            name, val = part.split("=", 1)
        elif default_key:
            name, val = default_key, part
        else:
            raise PctConfError("value without key in '%s'" % value)
        result[name] = val
    return result


def normalize(key, value):
    """A comparable form of a config value: dicts for property strings, '1'/'0' for booleans."""
    if isinstance(value, bool):
        return "1" if value else "0"
    spec = PROPERTY_KEYS.get(family(key))
    if spec:
        parsed = parse_property_string(value, spec[0])
        bools = BOOL_SUBKEYS.get(family(key), set())
        return {k: BOOL_VALUES.get(str(v).lower(), v) if k in bools else v for k, v in parsed.items()}
    if key in ("onboot", "protection", "unprivileged", "template", "console", "debug"):
        return BOOL_VALUES.get(str(value).lower(), str(value))
    special = NORMALIZE.get(key)
    return special(value) if special else str(value)


def _number(value):
    try:
        return "%g" % float(value)
    except ValueError:
        return str(value)


def split_list(value):
    """pve-common PVE::Tools::split_list: items separated by NUL, ';', ',' or white space."""
    return [item for item in re.split(r"[\0;,\s]+", str(value)) if item]


def unique_tags(value):
    """Tags as pve-guest-common get_unique_tags writes them with the default tag-style: lower-cased, sorted
    case-insensitively, duplicates dropped, joined by ';'."""
    if isinstance(value, (list, tuple)):
        value = ";".join(str(v) for v in value)
    return ";".join(sorted({tag.lower() for tag in split_list(value)}))


# Settings Proxmox rewrites or reads in a form of its own (pve-container update_pct_config).
NORMALIZE = {
    "tags": unique_tags,
    # verify_nameserver_list / verify_searchdomain_list: split_list, joined by a space
    "nameserver": lambda value: " ".join(split_list(value)),
    "searchdomain": lambda value: " ".join(split_list(value)),
    # pve-common pve_parse_startup_order: order (bare or order=), up, down
    "startup": lambda value: parse_property_string(value, "order"),
    "cpulimit": _number,
    # a description is written as comment lines, read back without the last newline
    "description": lambda value: str(value).rstrip("\n"),
}

# pve-container Config.pm: MAX_MOUNT_POINTS and MAX_DEVICES (mp0..mp255, dev0..dev255).
MAX_INDEX = 256
IDENTITY = {"dev": "path", "mp": "mp"}


def mount_type(value):
    """pve-container classify_mountpoint: a volume starting with '/' is a bind mount ('device' under
    /dev/), anything else a storage volume (<storage>:<volume>)."""
    volume = parse_property_string(value, "volume").get("volume", "")
    if volume.startswith("/"):
        return "device" if volume.startswith("/dev/") else "bind"
    return "volume"


def identity(fam, value):
    """What names a devN (its path) or an mpN (its mount point in the container), whatever its index."""
    return parse_property_string(value, PROPERTY_KEYS[fam][0]).get(IDENTITY[fam], "")


def plan_indexed(fam, current, desired, *, owned=(), exclusive=False, reserved=()):
    """Place the wanted devN/mpN values (a list) among the container's keys of that family.

    A wanted value whose path (devN) or mount point (mpN) is already there keeps its index; a new one takes
    the lowest index no current key uses. A current key nobody asks for goes when it is owned (its path
    matches one of the `owned` patterns) or `exclusive` is set, else it stays; a storage-backed mpN
    always stays (Proxmox detaches its volume as unusedN, whose delete destroys the data).
    Keys in `reserved` (set elsewhere) are neither matched nor given.
    Returns ({key: value} wanted, [keys deleted], {key: why it stays}).
    """
    have = {k: v for k, v in current.items() if family(k) == fam and k not in reserved}
    by_id = {}
    for key in sorted(have, key=lambda k: int(k[len(fam) :])):
        by_id.setdefault(identity(fam, have[key]), key)
    patterns = [re.compile(p) for p in owned]
    wanted = {}
    seen = set()
    for value in desired:
        name = identity(fam, value)
        if not name:
            raise PctConfError("%s: '%s' names no %s" % (fam, value, IDENTITY[fam]))
        if name in seen:
            raise PctConfError("%s: %s is asked for twice" % (fam, name))
        seen.add(name)
        key = by_id.get(name)
        if key and fam == "mp" and mount_type(have[key]) == "volume" and mount_type(value) != "volume":
            volume = parse_property_string(have[key], "volume").get("volume")
            why = "a bind mount cannot replace it (mount it elsewhere, or detach the volume yourself)"
            raise PctConfError("%s: %s is the storage volume %s mounted at %s; %s" % (fam, key, volume, name, why))
        if key is None:
            taken = set(have) | set(wanted) | set(reserved)
            key = next("%s%d" % (fam, n) for n in range(MAX_INDEX) if "%s%d" % (fam, n) not in taken)
        wanted[key] = value
    deleted, kept = [], {}
    for key, value in have.items():
        if key in wanted:
            continue
        name = identity(fam, value)
        if fam == "mp" and mount_type(value) == "volume":
            volume = parse_property_string(value, "volume")["volume"]
            kept[key] = "storage volume %s at %s: never detached" % (volume, name)
        elif exclusive or any(p.search(name) for p in patterns):
            deleted.append(key)
        else:
            kept[key] = "%s, not in the inventory: kept" % name
    return wanted, sorted(deleted), kept


def is_empty(value):
    """An empty setting (features from an empty list): Proxmox cannot hold it, so it means no key."""
    return value is None or (isinstance(value, (str, list, dict)) and not value)


def matches(key, desired, current):
    """Whether the current value satisfies the desired one (Proxmox-filled sub-keys may be absent)."""
    if current is None:
        return False
    want, have = normalize(key, desired), normalize(key, current)
    if isinstance(want, dict):
        filled = PROPERTY_KEYS.get(family(key), (None, ()))[1]
        have = {k: v for k, v in have.items() if k in want or k not in filled}
    return want == have


def to_pct_value(key, desired, current):
    """The value to send for key: net keeps its current MAC unless one is asked for; a setting Proxmox
    rewrites itself (tags, startup ...) as asked."""
    if key in NORMALIZE:
        return str(desired)
    value = normalize(key, desired)
    if family(key) == "net" and current is not None:
        have = parse_property_string(current)
        if "hwaddr" not in value and "hwaddr" in have:
            value["hwaddr"] = have["hwaddr"]
    if isinstance(value, dict):
        default_key = PROPERTY_KEYS[family(key)][0]
        parts = [value[default_key]] if default_key in value else []
        parts += ["%s=%s" % (k, v) for k, v in value.items() if k != default_key]
        return ",".join(parts)
    return value


def render(keys, lxc):
    """Text of a main section as Proxmox writes it (for diffs)."""
    lines = ["%s: %s" % (k, keys[k]) for k in sorted(keys)]
    lines += ["%s: %s" % (k, v) for k, v in lxc]
    return "".join(line + "\n" for line in lines)


def splice_raw_lines(text, remove, add):
    """Rewrite the main section's raw lxc lines: drop those in `remove`, append `add` after the main
    section's last line. Everything else (keys, pending, snapshots) is kept byte for byte."""
    lines = text.splitlines(True)
    end = len(lines)
    for index, line in enumerate(lines):
        if SECTION_RE.match(line.rstrip("\n")):
            end = index
            break
    main, rest = lines[:end], lines[end:]
    kept = []
    removing = list(remove)
    for line in main:
        match = RAW_RE.match(line.rstrip("\n"))
        if match and (match.group(1), match.group(3)) in removing:
            removing.remove((match.group(1), match.group(3)))
            continue
        kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    if kept and not kept[-1].endswith("\n"):
        kept[-1] += "\n"
    kept += ["%s: %s\n" % (k, v) for k, v in add]
    if rest:
        kept.append("\n")
    return "".join(kept + rest)


def plan_raw_lines(current, desired, exclusive_patterns):
    """(remove, add) for raw lines: desired lines missing are added; lines matching an exclusive
    pattern that are not desired are removed."""
    patterns = [re.compile(p) for p in exclusive_patterns]
    want = list(desired)
    remove = []
    for entry in current:
        if entry in want:
            want.remove(entry)
            continue
        text = "%s: %s" % entry
        if any(p.search(text) for p in patterns):
            remove.append(entry)
    return remove, want


def parse_raw_line(line):
    match = RAW_RE.match(line.strip())
    if not match:
        raise PctConfError("not a raw lxc line (lxc.<key>: <value>): %s" % line)
    return match.group(1), match.group(3)


def gpu_indexes(conf):
    """The N of each /dev/nvidiaN a parsed config passes through: devN (current and pending) and the lxc
    passthrough mode's bind mounts (lxc.mount.entry: /dev/nvidiaN dev/nvidiaN ...)."""
    paths = [
        identity("dev", value)
        for section in (conf["main"], conf["pending"])
        for key, value in section.items()
        if family(key) == "dev"
    ]
    paths += [value.split()[0] for key, value in conf["lxc"] if key == "lxc.mount.entry" and value.split()]
    return sorted({int(gpu.group(1)) for gpu in (re.fullmatch(r"/dev/nvidia([0-9]+)", path) for path in paths) if gpu})


# lxc.cgroup.devices.allow / lxc.cgroup2.devices.allow: "c 195:* rwm", "c 195:0 rw", "a" ...
CGROUP_ALLOW_RE = re.compile(r"^c\s+([0-9]+|\*):")


def passes_nvidia(conf, majors):
    """Whether a parsed config passes an NVIDIA device node through: a devN (current or pending) or a raw
    lxc.mount.entry of a /dev/nvidia* node, or a raw device cgroup rule allowing one of the NVIDIA drivers'
    character majors (195, and nvidia-uvm's and nvidia-caps' from /proc/devices)."""
    paths = [
        identity("dev", value)
        for section in (conf["main"], conf["pending"])
        for key, value in section.items()
        if family(key) == "dev"
    ]
    paths += [value.split()[0] for key, value in conf["lxc"] if key == "lxc.mount.entry" and value.split()]
    if any(path.startswith("/dev/nvidia") for path in paths):
        return True
    for key, value in conf["lxc"]:
        if re.fullmatch(r"lxc\.cgroup2?\.devices\.allow", key):
            match = CGROUP_ALLOW_RE.match(value.strip())
            if match and (match.group(1) == "*" or int(match.group(1)) in majors):
                return True
    return False
