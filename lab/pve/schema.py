"""The container config schema of pve-container ($confdesc), reduced to what the lab checks.

Lab stand-in (test infrastructure). Values are checked the way Proxmox checks them where a project
role could get them wrong; messages are Proxmox's. The property strings (netN, mpN, devN, features,
rootfs) follow pve-container's format descriptions (src/PVE/LXC/Config.pm $netconf_desc, $mp_desc,
$rootfs_desc, $dev_desc, $features_desc) and pve-common's parse_property_string / check_object /
check_prop / print_property_string (src/PVE/JSONSchema.pm); lab/README.md's fidelity table has the
lines.
"""

from __future__ import annotations

import ipaddress
import os
import random
import re
import stat

from .config import ConfigError

INT_KEYS = {"cores": (1, 8192), "cpuunits": (0, 500000), "memory": (16, None), "swap": (0, None), "tty": (0, 6)}
BOOL_KEYS = {"onboot", "template", "protection", "unprivileged", "console", "debug"}
STRING_KEYS = {
    "lock",
    "arch",
    "ostype",
    "cpulimit",
    "hostname",
    "description",
    "searchdomain",
    "nameserver",
    "timezone",
    "parent",
    "snaptime",
    "cmode",
    "entrypoint",
    "features",
    "env",
    "hookscript",
    "tags",
    "startup",
    "rootfs",
}
INDEXED = {"net": 32, "mp": 256, "unused": 256, "dev": 256}
READ_ONLY = {"unprivileged"}
FEATURES = {"mount", "nesting", "keyctl", "fuse", "mknod", "force_rw_sys"}
ARCHES = {"amd64", "i386", "arm64", "armhf", "riscv32", "riscv64"}
OSTYPES = {
    "debian",
    "devuan",
    "ubuntu",
    "centos",
    "fedora",
    "opensuse",
    "archlinux",
    "alpine",
    "gentoo",
    "nixos",
    "unmanaged",
}
HOTPLUG_FAST = {"description", "onboot", "startup", "protection", "hostname", "hookscript", "cores", "tags", "lock"}


def indexed_key(key: str) -> tuple[str, int] | None:
    match = re.fullmatch(r"(net|mp|unused|dev)(\d+)", key)
    if not match:
        return None
    prefix, index = match.group(1), int(match.group(2))
    if index >= INDEXED[prefix]:
        return None
    return prefix, index


def is_known_key(key: str) -> bool:
    return key in INT_KEYS or key in BOOL_KEYS or key in STRING_KEYS or indexed_key(key) is not None


def parse_size_gib(value: str) -> str:
    """`8`, `8G`, `512M` ... as Proxmox's disk size; returns the canonical string stored in size=."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]?)", value)
    if not match:
        raise ConfigError(f"unable to parse size '{value}'")
    return match.group(1) + (match.group(2) or "G")


def device_rdev(path: str) -> tuple[str, int, int, int]:
    """PVE::LXC::Tools::get_device_mode_and_rdev: ('c'|'b', major, minor, mode) or Proxmox's error."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ConfigError(f"Device {path} does not exist") from None
    if stat.S_ISCHR(st.st_mode):
        kind = "c"
    elif stat.S_ISBLK(st.st_mode):
        kind = "b"
    else:
        raise ConfigError(f"{path} is not a device")
    return kind, os.major(st.st_rdev), os.minor(st.st_rdev), stat.S_IMODE(st.st_mode)


def random_hwaddr() -> str:
    # Proxmox's default OUI (BC:24:11) for generated container MACs.
    tail = ":".join(f"{random.randint(0, 255):02X}" for _ in range(3))
    return "BC:24:11:" + tail


# --- formats (pve-common JSONSchema.pm register_format) ---------------------------------------------


def _dns_name(value: str) -> None:
    # pve_verify_dns_name
    label = r"([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)"
    if not re.fullmatch(rf"({label}\.)*{label}", value):
        raise ConfigError("value does not look like a valid DNS name")


