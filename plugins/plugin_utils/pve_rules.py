# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

# The input rules of gpulxc.sglang.pct_container's Proxmox-bound variables, by the rules real pct applies
# (filter gpulxc.sglang.pve_errors, documented in plugins/filter/pve_errors.yml; the Proxmox formats themselves in
# module_utils/_pve_schema.py). Here for the filters that check them: pve_errors and pct_container_plan.

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError
from ansible_collections.gpulxc.sglang.plugins.module_utils import _pve_schema as schema

# GPU N is /dev/nvidiaN; minor 255 is nvidiactl, 254 nvidia-modeset (nvidia-modprobe-utils.h)
GPU_MINOR_MAX = 253


def _text(value):
    return "" if value is None else str(value)


def _integer(name, value, low, high, what):
    if not schema.is_integer(value):
        return [(_text(value), "is not an integer; %s" % what)]
    number = int(value)
    if number < low or (high is not None and number > high):
        return [(_text(value), "is out of range; %s" % what)]
    return []


def vmid(value):
    if not schema.is_integer(value) or not schema.VMID.match(str(int(value))):
        return [
            (
                _text(value),
                "is not a container id: Proxmox's pve-vmid is 100 to 999999999 (set"
                " pct_container_vmid or proxmox_vmid)",
            )
        ]
    return []


def hostname(value):
    text = _text(value)
    if len(text) > schema.HOSTNAME_MAX:
        return [(text[:40] + "...", "is longer than 255 characters (Proxmox's hostname maxLength)")]
    if not schema.DNS_NAME.match(text):
        bad = [label for label in text.split(".") if not re.match(r"^%s$" % schema.DNS_LABEL, label)]
        return [
            (
                bad[0] if bad else text,
                "is not a DNS label: Proxmox's dns-name takes letters, digits and inner hyphens, labels joined by dots",
            )
        ]
    return []


def storage_id(value):
    text = _text(value)
    if len(text) < 2:
        return [(text, "is not a storage ID: Proxmox's pve-storage-id has at least 2 characters")]
    if not schema.STORAGE_ID.match(text):
        return [
            (
                text,
                "is not a storage ID: Proxmox's pve-storage-id is a letter, then letters, digits, '-',"
                " '_' or '.', ending in a letter or digit",
            )
        ]
    return []


def ostemplate(value):
    text = _text(value)
    storage, sep, volume = text.partition(":")
    if not sep or not re.match(r"^vztmpl/[^/]+$", volume):
        return [(text, "is not '<storage>:vztmpl/<file>'")]
    return storage_id(storage)


def positive_size(value):
    if not schema.is_number(value) or float(value) <= 0:
        return [(_text(value), "must be a size in GiB above 0 (Proxmox allocates '<storage>:<size>')")]
    return []


def resource(key):
    low, high = schema.RANGES[key]
    what = "Proxmox's %s is %s" % (key, "%d to %d" % (low, high) if high else "%d or more" % low)
    return lambda value: _integer(key, value, low, high, what)


def property_string(desc, key):
    def check(value):
        if value in (None, ""):
            return []
        if not isinstance(value, str):
            return [(_text(value), "must be a property string such as 'name=eth0,bridge=vmbr0,ip=dhcp'")]
        return [(part, "%s.%s" % (key, reason)) for part, reason in schema.check_property_string(desc, value)]

    return check


def features(value):
    if not isinstance(value, list):
        return [(_text(value), "must be a list of '<feature>=<value>' entries such as 'nesting=1'")]
    found = [(_text(entry), "must be a '<feature>=<value>' string") for entry in value if not isinstance(entry, str)]
    if found:
        return found
    return [
        (part, "features.%s" % reason)
        for part, reason in schema.check_property_string(schema.FEATURES, ",".join(value))
    ]


