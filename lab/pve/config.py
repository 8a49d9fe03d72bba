"""Proxmox's container config format: /etc/pve/lxc/<vmid>.conf (lab stand-in, test infrastructure).

Follows pve-container's PVE::LXC::Config parse_pct_config / write_pct_config:
- description as percent-encoded `#` comment lines at the top of a section;
- `key: value` lines, written in Perl string-sort order of the keys;
- raw `lxc.*` lines after them, repeated keys kept in their original order;
- `[pve:pending]` (may hold `delete: k1,k2`) and `[snapname]` sections after a blank line.
"""

from __future__ import annotations

import re
import urllib.parse

KEY_RE = re.compile(r"^([a-z][a-z_]*\d*):\s*(.+?)\s*$")
RAW_RE = re.compile(r"^(lxc\.[a-z0-9_\-.]+)(:|\s*=)\s*(.*?)\s*$")
SECTION_RE = re.compile(r"^\[([a-z][a-z0-9_\-]+|pve:pending)\]\s*$")
SKIP_KEYS = {"digest", "description", "pending", "snapshots", "snapname", "lxc"}


class ConfigError(Exception):
    """A config file Proxmox would refuse to read or write."""


def encode_text(text: str) -> str:
    """pve-common encode_text: uri_escape(utf8, "^\x20-\x24\x26-\x39\x3b-\x7e"): escapes controls, % : and non-ASCII."""
    out = []
    for byte in text.encode("utf-8"):
        keep = 0x20 <= byte <= 0x24 or 0x26 <= byte <= 0x39 or 0x3B <= byte <= 0x7E
        out.append(chr(byte) if keep else f"%{byte:02X}")
    return "".join(out)


def decode_text(text: str) -> str:
    return urllib.parse.unquote(text)


def new_section() -> dict:
    return {"keys": {}, "lxc": [], "description": None}


def parse(text: str) -> dict:
    """Parse a config file into {'main': section, 'pending': section, 'snapshots': {name: section}}."""
    conf = {"main": new_section(), "pending": new_section(), "snapshots": {}}
    section = conf["main"]
    descr = ""
    section_name = "main"
    for line in text.splitlines():
        if not line.strip():
            continue
        match = SECTION_RE.match(line)
        if match:
            if descr:
                section["description"] = descr
                descr = ""
            section_name = match.group(1)
            if section_name == "pve:pending":
                section = conf["pending"]
            else:
                section = conf["snapshots"].setdefault(section_name, new_section())
            continue
        if line.startswith("#"):
            descr += decode_text(line[1:]) + "\n"
            continue
        match = RAW_RE.match(line)
        if match:
            section["lxc"].append((match.group(1), match.group(3)))
            continue
        match = KEY_RE.match(line)
        if match:
            key, value = match.group(1), match.group(2)
            if key == "delete" and section_name != "pve:pending":
                raise ConfigError("property 'delete' is only allowed in [pve:pending]")
            if key == "description":
                descr += value
                continue
            section["keys"][key] = value
            continue
        raise ConfigError(f"unable to parse config: {line}")
    if descr:
        section["description"] = descr
    return conf


def _write_section(section: dict) -> str:
    out = []
    if section.get("description"):
        # Perl's split(/\n/) drops trailing empty fields
        out.extend("#" + encode_text(line) for line in section["description"].rstrip("\n").split("\n"))
    for key in sorted(section["keys"]):
        if key in SKIP_KEYS:
            continue
        value = str(section["keys"][key])
        if "\n" in value:
            raise ConfigError(f"detected invalid newline inside property '{key}'")
        out.append(f"{key}: {value}")
    out.extend(f"{key}: {value}" for key, value in section["lxc"])
    return "".join(line + "\n" for line in out)


def is_empty(section: dict) -> bool:
    return not section["keys"] and not section["lxc"] and not section.get("description")


def write(conf: dict) -> str:
    raw = _write_section(conf["main"])
    if not is_empty(conf["pending"]):
        raw += "\n[pve:pending]\n" + _write_section(conf["pending"])
    for name in sorted(conf["snapshots"]):
        raw += f"\n[{name}]\n" + _write_section(conf["snapshots"][name])
    return raw


# --- property strings (PVE::JSONSchema parse_property_string / print_property_string) ----------


def parse_property_string(value: str, default_key: str | None = None) -> dict:
    result: dict[str, str] = {}
    for part in value.split(","):
        if not part:
            continue
        if "=" in part:
            key, val = part.split("=", 1)
        elif default_key:
            key, val = default_key, part
        else:
            raise ConfigError(f"value without key, but schema does not define a default key: '{part}'")
        if key in result:
            raise ConfigError(f"duplicate key in comma-separated list property: {key}")
        result[key] = val
    return result


def print_property_string(data: dict, default_key: str | None = None, required: tuple[str, ...] = ()) -> str:
    """Default key first (bare), then required keys sorted, then the rest sorted."""
    parts = []
    done = set()
    if default_key and default_key in data:
        parts.append(data[default_key])
        done.add(default_key)
    for key in sorted(k for k in data if k in required and k not in done):
        parts.append(f"{key}={data[key]}")
        done.add(key)
    parts.extend(f"{key}={data[key]}" for key in sorted(data) if key not in done)
    return ",".join(parts)