def _mac_addr(value: str) -> None:
    # pve_verify_mac_addr: unicast only (the I/G bit clear)
    if not re.fullmatch(r"[a-f0-9][02468ace](?::[a-f0-9]{2}){5}", value, re.IGNORECASE):
        raise ConfigError("value does not look like a valid unicast MAC address")


def _ip(value: str, version: int) -> bool:
    try:
        return ipaddress.ip_address(value).version == version
    except ValueError:
        return False


def _cidr(value: str, version: int) -> bool:
    address, sep, mask = value.partition("/")
    if not sep or not mask.isdigit() or not _ip(address, version):
        return False
    return int(mask) <= (32 if version == 4 else 128)


def _ipv4(value: str) -> None:
    if not _ip(value, 4):
        raise ConfigError("value does not look like a valid IPv4 address")


def _ipv6(value: str) -> None:
    if not _ip(value, 6):
        raise ConfigError("value does not look like a valid IPv6 address")


def _ipv4_config(value: str) -> None:
    if value not in ("dhcp", "manual") and not _cidr(value, 4):
        raise ConfigError("value does not look like a valid ipv4 network configuration")


def _ipv6_config(value: str) -> None:
    if value not in ("auto", "dhcp", "manual") and not _cidr(value, 6):
        raise ConfigError("value does not look like a valid ipv6 network configuration")


def _mp_string(value: str) -> None:
    # pve-container verify_lxc_mp_string
    if re.search(r"/\.\.?/", value) or re.search(r"/\.\.?$", value) or value.startswith("../"):
        raise ConfigError(f"{value} contains illegal character sequences")


def _dev_string(value: str) -> None:
    # pve-container verify_lxc_dev_string
    if re.search(r"/\.\.?(?:/|$)", value) or not value.startswith("/dev/"):
        raise ConfigError(f"{value} is not a valid device path")


SIZE_RE = re.compile(r"(\d+(\.\d+)?)([KMGT](?:iB)?)?")


def _disk_size(value: str) -> None:
    if not SIZE_RE.fullmatch(value):
        raise ConfigError(f"value does not look like a valid disk size: {value}")


def parse_size(value: str) -> int:
    """JSONSchema parse_size: bytes (no unit: bytes; K/M/G/T with an optional iB multiply by 1024^n)."""
    match = SIZE_RE.fullmatch(value)
    if not match:
        raise ConfigError(f"invalid size: {value}")
    number = float(match.group(1))
    unit = (match.group(3) or "")[:1]
    factor = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}[unit]
    return int(number * factor)


def format_size(size: int) -> str:
    """JSONSchema format_size: the largest unit that divides the size."""
    for unit in ("", "K", "M", "G"):
        if size % 1024:
            return f"{size}{unit}"
        size //= 1024
    return f"{size}T"


# --- property string descriptions (pve-container src/PVE/LXC/Config.pm) ---------------------------------

MOUNT_OPTION = r"(discard|lazytime|noatime|nodev|noexec|nosuid)"

