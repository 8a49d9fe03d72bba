"""The container config schema of pve-container ($confdesc), reduced to what the lab checks.

Lab stand-in (test infrastructure). Values are checked the way Proxmox checks them where a project
role could get them wrong; messages are Proxmox's.
"""

from __future__ import annotations

import os
import random
import re
import stat

from .config import ConfigError, parse_property_string, print_property_string

BOOL_TRUE = {"1", "yes", "on", "true"}
BOOL_FALSE = {"0", "no", "off", "false"}

INT_KEYS = {"cores": (1, 8192), "cpuunits": (0, 500000), "memory": (16, None), "swap": (0, None), "tty": (0, 6)}
BOOL_KEYS = {"onboot", "template", "protection", "unprivileged", "console", "debug"}
STRING_KEYS = {
    "lock", "arch", "ostype", "cpulimit", "hostname", "description", "searchdomain", "nameserver",
    "timezone", "parent", "snaptime", "cmode", "entrypoint", "features", "env", "hookscript", "tags",
    "startup", "rootfs",
}  # fmt: skip
INDEXED = {"net": 32, "mp": 256, "unused": 256, "dev": 256}
READ_ONLY = {"unprivileged"}
FEATURES = {"mount", "nesting", "keyctl", "fuse", "mknod", "force_rw_sys"}
ARCHES = {"amd64", "i386", "arm64", "armhf", "riscv32", "riscv64"}
OSTYPES = {"debian", "devuan", "ubuntu", "centos", "fedora", "opensuse", "archlinux", "alpine", "gentoo",
           "nixos", "unmanaged"}  # fmt: skip
DEV_KEYS = {"path", "deny-write", "gid", "mode", "uid"}
MP_KEYS = {"volume", "mp", "acl", "backup", "mountoptions", "quota", "replicate", "ro", "shared", "size"}
NET_KEYS = {"name", "bridge", "firewall", "gw", "gw6", "hwaddr", "ip", "ip6", "link_down", "mtu", "rate",
            "tag", "trunks", "type", "host-managed"}  # fmt: skip
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


def parse_bool(key: str, value: str) -> str:
    low = value.lower()
    if low in BOOL_TRUE:
        return "1"
    if low in BOOL_FALSE:
        return "0"
    raise ConfigError(f"{key}: type check ('boolean') failed - got '{value}'")


def parse_size_gib(value: str) -> str:
    """`8`, `8G`, `512M` ... as Proxmox's disk size; returns the canonical string stored in size=."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]?)", value)
    if not match:
        raise ConfigError(f"unable to parse size '{value}'")
    return match.group(1) + (match.group(2) or "G")


def verify_dev(key: str, value: str, must_exist: bool = True) -> dict:
    try:
        dev = parse_property_string(value, "path")
    except ConfigError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    unknown = set(dev) - DEV_KEYS
    if unknown:
        raise ConfigError(f"{key}: invalid format - property '{sorted(unknown)[0]}' is not defined in schema")
    path = dev.get("path", "")
    if not path.startswith("/dev/") or "/./" in path or "/../" in path:
        raise ConfigError(f"{key}: {path} is not a valid device path")
    if "mode" in dev and not re.fullmatch(r"0[0-7]{3}", dev["mode"]):
        raise ConfigError(f"{key}: invalid format - mode: value does not match the regex pattern")
    for idkey in ("uid", "gid"):
        if idkey in dev and not dev[idkey].isdigit():
            raise ConfigError(f"{key}: invalid format - {idkey}: type check ('integer') failed - got '{dev[idkey]}'")
    if must_exist:
        device_rdev(path)
    return dev


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


def verify_mp(key: str, value: str) -> str:
    try:
        mp = parse_property_string(value, "volume")
    except ConfigError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    unknown = set(mp) - MP_KEYS
    if unknown:
        raise ConfigError(f"{key}: invalid format - property '{sorted(unknown)[0]}' is not defined in schema")
    if "mp" not in mp:
        raise ConfigError(f"{key}: invalid format - property 'mp' is missing")
    if not mp["mp"].startswith("/"):
        raise ConfigError(f"{key}: invalid format - mp: value does not look like a valid absolute path")
    volume = mp.get("volume", "")
    if not volume.startswith("/"):
        raise ConfigError(f"{key}: the lab supports bind mounts (an absolute host path) only, got '{volume}'")
    return print_property_string(mp, "volume", ("mp",))


def random_hwaddr() -> str:
    # Proxmox's default OUI (BC:24:11) for generated container MACs.
    tail = ":".join(f"{random.randint(0, 255):02X}" for _ in range(3))
    return "BC:24:11:" + tail


def verify_net(key: str, value: str) -> str:
    try:
        net = parse_property_string(value)
    except ConfigError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    unknown = set(net) - NET_KEYS
    if unknown:
        raise ConfigError(f"{key}: invalid format - property '{sorted(unknown)[0]}' is not defined in schema")
    if "name" not in net:
        raise ConfigError(f"{key}: invalid format - property 'name' is missing")
    net.setdefault("hwaddr", random_hwaddr())
    net.setdefault("type", "veth")
    return print_property_string(net, None, ("name",))


def verify_features(value: str) -> str:
    feats = parse_property_string(value)
    for name, val in feats.items():
        if name not in FEATURES:
            raise ConfigError(f"features: invalid format - property '{name}' is not defined in schema")
        parse_bool(f"features.{name}", val)
    return value


def check_value(key: str, value: str, *, must_exist_devices: bool = True) -> str:
    """Return the value as Proxmox stores it, or raise ConfigError with Proxmox's message."""
    if key in READ_ONLY:
        return parse_bool(key, value)
    if key in INT_KEYS:
        low, high = INT_KEYS[key]
        if not re.fullmatch(r"-?\d+", value):
            raise ConfigError(f"{key}: type check ('integer') failed - got '{value}'")
        number = int(value)
        if number < low:
            raise ConfigError(f"{key}: value must have a minimum value of {low}")
        if high is not None and number > high:
            raise ConfigError(f"{key}: value must have a maximum value of {high}")
        return str(number)
    if key in BOOL_KEYS:
        return parse_bool(key, value)
    if key == "arch" and value not in ARCHES:
        raise ConfigError(
            f"arch: value '{value}' does not have a value in the enumeration '{', '.join(sorted(ARCHES))}'"
        )
    if key == "ostype" and value not in OSTYPES:
        raise ConfigError(
            f"ostype: value '{value}' does not have a value in the enumeration '{', '.join(sorted(OSTYPES))}'"
        )
    if key == "hostname" and not re.fullmatch(r"[a-zA-Z0-9]([a-zA-Z0-9\-.]*[a-zA-Z0-9])?", value):
        raise ConfigError(f"hostname: value does not match the regex pattern")  # noqa: F541
    if key == "features":
        return verify_features(value)
    idx = indexed_key(key)
    if idx and idx[0] == "dev":
        verify_dev(key, value, must_exist_devices)
        return value  # stored verbatim, as Proxmox does
    if idx and idx[0] == "mp":
        return verify_mp(key, value)
    if idx and idx[0] == "net":
        return verify_net(key, value)
    return value