def mounts(value):
    if not isinstance(value, list):
        return [(_text(value), "must be a list of {host_path, ct_path, read_only}")]
    found = []
    ct_paths = []
    for n, mount in enumerate(value):
        if not isinstance(mount, dict):
            found.append((_text(mount), "entry %d must be a dict {host_path, ct_path, read_only}" % n))
            continue
        for key in sorted(set(mount) - {"host_path", "ct_path", "read_only"}):
            found.append((key, "entry %d: unknown key (host_path, ct_path, read_only)" % n))
        for key in ("host_path", "ct_path"):
            path = _text(mount.get(key))
            if not path.startswith("/"):
                found.append((path, "entry %d: %s must be an absolute path (a bind mount, mp%d)" % (n, key, n)))
            elif "," in path or "=" in path:
                found.append((path, "entry %d: %s must not hold ',' or '=' (mp%d is a property string)" % (n, key, n)))
            elif schema.mp_string_error(path):
                found.append(
                    (path, "entry %d: %s: %s (Proxmox's pve-lxc-mp-string)" % (n, key, schema.mp_string_error(path)))
                )
        if "read_only" in mount and not schema.is_bool(mount["read_only"]):
            found.append((_text(mount["read_only"]), "entry %d: read_only must be a boolean" % n))
        ct_paths.append(_text(mount.get("ct_path")).rstrip("/") or "/")
    for path in sorted({p for p in ct_paths if ct_paths.count(p) > 1}):
        found.append((path, "is the ct_path of more than one mount"))
    if "/" in ct_paths:
        found.append(("/", "ct_path '/' is the rootfs"))
    return found


def gpus(value):
    if value == "all":
        return []
    if not isinstance(value, list):
        return [(_text(value), "must be 'all' or a list of GPU indexes")]
    found = [
        (_text(g), "is not a GPU index (0 to %d, /dev/nvidiaN's minor)" % GPU_MINOR_MAX)
        for g in value
        if not schema.is_integer(g) or not 0 <= int(g) <= GPU_MINOR_MAX
    ]
    indexes = [int(g) for g in value if schema.is_integer(g)]
    found += [(str(g), "is listed more than once") for g in sorted({g for g in indexes if indexes.count(g) > 1})]
    return found


def device_mode(value):
    if not re.match(r"^0[0-7]{3}$", _text(value)):
        return [(_text(value), "is not an octal mode such as '0666' (Proxmox's devN mode is 0[0-7]{3})")]
    return []


def device_gid(value):
    if _text(value) == "":
        return []
    return _integer("gid", value, 0, None, "a group id, 0 or more (Proxmox's devN gid)")


def boolean(value):
    return [] if schema.is_bool(value) else [(_text(value), "is not a boolean")]


def positive_integer(value):
    return _integer("size", value, 1, None, "a whole number of GiB above 0")


RULES = {
    "pct_container_vmid": vmid,
    "pct_container_hostname": hostname,
    "pct_container_ostemplate": ostemplate,
    "pct_container_rootfs_storage": storage_id,
    "pct_container_rootfs_size_gb": positive_size,
    "pct_container_cores": resource("cores"),
    "pct_container_memory_mb": resource("memory"),
    "pct_container_swap_mb": resource("swap"),
    "pct_container_net0": property_string(schema.NET, "net0"),
    "pct_container_features": features,
    "pct_container_unprivileged": boolean,
    "pct_container_onboot": boolean,
    "pct_container_gpus": gpus,
    "pct_container_device_mode": device_mode,
    "pct_container_device_gid": device_gid,
    "pct_container_shm_size_gb": positive_integer,
    "pct_container_mounts": mounts,
}


def pve_errors(values, prefix="pct_container"):
    """One message per refused part: '<prefix>: <variable>: '<part>' <reason> (now <value>).'"""
    if not isinstance(values, dict):
        raise AnsibleFilterError("pve_errors: expects a dict of variable names and values, got %r" % (values,))
    messages = []
    for name, value in values.items():
        rule = RULES.get(name)
        if rule is None:
            raise AnsibleFilterError("pve_errors: no rule for %s" % name)
        for part, reason in rule(value):
            messages.append("%s: %s: '%s' %s (now %s)." % (prefix, name, part, reason, _shown(value)))
    return messages


def _shown(value):
    text = "'%s'" % value if isinstance(value, str) else str(value)
    return text if len(text) <= 200 else text[:200] + "..."