ROOTFS_DESC: dict[str, dict] = {
    "volume": {"type": "string", "default_key": True, "format": _mp_string},
    "size": {"type": "string", "format": _disk_size, "disk_size": True, "optional": True},
    "acl": {"type": "boolean", "optional": True},
    "mountoptions": {"type": "string", "pattern": rf"{MOUNT_OPTION}(;{MOUNT_OPTION})*", "optional": True},
    "idmap": {
        "type": "string",
        "pattern": r"^(?:passthrough|[ug]:[0-9]+:[0-9]+:[1-9][0-9]*(?:;[ug]:[0-9]+:[0-9]+:[1-9][0-9]*)*)$",
        "optional": True,
    },
    "ro": {"type": "boolean", "optional": True},
    "quota": {"type": "boolean", "optional": True},
    "replicate": {"type": "boolean", "optional": True},
    "shared": {"type": "boolean", "optional": True},
}
MP_DESC: dict[str, dict] = {
    **ROOTFS_DESC,
    "backup": {"type": "boolean", "optional": True},
    "mp": {"type": "string", "format": _mp_string},
    "keepattrs": {"type": "boolean", "optional": True},
}
NET_DESC: dict[str, dict] = {
    "type": {"type": "string", "enum": ["veth"], "optional": True},
    "name": {"type": "string", "pattern": r"[-_.\w\d]+"},
    "bridge": {"type": "string", "pattern": r"[-_.\w\d]+", "optional": True},
    "hwaddr": {"type": "string", "format": _mac_addr, "optional": True},
    "mtu": {"type": "integer", "minimum": 64, "maximum": 65535, "optional": True},
    "ip": {"type": "string", "format": _ipv4_config, "optional": True},
    "gw": {"type": "string", "format": _ipv4, "optional": True},
    "ip6": {"type": "string", "format": _ipv6_config, "optional": True},
    "gw6": {"type": "string", "format": _ipv6, "optional": True},
    "firewall": {"type": "boolean", "optional": True},
    "tag": {"type": "integer", "minimum": 1, "maximum": 4094, "optional": True},
    "trunks": {"type": "string", "pattern": r"\d+(?:;\d+)*", "optional": True},
    "rate": {"type": "number", "optional": True},
    "link_down": {"type": "boolean", "optional": True},
    "host-managed": {"type": "boolean", "optional": True},
}
DEV_DESC: dict[str, dict] = {
    "path": {"type": "string", "default_key": True, "format": _dev_string, "optional": True},
    "mode": {"type": "string", "pattern": r"0[0-7]{3}", "optional": True},
    "uid": {"type": "integer", "minimum": 0, "optional": True},
    "gid": {"type": "integer", "minimum": 0, "optional": True},
    "deny-write": {"type": "boolean", "optional": True},
}
FEATURES_DESC: dict[str, dict] = {
    "mount": {"type": "string", "pattern": r"[a-zA-Z0-9_; ]+", "optional": True},
    **{name: {"type": "boolean", "optional": True} for name in ("nesting", "keyctl", "fuse", "mknod", "force_rw_sys")},
}
UNUSED_DESC: dict[str, dict] = {"volume": {"type": "string", "default_key": True}}


