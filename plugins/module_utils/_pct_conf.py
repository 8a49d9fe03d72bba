# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Proxmox VE container config (/etc/pve/lxc/<vmid>.conf): parse, compare, splice raw lxc lines.

PRIVATE: for this collection's modules only. The format follows pve-container's parse_pct_config /
write_pct_config: description comments, `key: value` lines, raw `lxc.*` lines, then `[pve:pending]`
and snapshot sections, each after a blank line.
"""

from __future__ import annotations

import re

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
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
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
    return str(value)


def is_empty(value):
    """An empty setting (features from an empty list): Proxmox cannot hold it, so it means no key."""
    return value is None or (isinstance(value, (str, list, dict)) and not value)


def matches(key, desired, current):
    """Whether the current value satisfies the desired one (Proxmox-filled sub-keys may be absent)."""
    if current is None:
        return False
    want, have = normalize(key, desired), normalize(key, current)
    if isinstance(want, dict):
        filled = PROPERTY_KEYS[family(key)][1]
        have = {k: v for k, v in have.items() if k in want or k not in filled}
    return want == have


def to_pct_value(key, desired, current):
    """The value to send for key: net keeps its current MAC unless one is asked for."""
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
