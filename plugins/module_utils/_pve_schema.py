# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rules Proxmox VE applies to a container's settings, as data, so that input is refused before anything
changes with the same verdict `pct` would give.

PRIVATE: for this collection's plugins only. Each rule follows the real source (cited in the role's README and
lab/README.md): pve-common src/PVE/JSONSchema.pm (parse_property_string, check_prop, parse_boolean, the
formats pve-vmid, pve-storage-id, dns-name, mac-addr, ipv4/ipv6 config, disk-size) and pve-container
src/PVE/LXC/Config.pm ($confdesc, $netconf_desc, $features_desc, $dev_desc, $mp_desc,
verify_lxc_mp_string, verify_lxc_dev_string).

check_property_string() returns a list of (part, reason): the part of the value Proxmox refuses and why.
"""

from __future__ import annotations

import ipaddress
import re

# JSONSchema.pm parse_boolean
TRUE = re.compile(r"^(1|on|yes|true)$", re.IGNORECASE)
FALSE = re.compile(r"^(0|off|no|false)$", re.IGNORECASE)
# JSONSchema.pm pve_verify_vmid (and pve-vmid's minimum 100, maximum 999_999_999)
VMID = re.compile(r"^[1-9][0-9]{2,8}$")
# JSONSchema.pm parse_id ('pve-storage-id'): at least 2 characters
STORAGE_ID = re.compile(r"^[a-z][a-z0-9\-_.]*[a-z0-9]$", re.IGNORECASE)
# JSONSchema.pm pve_verify_dns_name
DNS_LABEL = r"([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)"
DNS_NAME = re.compile(r"^(%s\.)*%s$" % (DNS_LABEL, DNS_LABEL))
HOSTNAME_MAX = 255  # Config.pm $confdesc hostname maxLength
# Config.pm $confdesc: cores 1..8192, memory >= 16, swap >= 0 (integers, MiB)
RANGES = {"cores": (1, 8192), "memory": (16, None), "swap": (0, None)}


def is_bool(value):
    return isinstance(value, bool) or bool(TRUE.match(str(value)) or FALSE.match(str(value)))


def is_integer(value):
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or bool(re.match(r"^[+-]?[0-9]+$", str(value)))


def is_number(value):
    if isinstance(value, bool):
        return False
    return isinstance(value, (int, float)) or bool(
        re.match(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$", str(value))
    )


def _ip(value, version):
    try:
        return ipaddress.ip_address(value).version == version
    except ValueError:
        return False


def _cidr(value, version):
    address, sep, mask = value.partition("/")
    return bool(sep) and mask.isdigit() and _ip(address, version) and int(mask) <= (32 if version == 4 else 128)


def _mac(value):
    if not re.match(r"^[a-f0-9][02468ace](:[a-f0-9]{2}){5}$", value, re.IGNORECASE):
        return "value does not look like a valid unicast MAC address"
    return None


def _ipv4_config(value):
    return (
        None
        if value in ("dhcp", "manual") or _cidr(value, 4)
        else ("value does not look like a valid ipv4 network configuration")
    )


def _ipv6_config(value):
    return (
        None
        if value in ("auto", "dhcp", "manual") or _cidr(value, 6)
        else ("value does not look like a valid ipv6 network configuration")
    )


def _ipv4(value):
    return None if _ip(value, 4) else "value does not look like a valid IPv4 address"


def _ipv6(value):
    return None if _ip(value, 6) else "value does not look like a valid IPv6 address"


def mp_string_error(value):
    """Config.pm verify_lxc_mp_string."""
    if re.search(r"/\.\.?/", value) or re.search(r"/\.\.?$", value) or value.startswith("../"):
        return "%s contains illegal character sequences" % value
    return None


def dev_string_error(value):
    """Config.pm verify_lxc_dev_string."""
    if re.search(r"/\.\.?(/|$)", value) or not value.startswith("/dev/"):
        return "%s is not a valid device path" % value
    return None


MOUNT_OPTION = r"(discard|lazytime|noatime|nodev|noexec|nosuid)"

# Config.pm $netconf_desc (6.1.10)
NET = {
    "type": {"type": "string", "enum": ["veth"]},
    "name": {"type": "string", "pattern": r"[-_.\w\d]+", "required": True},
    "bridge": {"type": "string", "pattern": r"[-_.\w\d]+"},
    "hwaddr": {"type": "string", "format": _mac},
    "mtu": {"type": "integer", "minimum": 64, "maximum": 65535},
    "ip": {"type": "string", "format": _ipv4_config},
    "gw": {"type": "string", "format": _ipv4},
    "ip6": {"type": "string", "format": _ipv6_config},
    "gw6": {"type": "string", "format": _ipv6},
    "firewall": {"type": "boolean"},
    "tag": {"type": "integer", "minimum": 1, "maximum": 4094},
    "trunks": {"type": "string", "pattern": r"\d+(?:;\d+)*"},
    "rate": {"type": "number", "minimum": 0},
    "link_down": {"type": "boolean"},
    "host-managed": {"type": "boolean"},
}
# Config.pm $features_desc
FEATURES = {
    "mount": {"type": "string", "pattern": r"[a-zA-Z0-9_; ]+"},
    **{name: {"type": "boolean"} for name in ("nesting", "keyctl", "fuse", "mknod", "force_rw_sys")},
}
# Config.pm $dev_desc
DEV = {
    "path": {"type": "string", "default_key": True, "format": dev_string_error},
    "mode": {"type": "string", "pattern": r"0[0-7]{3}"},
    "uid": {"type": "integer", "minimum": 0},
    "gid": {"type": "integer", "minimum": 0},
    "deny-write": {"type": "boolean"},
}
# Config.pm $rootfs_desc + $mp_desc's mp, backup, keepattrs
MP = {
    "volume": {"type": "string", "default_key": True, "format": mp_string_error, "required": True},
    "mp": {"type": "string", "format": mp_string_error, "required": True},
    "size": {"type": "string", "pattern": r"(\d+(\.\d+)?)([KMGT](iB)?)?"},
    "mountoptions": {"type": "string", "pattern": r"%s(;%s)*" % (MOUNT_OPTION, MOUNT_OPTION)},
    **{name: {"type": "boolean"} for name in ("acl", "ro", "quota", "replicate", "shared", "backup", "keepattrs")},
}


def _type_error(kind, value):
    checks = {"boolean": is_bool, "integer": is_integer, "number": is_number}
    if kind in checks and not checks[kind](value):
        return "type check ('%s') failed - got '%s'" % (kind, value)
    return None


def _range_error(desc, value):
    if desc.get("type") not in ("integer", "number"):
        return None
    if "minimum" in desc and float(value) < desc["minimum"]:
        return "value must have a minimum value of %s" % desc["minimum"]
    if "maximum" in desc and float(value) > desc["maximum"]:
        return "value must have a maximum value of %s" % desc["maximum"]
    return None


def check_value(desc, value):
    """JSONSchema check_prop for one scalar: the reason Proxmox refuses it, or None."""
    error = _type_error(desc.get("type"), value)
    if error is None and "format" in desc:
        error = desc["format"](value)
        error = error and "invalid format - %s" % error
    if error is None and "pattern" in desc and not re.match(r"^(?:%s)$" % desc["pattern"], value):
        error = "value does not match the regex pattern"
    if error is None:
        error = _range_error(desc, value)
    if error is None and "enum" in desc and value not in desc["enum"]:
        error = "value '%s' does not have a value in the enumeration '%s'" % (value, ", ".join(desc["enum"]))
    return error


def check_property_string(desc, text):
    """JSONSchema parse_property_string then check_object: [(part, reason)] for what Proxmox refuses."""
    errors = []
    seen = {}
    default_key = next((k for k, d in desc.items() if d.get("default_key")), None)
    for part in str(text).split(","):
        if not part.strip():
            continue
        match = re.match(r"^([^=]+)=(.+)$", part, re.DOTALL)
        if match:
            key, value = match.group(1), match.group(2)
        elif "=" in part:
            errors.append((part, "missing key in comma-separated list property"))
            continue
        elif default_key is None:
            errors.append((part, "value without key, but schema does not define a default key"))
            continue
        else:
            key, value = default_key, part
        if key in seen:
            errors.append((part, "duplicate key in comma-separated list property: %s" % key))
            continue
        if key not in desc:
            errors.append((part, "invalid key in comma-separated list property: %s" % key))
            continue
        seen[key] = value
        reason = check_value(desc[key], value)
        if reason:
            errors.append((part, "%s: %s" % (key, reason)))
    for key, kdesc in desc.items():
        if kdesc.get("required") and key not in seen:
            errors.append((key, "%s: property is missing and it is not optional" % key))
    return errors