class FormatError(ConfigError):
    """parse_property_string's `format error`, with the per-key errors (path -> message)."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("format error")
        self.errors = errors

    def __str__(self) -> str:
        return "format error\n" + "".join(f"{path}: {msg}\n" for path, msg in self.errors.items()).rstrip("\n")


def parse_boolean(value: str) -> str | None:
    """JSONSchema parse_boolean: 1|on|yes|true and 0|off|no|false, any case."""
    if re.fullmatch(r"1|on|yes|true", value, re.IGNORECASE):
        return "1"
    if re.fullmatch(r"0|off|no|false", value, re.IGNORECASE):
        return "0"
    return None


def _is_integer(value: str) -> bool:
    return re.fullmatch(r"[+-]?\d+", value) is not None


def _is_number(value: str) -> bool:
    return re.fullmatch(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", value) is not None


def check_prop(path: str, desc: dict, value: str | None, errors: dict[str, str]) -> None:
    """JSONSchema check_prop for a scalar: optional, type, format, pattern, length, range, enum."""
    if value is None:
        if not desc.get("optional"):
            errors[path] = "property is missing and it is not optional"
        return
    kind = desc.get("type")
    if kind == "boolean" and value not in ("0", "1"):
        errors[path] = f"type check ('boolean') failed - got '{value}'"
        return
    if kind == "integer" and not _is_integer(value):
        errors[path] = f"type check ('integer') failed - got '{value}'"
        return
    if kind == "number" and not _is_number(value):
        errors[path] = f"type check ('number') failed - got '{value}'"
        return
    if "format" in desc:
        try:
            desc["format"](value)
        except FormatError as exc:
            errors[path] = f"invalid format - {exc}"
            return
        except ConfigError as exc:
            errors[path] = f"invalid format - {exc}"
            return
    if "pattern" in desc and not re.fullmatch(desc["pattern"], value):
        errors[path] = "value does not match the regex pattern"
        return
    if "maxLength" in desc and len(value) > desc["maxLength"]:
        errors[path] = f"value may only be {desc['maxLength']} characters long"
        return
    if _is_number(value):
        if "maximum" in desc and float(value) > desc["maximum"]:
            errors[path] = f"value must have a maximum value of {desc['maximum']}"
            return
        if "minimum" in desc and float(value) < desc["minimum"]:
            errors[path] = f"value must have a minimum value of {desc['minimum']}"
            return
    if "enum" in desc and value not in desc["enum"]:
        errors[path] = f"value '{value}' does not have a value in the enumeration '{', '.join(desc['enum'])}'"


def parse_property_string(desc: dict, data: str, path: str = "") -> dict[str, str]:
    """JSONSchema parse_property_string: `k=v` parts (booleans to 1/0), the default key's bare value,
    then check_object: unknown keys refused, required keys present, each value checked."""
    res: dict[str, str] = {}
    default_key = None
    for part in data.split(","):
        if not part.strip():
            continue
        match = re.fullmatch(r"([^=]+)=(.+)", part, re.DOTALL)
        if match:
            key, value = match.group(1), match.group(2)
            if key in res:
                raise ConfigError(f"duplicate key in comma-separated list property: {key}")
            if key not in desc:
                raise ConfigError(f"invalid key in comma-separated list property: {key}")
            if desc[key].get("type") == "boolean":
                value = parse_boolean(value) or value
            res[key] = value
        elif "=" not in part:
            if default_key:
                raise ConfigError(f"duplicate key in comma-separated list property: {default_key}")
            default_key = next((k for k, d in desc.items() if d.get("default_key")), None)
            if default_key is None:
                raise ConfigError("value without key, but schema does not define a default key")
            if default_key in res:
                raise ConfigError(f"duplicate key in comma-separated list property: {default_key}")
            res[default_key] = part
        else:
            raise ConfigError("missing key in comma-separated list property")
    errors: dict[str, str] = {}
    for key, kdesc in desc.items():
        check_prop(f"{path}.{key}" if path else key, kdesc, res.get(key), errors)
    if errors:
        raise FormatError(errors)
    return res


def print_property_string(desc: dict, data: dict[str, str], skip: tuple[str, ...] = ()) -> str:
    """JSONSchema print_property_string: the default key bare, then the required keys sorted, then the
    rest sorted; disk sizes with format_size."""

    def text(key: str) -> str:
        value = data[key]
        if desc.get(key, {}).get("disk_size"):
            return format_size(parse_size(value))
        if "," in value:
            raise ConfigError(f"illegal value with commas for {key}")
        return value

    parts: list[str] = []
    done = set(skip)
    default_key = next((k for k, d in desc.items() if d.get("default_key")), None)
    if default_key and default_key in data and default_key not in done:
        parts.append(text(default_key))
        done.add(default_key)
    for key in sorted(data):
        if key not in done and key in desc and not desc[key].get("optional"):
            parts.append(f"{key}={text(key)}")
            done.add(key)
    for key in sorted(data):
        if key not in done:
            parts.append(f"{key}={text(key)}")
            done.add(key)
    return ",".join(parts)


PROPERTY_STRINGS = {"net": NET_DESC, "mp": MP_DESC, "dev": DEV_DESC, "unused": UNUSED_DESC}


def property_desc(key: str) -> dict | None:
    if key == "rootfs":
        return ROOTFS_DESC
    if key == "features":
        return FEATURES_DESC
    idx = indexed_key(key)
    return PROPERTY_STRINGS[idx[0]] if idx else None


def canonical(key: str, value: str) -> str:
    """The value as Proxmox writes it when a pending change is applied (vmconfig_apply_pending and
    vmconfig_hotplug_pending): netN re-printed by print_lxc_network (a missing hwaddr generated, type
    veth), a bind/device mpN by print_ct_mountpoint; every other key (devN, features, rootfs) verbatim."""
    idx = indexed_key(key)
    if idx and idx[0] == "net":
        net = parse_property_string(NET_DESC, value)
        net["type"] = "veth"
        net.setdefault("hwaddr", random_hwaddr())
        return print_property_string(NET_DESC, net)
    if idx and idx[0] == "mp":
        mp = parse_property_string(MP_DESC, value)
        if "size" in mp:
            mp["size"] = str(parse_size(mp["size"]))
        return print_property_string(MP_DESC, mp)
    return value


def verify_dev(key: str, value: str, must_exist: bool = True) -> dict:
    """parse_device, then get_device_mode_and_rdev for the path (update_pct_config)."""
    dev = parse_property_string(DEV_DESC, value, key)
    if "path" not in dev:
        raise ConfigError(f"Path is not defined for passthrough device {key}")
    if must_exist:
        device_rdev(dev["path"])
    return dev


def _verify_mp(key: str, value: str) -> None:
    mp = parse_property_string(property_desc(key), value, key)
    if "size" in mp:
        parse_size(mp["size"])
    volume = mp.get("volume", "")
    if key != "rootfs" and not volume.startswith("/"):
        raise ConfigError(f"{key}: the lab supports bind mounts (an absolute host path) only, got '{volume}'")


LOCKS = [
    "backup",
    "create",
    "destroyed",
    "disk",
    "fstrim",
    "migrate",
    "mounted",
    "rollback",
    "snapshot",
    "snapshot-delete",
]

# Top-level keys with a plain schema (pve-container $confdesc).
TOP_DESC: dict[str, dict] = {
    "hostname": {"type": "string", "format": _dns_name, "maxLength": 255},
    "arch": {"type": "string", "enum": sorted(ARCHES)},
    "ostype": {"type": "string", "enum": sorted(OSTYPES)},
    "cmode": {"type": "string", "enum": ["shell", "console", "tty"]},
    "lock": {"type": "string", "enum": LOCKS},
    "cpulimit": {"type": "number", "minimum": 0, "maximum": 8192},
}


def check_value(key: str, value: str, *, must_exist_devices: bool = True) -> str:
    """Return the value as Proxmox stores it in [pve:pending], or raise ConfigError with Proxmox's
    message (`<key>: <what>`, as JSONSchema validate reports it)."""
    if key in READ_ONLY or key in BOOL_KEYS:
        # get_options: a boolean option is 1/0 after parse_boolean ("unable to parse boolean option")
        parsed = parse_boolean(value) if value != "" else "1"
        if parsed is None:
            raise ConfigError("unable to parse boolean option")
        return parsed
    if key in INT_KEYS:
        low, high = INT_KEYS[key]
        if not _is_integer(value):
            raise ConfigError(f"{key}: type check ('integer') failed - got '{value}'")
        number = int(value)
        if number < low:
            raise ConfigError(f"{key}: value must have a minimum value of {low}")
        if high is not None and number > high:
            raise ConfigError(f"{key}: value must have a maximum value of {high}")
        return value
    errors: dict[str, str] = {}
    if key in TOP_DESC:
        check_prop(key, {**TOP_DESC[key], "optional": True}, value, errors)
    desc = property_desc(key)
    if desc is not None and not errors:
        try:
            parse_property_string(desc, value, key)
        except ConfigError as exc:
            errors[key] = f"invalid format - {exc}"
    if errors:
        raise ConfigError("\n".join(f"{k}: {v}" for k, v in errors.items()))
    idx = indexed_key(key)
    if idx and idx[0] == "dev":
        verify_dev(key, value, must_exist_devices)
    elif key == "rootfs" or (idx and idx[0] == "mp"):
        _verify_mp(key, value)
    return value
