# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

# Structured input to Proxmox container properties (documented in pct_devices.yml, pct_mounts.yml,
# pct_lxc_devices.yml and pct_settings.yml next to this file).

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean


def pct_devices(paths, mode="0666", gid=""):
    """{devN: '<path>[,gid=<gid>],mode=<mode>'} for the paths, in order."""
    suffix = (",gid=%s" % gid if str(gid) else "") + ",mode=%s" % mode
    return {"dev%d" % n: path + suffix for n, path in enumerate(paths)}


def pct_mounts(mounts):
    """{mpN: '<host_path>,mp=<ct_path>[,ro=1]'} for the bind mounts, in order."""
    found = {}
    for n, mount in enumerate(mounts):
        try:
            value = "%s,mp=%s" % (mount["host_path"], mount["ct_path"])
        except (KeyError, TypeError) as error:
            raise AnsibleFilterError("pct_mounts: each mount needs host_path and ct_path: %r" % (mount,)) from error
        found["mp%d" % n] = value + (",ro=1" if boolean(mount.get("read_only", False)) else "")
    return found


def pct_lxc_devices(paths, majors):
    """Raw lxc lines passing the device nodes through: a cgroup allow per major, a bind mount per path."""
    allow = ["lxc.cgroup2.devices.allow: c %s:* rwm" % major for major in majors]
    mount = ["lxc.mount.entry: %s %s none bind,optional,create=file" % (path, path.lstrip("/")) for path in paths]
    return allow + mount


def pct_settings(settings):
    """The settings an operator set, as Proxmox takes them (tags joined by ';', cpulimit as text); an empty one is
    left out, so that a value set by hand stays."""
    sent = {**settings}
    if "tags" in sent:
        sent["tags"] = ";".join(str(tag) for tag in sent["tags"])
    if "cpulimit" in sent:
        sent["cpulimit"] = str(sent["cpulimit"])
    return {key: value for key, value in sent.items() if value != ""}


class FilterModule:
    def filters(self):
        return {
            "pct_devices": pct_devices,
            "pct_mounts": pct_mounts,
            "pct_lxc_devices": pct_lxc_devices,
            "pct_settings": pct_settings,
        }
