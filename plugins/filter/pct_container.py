# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

# The decisions of role gpulxc.sglang.pct_container (documented in pct_container_plan.yml next to this file): its
# preflight reads the node and the cluster, then asks this filter what they and the run's other containers mean.
# Each message names the variable to change and how; their order is the order the role has always reported them in.

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError
from ansible.module_utils.compat.version import LooseVersion
from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.gpulxc.sglang.plugins.plugin_utils.jinja_values import jinja_float as _float
from ansible_collections.gpulxc.sglang.plugins.plugin_utils.jinja_values import jinja_int as _int
from ansible_collections.gpulxc.sglang.plugins.filter.pct import pct_devices, pct_lxc_devices, pct_mounts, pct_settings
from ansible_collections.gpulxc.sglang.plugins.plugin_utils.pve_rules import RULES, pve_errors

PREFIX = "pct_container: "
# pve-container 5.0.7 (PVE 8.1 with its updates) brought devN passthrough
DEVN_SINCE = "5.0.7"
TAG = r"^[a-zA-Z0-9_][a-zA-Z0-9_+.-]*$"  # pve-tag (any case: tag-style lower-cases it)
STARTUP_PART = r"^((order=)?[0-9]+|up=[0-9]+|down=[0-9]+)$"  # pve_parse_startup_order
CPULIMIT = r"^[0-9]+([.][0-9]+)?$"
PROTECTION = ("true", "false", "yes", "no", "1", "0", "on", "off")
NAMESERVER = r"^([0-9]{1,3}[.]){3}[0-9]{1,3}$|^[0-9a-fA-F:.]*:[0-9a-fA-F:.]*(%[a-zA-Z0-9._-]+)?$"
SEARCHDOMAIN = r"^([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?[.])*[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$"
# the Proxmox settings an operator sets (pct_container_<name>), sent only when not empty (pct_settings)
SETTINGS = ("tags", "description", "startup", "protection", "nameserver", "searchdomain", "cpulimit")
DESCRIPTION_MAX = 8192  # Proxmox's description maxLength (8 KiB)
# The role's variables the plan reads (roles/pct_container/meta/argument_specs.yml documents each).
VARIABLES = (
    "pct_container_node",
    "pct_container_vmid",
    "pct_container_hostname",
    "pct_container_ostemplate",
    "pct_container_rootfs_storage",
    "pct_container_rootfs_size_gb",
    "pct_container_cores",
    "pct_container_memory_mb",
    "pct_container_swap_mb",
    "pct_container_net0",
    "pct_container_features",
    "pct_container_unprivileged",
    "pct_container_onboot",
    "pct_container_gpus",
    "pct_container_gpu_passthrough",
    "pct_container_device_mode",
    "pct_container_device_gid",
    "pct_container_nvidia_caps",
    "pct_container_shm_size_gb",
    "pct_container_memory_headroom_gb",
    "pct_container_mounts",
    "pct_container_gpus_shared",
    "pct_container_tags",
    "pct_container_description",
    "pct_container_startup",
    "pct_container_protection",
    "pct_container_nameserver",
    "pct_container_searchdomain",
    "pct_container_cpulimit",
    "pct_container_boot_unit",
    "pct_container_nvidia_modprobe",
    "pct_container_driver_version_file",
    "pct_container_require_open_kernel_module",
    "pct_container_driver_check",
    "pct_container_driver_install",
    "pct_container_driver_installer_dir",
    "pct_container_exclusive_devices",
    "pct_container_exclusive_mounts",
    "pct_container_restart_allowed",
)
# The node unit's inputs (node_devices.yml): one a node, so every container of the run on the node sets them alike.
NODE_UNIT = ("pct_container_boot_unit", "pct_container_nvidia_modprobe", "pct_container_nvidia_caps")
# The NVIDIA nodes every GPU container needs besides its /dev/nvidiaN: the control node and unified memory; MIG's
# capability nodes (pct_container_nvidia_caps), each with the nvidia-modprobe call that makes it.
CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
CAPS = ("/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-caps/nvidia-cap2")
CAP_CALLS = (
    ["-f", "/proc/driver/nvidia/capabilities/mig/config"],
    ["-f", "/proc/driver/nvidia/capabilities/mig/monitor"],
)
# the nodes a GPU passed through is (a devN whose path is /dev/nvidiaN)
GPU_DEVN = r"^(path=)?/dev/nvidia[0-9]+(,|$)"


def _bool(value):
    return boolean(value, strict=False)


def _lower(flag):
    return str(flag).lower()


def _skipped(result):
    return bool((result or {}).get("skipped", False))


def _matches(pattern, text):
    return re.match(pattern, str(text)) is not None


def _is_sequence(value):
    """Jinja's sequence test: a length and items (a dict passes, as in Jinja)."""
    return hasattr(value, "__len__") and hasattr(value, "__getitem__")


def _get(mapping, key, default=None):
    """A host's variable, or the default where the host or the variable is not there."""
    try:
        return mapping[key]
    except (KeyError, TypeError):
        return default


class _Plan:
    """One container's plan: `role` its variables (VARIABLES), `facts` what the preflight read and noted."""

    def __init__(self, role, facts, hostvars, play_hosts, inventory_hosts):
        missing = [name for name in VARIABLES if name not in role]
        if missing:
            raise AnsibleFilterError("pct_container_plan: the role's variables lack %s" % ", ".join(missing))
        self.v, self.hostvars = role, hostvars
        self.play_hosts, self.inventory_hosts = list(play_hosts), list(inventory_hosts)
        self.host = facts["inventory_hostname"]
        self.node = role["pct_container_node"]
        self.probe = facts.get("pct_container_probe_result") or {"skipped": True}
        self.installer_stat = facts.get("pct_container_installer_stat_result") or {"skipped": True}
        self.cluster = facts.get("pct_container_cluster_result") or {"skipped": True}
        self.node_read = not _skipped(self.probe)
        self.gpu_node_read = self.node_read and role["pct_container_gpu_passthrough"] != "none"
        # the preflight's notes of the node's GPUs and driver (set where the node's GPUs were read)
        self.gpu_indexes = facts.get("_pct_container_gpu_indexes")
        self.host_gpu_indexes = facts.get("_pct_container_host_gpu_indexes") or []
        self.driver = (facts.get("_pct_container_host_driver") or "") if self.gpu_node_read else ""
        self.installer = facts.get("_pct_container_installer") or ""

    def node_calls(self):
        """The nvidia-modprobe calls that make the NVIDIA nodes the node lacks, as its boot unit does
        (node_devices.yml): -c255 is /dev/nvidiactl, -c N only /dev/nvidiaN of a GPU the driver lists, -u -c0
        nvidia-uvm and nvidia-uvm-tools, -f MIG's nodes."""
        have = [node["path"] for node in self.probe.get("device_nodes") or []]
        calls = [] if "/dev/nvidiactl" in have else [["-c255"]]
        # Ansible's difference of two lists: their order, as the calls always came
        calls += [["-c%s" % n] for n in self.host_gpu_indexes if "/dev/nvidia%s" % n not in have]
        if any(node not in have for node in CONTROL_NODES[1:]):
            calls.append(["-u", "-c0"])
        if _bool(self.v["pct_container_nvidia_caps"]):
            calls += [call for node, call in zip(CAPS, CAP_CALLS, strict=True) if node not in have]
        return calls

    def peers(self):
        """The run's containers on this node that pass GPUs (this one too), in play order: they share its node
        unit, and the first of them still in the run does the node's own steps for all (node_devices.yml)."""
        return [
            host
            for host in self.play_hosts
            if _get(self.hostvars[host], "pct_container_node", "") == self.node
            and _get(self.hostvars[host], "pct_container_gpu_passthrough", "devices") != "none"
        ]

    def gpu_overlaps(self):
        """The GPUs of this container that another container of the node asks for (the run's: what they ask for)
        or passes through now (the node's other CT configs, read by pct_info: devN or raw lines)."""
        if self.gpu_indexes is None:
            return ""
        mine, shared = self.gpu_indexes, _bool(self.v["pct_container_gpus_shared"])
        vmid, found, asked = _int(self.v["pct_container_vmid"]), [], []
        for host in self.play_hosts:
            if host == self.host:
                continue
            hv = self.hostvars[host]
            other = _int(_get(hv, "pct_container_vmid", _get(hv, "proxmox_vmid", 0)))
            if _get(hv, "pct_container_node", "") != self.node or other == vmid:
                continue
            asked.append(other)
            # Ansible's intersect and difference filters: set order, as the messages always had it
            common = list(set(_get(hv, "_pct_container_gpu_indexes", []) or []) & set(mine))
            if common and not (shared and _bool(_get(hv, "pct_container_gpus_shared", False))):
                found.append("CT %s (%s) asks for GPU %s" % (other, host, ", ".join(map(str, common))))
        users = self.probe.get("gpu_users") or {}
        for key in sorted(users, key=lambda k: str(k).lower()):
            if _int(key) in asked:
                continue  # what the run asks for it supersedes its config
            owners = [
                host
                for host in self.inventory_hosts
                if _get(self.hostvars[host], "pct_container_node") == self.node
                and _get(self.hostvars[host], "proxmox_vmid") == _int(key)
            ]
            # outside the inventory: this container's own setting decides
            other_shared = not owners or _bool(_get(self.hostvars[owners[0]], "pct_container_gpus_shared", False))
            common = list(set(users[key]) & set(mine))
            if common and not (shared and other_shared):
                owner = owners[0] if owners else "not in the inventory"
                found.append("CT %s (%s) passes GPU %s through now" % (key, owner, ", ".join(map(str, common))))
        return "; ".join(found)

    def node_disagreement(self):
        """The node unit's inputs on which the run's GPU containers of this node differ, each container's value."""
        names = NODE_UNIT if _bool(self.v["pct_container_boot_unit"]) else NODE_UNIT[:1]
        peers, found = self.peers(), []
        for name in names:
            mine = self.v[name] if name == "pct_container_nvidia_modprobe" else _bool(self.v[name])
            values = []
            for host in peers:
                value = _get(self.hostvars[host], name, mine)
                values.append(str(value) if name == "pct_container_nvidia_modprobe" else _lower(_bool(value)))
            if len(set(values)) > 1:
                pairs = ", ".join("%s %s" % pair for pair in zip(peers, values, strict=True))
                found.append("%s (%s)" % (name, pairs))
        return "; ".join(found)

    def cluster_errors(self):
        """Where the cluster's API (pve_cluster_info) says the node or the vmid is not what the inventory says."""
        c = self.cluster
        if _skipped(c):
            return []
        v, guest = self.v, c.get("guest") or {}
        kind = guest.get("type", "lxc")
        what = {"qemu": "VM", "lxc": "CT"}.get(kind, guest.get("type", ""))
        vmid, there = v["pct_container_vmid"], guest.get("node", "")
        found = []
        if not c["node_member"]:
            members = ", ".join(member["name"] for member in c["members"])
            found.append(
                "%spct_container_node '%s' (Proxmox node '%s', pct_container_pve_node) is not a member of the cluster"
                " %s that the API answers for (members: %s). Set pct_container_node to the inventory host of a member"
                " and pct_container_pve_node to its name."
                % (PREFIX, self.node, c["node"], (c.get("cluster") or {}).get("name", ""), members)
            )
        if c["node_member"] and c["placement"] == "migrated":
            found.append(
                "%sCT %s ('%s') is on node %s, not on %s: it was migrated there. Set pct_container_node to the"
                " inventory host of %s (and pct_container_pve_node to %s), or migrate it back (pct migrate %s %s)."
                " Nothing was changed."
                % (
                    PREFIX,
                    vmid,
                    guest.get("name", "") or "name not reported",
                    there,
                    c["node"],
                    there,
                    there,
                    vmid,
                    c["node"],
                )
            )
        if c["node_member"] and c["placement"] == "taken":
            found.append(
                "%svmid %s is already used on node %s by %s '%s' (pct_container_hostname is '%s'): set"
                " pct_container_vmid (or proxmox_vmid) to a free id (pvesh get /cluster/nextid). Nothing was changed."
                % (PREFIX, vmid, there, what, guest.get("name", ""), v["pct_container_hostname"])
            )
        return found

    def errors(self):
        """The role's input rules and what the node can take, in the order the role reports them."""
        v, node, probe = self.v, self.node, self.probe
        found = pve_errors({name: v[name] for name in RULES})
        if node not in self.hostvars:
            found.append(
                "%sset pct_container_node to the inventory name of the container's Proxmox node (now '%s')."
                % (PREFIX, node)
            )
        found += self._storage_errors()
        unprivileged = probe.get("unprivileged") if self.node_read else None
        if unprivileged is not None and _bool(unprivileged) != _bool(v["pct_container_unprivileged"]):
            found.append(
                "%sCT %s exists and is %s, but pct_container_unprivileged is %s: Proxmox cannot change that after"
                " creation (unprivileged is read-only). Set pct_container_unprivileged to %s, or destroy and"
                " re-create the CT."
                % (
                    PREFIX,
                    v["pct_container_vmid"],
                    "unprivileged" if unprivileged else "privileged",
                    _lower(_bool(v["pct_container_unprivileged"])),
                    _lower(_bool(unprivileged)),
                )
            )
        needed = (_int(v["pct_container_shm_size_gb"]) + _int(v["pct_container_memory_headroom_gb"])) * 1024
        if _int(v["pct_container_memory_mb"]) < needed:
            found.append(
                "%spct_container_memory_mb (%s) must cover /dev/shm (pct_container_shm_size_gb = %s) plus"
                " pct_container_memory_headroom_gb (%s): at least %s MiB, because the files in /dev/shm are charged"
                " to the container's memory."
                % (
                    PREFIX,
                    v["pct_container_memory_mb"],
                    v["pct_container_shm_size_gb"],
                    v["pct_container_memory_headroom_gb"],
                    needed,
                )
            )
        template = probe.get("template") or {}
        if self.node_read and probe.get("status") == "absent" and not template.get("exists"):
            found.append(
                "%sthe template pct_container_ostemplate ('%s') is not on %s (%s). Download it there (pveam update"
                " && pveam download local <template>) or set pct_container_ostemplate to one that `pveam list local`"
                " shows."
                % (
                    PREFIX,
                    v["pct_container_ostemplate"],
                    node,
                    template.get("error") or "%s is missing" % template.get("path", ""),
                )
            )
        found += self._node_errors()
        found += self._settings_errors()
        disagreement = self.node_disagreement()
        if disagreement:
            found.append(
                "%sthe containers of node %s in this run disagree on its boot unit (one a node): %s. Set these once"
                " for all containers of the node (the group_vars of its containers)." % (PREFIX, node, disagreement)
            )
        return found

    def _storage_errors(self):
        """The storage the rootfs of a container to create goes on (pct_info: pvesm status --content rootdir)."""
        v, node = self.v, self.node
        storage = (self.probe.get("storage") or {}) if self.node_read else {}
        name, wanted = v["pct_container_rootfs_storage"], int(_float(v["pct_container_rootfs_size_gb"]) * 1048576)
        choices = ", ".join(storage.get("rootdir_storages") or [])
        found = []
        if storage.get("error"):
            found.append("%scannot read the storages of %s: %s." % (PREFIX, node, storage["error"]))
        if "name" in storage and not storage.get("error") and not storage.get("exists"):
            found.append(
                "%spct_container_rootfs_storage ('%s') is not a storage on %s (pvesm status). Set it to one that"
                " holds containers there: %s." % (PREFIX, name, node, choices)
            )
        if "name" in storage and storage.get("exists") and not storage.get("rootdir"):
            found.append(
                "%spct_container_rootfs_storage ('%s') on %s does not hold containers (Proxmox: storage '%s' does"
                " not support container directories; a default install's local has no rootdir content, or it is"
                " disabled). Set it to one that does: %s, or add rootdir to the storage's content (pvesm set"
                " <storage> --content ...,rootdir)." % (PREFIX, name, node, name, choices)
            )
        if storage.get("rootdir") and storage.get("status") != "active":
            found.append(
                "%spct_container_rootfs_storage ('%s') on %s is %s (pvesm status): it cannot take the rootfs."
                % (PREFIX, name, node, storage.get("status", ""))
            )
        if storage.get("rootdir") and storage.get("status") == "active" and storage["avail_kib"] < wanted:
            found.append(
                "%spct_container_rootfs_storage ('%s') on %s has %s GiB available; pct_container_rootfs_size_gb asks"
                " for %s. Free space there, ask for less, or pick another storage."
                % (
                    PREFIX,
                    name,
                    node,
                    round(storage.get("avail_kib", 0) / 1048576, 1),
                    v["pct_container_rootfs_size_gb"],
                )
            )
        return found

    def _node_errors(self):
        """What the node's Proxmox VE, device nodes and NVIDIA driver allow, and the GPUs other containers have."""
        v, node, probe, driver = self.v, self.node, self.probe, self.driver
        devices = v["pct_container_gpu_passthrough"] == "devices"
        pve = (probe.get("pve") or {}) if self.node_read else {}
        pve_container = pve.get("container") or ""
        modprobe = (probe.get("files") or {}).get(v["pct_container_nvidia_modprobe"], {"exists": True, "mode": "0755"})
        found = []
        if self.gpu_node_read and devices and not pve_container:
            found.append(
                "%scannot tell which Proxmox VE %s runs: %s. pct_container needs a Proxmox VE node (pveversion -v"
                " lists its pve-container)." % (PREFIX, node, pve.get("error", ""))
            )
        if self.gpu_node_read and devices and pve_container and LooseVersion(pve_container) < LooseVersion(DEVN_SINCE):
            found.append(
                "%s%s runs Proxmox VE %s with pve-container %s, which has no devN passthrough"
                " (pct_container_gpu_passthrough: devices needs pve-container 5.0.7 or later, PVE 8.1 with its"
                " updates). Upgrade the node (apt update && apt full-upgrade), or set pct_container_gpu_passthrough"
                " to 'lxc'." % (PREFIX, node, pve.get("version", ""), pve_container)
            )
        if self.node_read and not (modprobe.get("exists") and _int(str(modprobe.get("mode"))[1:2]) % 2 == 1):
            found.append(
                "%spct_container_nvidia_modprobe (%s) is not an executable file on %s; the boot unit runs it to create"
                " the NVIDIA device nodes before Proxmox starts the containers. Install nvidia-modprobe (the .run"
                " driver installs it; Debian packages it as nvidia-modprobe), set pct_container_nvidia_modprobe to its"
                " path, or set pct_container_boot_unit to false." % (PREFIX, v["pct_container_nvidia_modprobe"], node)
            )
        if self.gpu_node_read and not driver:
            found.append(
                "%son %s, no NVIDIA kernel driver answers (%s is missing or unreadable): install the host driver"
                " first (a prerequisite, see the README), or set pct_container_gpu_passthrough to 'none'."
                % (PREFIX, node, v["pct_container_driver_version_file"])
            )
        if (
            self.gpu_node_read
            and driver
            and not (probe.get("driver") or {}).get("open")
            and _bool(v["pct_container_require_open_kernel_module"])
        ):
            found.append(
                "%son %s, the NVIDIA driver %s is the proprietary kernel module; Blackwell GPUs need the open one"
                " (install with --kernel-module-type=open), or set pct_container_require_open_kernel_module to false."
                % (PREFIX, node, driver)
            )
        found += self._gpu_errors()
        return found

    def _gpu_errors(self):
        v, node, probe, driver = self.v, self.node, self.probe, self.driver
        mine, host_gpus = self.gpu_indexes or [], self.host_gpu_indexes
        found = []
        missing = list(set(mine) - set(host_gpus))
        if self.gpu_node_read and driver and (not host_gpus or missing):
            found.append(
                "%son %s, pct_container_gpus asks for GPUs %s but the node has %d GPU(s) (%s as its driver lists"
                " them): ask for fewer, or check the host driver." % (PREFIX, node, missing, len(host_gpus), host_gpus)
            )
        ct_driver = ((probe.get("container") or {}).get("nvidia_userspace") or "") if self.node_read else ""
        if (
            self.gpu_node_read
            and driver
            and _bool(v["pct_container_driver_check"])
            and not _bool(v["pct_container_driver_install"])
            and probe.get("status") != "stopped"
            and ct_driver != driver
        ):
            found.append(
                "%sthe NVIDIA userspace in CT %s is '%s' but the kernel driver on %s is %s; they must be equal"
                ' ("Driver/library version mismatch" otherwise). Set pct_container_driver_install to true (with'
                " NVIDIA-Linux-x86_64-%s.run in pct_container_driver_installer_dir on the node), install %s in the"
                " container yourself, or set pct_container_driver_check to false."
                % (PREFIX, v["pct_container_vmid"], ct_driver or "not installed", node, driver, driver, driver)
            )
        if not _skipped(self.installer_stat) and not self.installer_stat["stat"]["exists"]:
            found.append(
                "%s%s is not on %s: download the NVIDIA driver %s installer (the same version as the node's kernel"
                " module) into pct_container_driver_installer_dir (%s)."
                % (PREFIX, self.installer, node, driver, v["pct_container_driver_installer_dir"])
            )
        overlaps = self.gpu_overlaps()
        if overlaps:
            found.append(
                "%son %s, CT %s (%s) asks for GPU(s) %s and another container of the node has some of them: %s. Give"
                " them different pct_container_gpus, or set pct_container_gpus_shared: true on both to share the"
                " GPUs." % (PREFIX, node, v["pct_container_vmid"], self.host, ", ".join(map(str, mine)), overlaps)
            )
        return found

    def _settings_errors(self):
        """The Proxmox settings operators set (config.yml sends those that are not empty), by Proxmox's formats."""
        v, found = self.v, []
        tags = v["pct_container_tags"]
        if isinstance(tags, str) or not _is_sequence(tags) or any(not _matches(TAG, tag) for tag in tags):
            found.append(
                "%spct_container_tags must be a list of Proxmox tags, each [a-z0-9_][a-z0-9_+.-]* (now %s)."
                % (PREFIX, tags)
            )
        startup = str(v["pct_container_startup"])
        if startup and (
            startup == "0" or any(not _matches(STARTUP_PART, p) for p in startup.split(",") if not _matches("^ *$", p))
        ):
            found.append(
                "%spct_container_startup must be Proxmox's startup order '[order=]N[,up=S][,down=S]' (now '%s')."
                % (PREFIX, startup)
            )
        cpulimit = str(v["pct_container_cpulimit"])
        if cpulimit and (not _matches(CPULIMIT, cpulimit) or _float(cpulimit) > 8192):
            found.append(
                "%spct_container_cpulimit must be empty or a number from 0 (no limit) to 8192 (now '%s')."
                % (PREFIX, cpulimit)
            )
        protection = str(v["pct_container_protection"])
        if protection and protection.lower() not in PROTECTION:
            found.append("%spct_container_protection must be empty, true or false (now '%s')." % (PREFIX, protection))
        description = v["pct_container_description"]
        if len(description) > DESCRIPTION_MAX:
            found.append(
                "%spct_container_description has %d characters; Proxmox takes at most %d."
                % (PREFIX, len(description), DESCRIPTION_MAX)
            )
        for name, pattern, what in (
            ("pct_container_nameserver", NAMESERVER, "IP addresses"),
            ("pct_container_searchdomain", SEARCHDOMAIN, "DNS names"),
        ):
            value = v[name]
            if any(not _matches(pattern, part) for part in re.sub("[,;]", " ", str(value)).split()):
                found.append("%s%s must be %s separated by spaces (now '%s')." % (PREFIX, name, what, value))
        return found


def _variables(role, who):
    """The role's variables as a dict: given so, or as the values of VARIABLES in their order (what
    query('ansible.builtin.vars', *_pct_container_plan_variables) returns)."""
    if isinstance(role, (list, tuple)):
        if len(role) != len(VARIABLES):
            raise AnsibleFilterError(
                "%s: expects the values of the role's %d variables (_pct_container_plan_variables), got %d"
                % (who, len(VARIABLES), len(role))
            )
        return dict(zip(VARIABLES, role, strict=True))
    if not isinstance(role, dict):
        raise AnsibleFilterError("%s: expects the role's variables as a dict or a list of their values" % who)
    return role


def pct_container_plan(role, facts, hostvars, play_hosts, inventory_hosts):
    """The container's plan: what its checks found (cluster_errors, errors) and what its later phases need."""
    role = _variables(role, "pct_container_plan")
    if not isinstance(facts, dict):
        raise AnsibleFilterError("pct_container_plan: expects the role's variables and the facts as dicts")
    plan = _Plan(role, facts, hostvars, play_hosts, inventory_hosts)
    return {
        "cluster_errors": plan.cluster_errors(),
        "errors": plan.errors(),
        "gpu_overlaps": plan.gpu_overlaps(),
        "node_peers": plan.peers(),
        "node_calls": plan.node_calls() if plan.gpu_node_read else [],
    }


def pct_container_node_steps(plan, play_hosts, me):
    """Who does the node's own steps for the run's containers of the node (node_devices.yml): the first of the plan's
    node_peers still in the run (one that failed before leads nothing), else the container itself; and the
    nvidia-modprobe calls this container makes (the leader's, none for the others)."""
    leader = next((host for host in plan["node_peers"] if host in play_hosts), me)
    return {"leader": leader, "calls": plan["node_calls"] if leader == me else []}


def _gpu_paths(v, gpu_indexes):
    """The /dev paths passed through: the control and unified-memory nodes (and MIG's) at fixed indexes first, then
    the GPUs asked for, so that a longer GPU list only adds devN keys (a changed devN waits for a restart)."""
    if v["pct_container_gpu_passthrough"] == "none":
        return []
    caps = list(CAPS) if _bool(v["pct_container_nvidia_caps"]) else []
    return list(CONTROL_NODES) + caps + ["/dev/nvidia%s" % n for n in gpu_indexes or []]


def _unique(values):
    return list(dict.fromkeys(values))


def pct_container_config(role, facts):
    """The arguments of config.yml's pct_config call: the config, the devN and mpN, what the role owns exclusively,
    the raw lxc lines and the lxc lines it owns."""
    v = _variables(role, "pct_container_config")
    probe = facts.get("pct_container_probe_result") or {}
    paths = _gpu_paths(v, facts.get("_pct_container_gpu_indexes"))
    config = {
        "hostname": v["pct_container_hostname"],
        "cores": _int(v["pct_container_cores"]),
        "memory": _int(v["pct_container_memory_mb"]),
        "swap": _int(v["pct_container_swap_mb"]),
        "onboot": _bool(v["pct_container_onboot"]),
        "features": ",".join(v["pct_container_features"]),
    }
    if v["pct_container_net0"]:
        config["net0"] = v["pct_container_net0"]
    # the Proxmox settings operators set: an empty one is not managed (a value set by hand stays)
    config.update(pct_settings({key: v["pct_container_" + key] for key in SETTINGS}))
    devices = {}
    if v["pct_container_gpu_passthrough"] == "devices":
        devices = pct_devices(paths, mode=v["pct_container_device_mode"], gid=v["pct_container_device_gid"])
    # majors of the passed-through nodes, read from the node by pct_info (nvidia-uvm's is dynamic)
    nodes = facts.get("_pct_container_device_nodes") or []
    majors = sorted(_unique(node["major"] for node in nodes if node["path"] in paths))
    # the allow lines the role owns: those of an NVIDIA major, or of a major no driver holds now (nvidia-uvm's is
    # dynamic: after a driver update or a changed module load order the line of its old major goes)
    char_devices = probe.get("char_devices") or []
    if char_devices:
        others = _unique(str(dev["major"]) for dev in char_devices if not re.match("^nvidia", str(dev["name"])))
        own_majors = "(?!(?:%s):)[0-9]+" % "|".join(others)
    else:
        own_majors = "(%s)" % ("|".join(map(str, majors)) or "195")
    shm = "lxc.mount.entry: tmpfs dev/shm tmpfs size=%dG,nosuid,nodev,create=dir 0 0" % _int(
        v["pct_container_shm_size_gb"]
    )
    raw = pct_lxc_devices(paths, majors) if v["pct_container_gpu_passthrough"] == "lxc" else []
    exclusive = ["dev"] if _bool(v["pct_container_exclusive_devices"]) else []
    exclusive += ["mp"] if _bool(v["pct_container_exclusive_mounts"]) else []
    # no net0: no network interface at all (an air-gapped container), so no netN may stay
    exclusive += [] if v["pct_container_net0"] else ["net"]
    return {
        "config": config,
        "devices": list(devices.values()),
        "mounts": list(pct_mounts(v["pct_container_mounts"]).values()),
        "exclusive": exclusive,
        "lxc": [shm, *raw],
        "lxc_exclusive": [
            r"^lxc\.mount\.entry: tmpfs dev/shm ",
            r"^lxc\.mount\.entry: /dev/nvidia",
            r"^lxc\.cgroup2\.devices\.allow: c %s:\* rwm$" % own_majors,
        ],
    }


def pct_container_config_report(result, check_mode=False):
    """What to say of pct_config's result: `unnamed`, what it did to the devN and mpN the inventory does not name ({}
    when nothing; else the deleted, or in check mode the would be deleted, and the kept); `pending_gpus`, the
    sentence start.yml adds when a devN waits for the container's restart (else empty)."""
    deleted = [key for key in result.get("deleted") or [] if re.match(r"^(dev|mp)[0-9]+$", key)]
    unnamed = {}
    if deleted or result.get("kept"):
        unnamed = {"would be deleted" if check_mode else "deleted": deleted, "kept": result.get("kept")}
    pending = any(re.match(r"^dev[0-9]+$", key) for key in result.get("pending") or [])
    note = "The GPU list (devN) is pending until restart: the container keeps its current GPUs until then. "
    return {"unnamed": unnamed, "pending_gpus": note if pending else ""}


def _current_gpus(config_result):
    """The GPUs the container's current config passes through (its devN of a /dev/nvidiaN)."""
    config = config_result.get("config") or {}
    return len([1 for key, value in config.items() if re.match("^dev[0-9]+$", key) and re.match(GPU_DEVN, value)])


def pct_container_verify_errors(ct, role, facts):
    """What verify.yml refuses: a container NVIDIA userspace of another version than the node's driver, and an
    nvidia-smi that fails or sees another number of GPUs than are passed through."""
    v = _variables(role, "pct_container_verify_errors")
    ct = ct or {}
    vmid, driver = v["pct_container_vmid"], facts.get("_pct_container_host_driver")
    gpu_indexes = facts.get("_pct_container_gpu_indexes") or []
    config_result = facts.get("pct_container_config_result") or {}
    ct_driver = ct.get("nvidia_userspace", "")
    smi_rc, smi_gpus = ct.get("smi_rc"), ct.get("smi_gpus", 0)
    passthrough = v["pct_container_gpu_passthrough"]
    # While changes wait for a restart the play may not make, the running container has the GPUs of its current
    # config (devN applied; a pending devN is not there yet), not the new list: that count is checked.
    waiting = bool(config_result.get("restart_required", False)) and not _bool(v["pct_container_restart_allowed"])
    expected = _current_gpus(config_result) if waiting and passthrough == "devices" else len(gpu_indexes)
    found = []
    if ct_driver != driver:
        found.append(
            "%sthe NVIDIA userspace in CT %s is '%s' but the kernel driver on %s is %s; they must be equal"
            ' ("Driver/library version mismatch" otherwise). Set pct_container_driver_install to true, install %s in'
            " the container yourself, or set pct_container_driver_check to false."
            % (PREFIX, vmid, ct_driver or "not installed", v["pct_container_node"], driver, driver)
        )
    if str(smi_rc) != "0" or (not (waiting and passthrough == "lxc") and _int(smi_gpus) != _int(expected)):
        which = (
            str(gpu_indexes)
            if _int(expected) == len(gpu_indexes)
            else "its current devN; the rest wait for its restart"
        )
        found.append(
            "%snvidia-smi -L in CT %s exited %s and lists %s GPU(s), but %s are passed through (%s): %s%s. Look at"
            " the devN entries of `pct config %s` and at /dev/nvidia* in the container."
            % (
                PREFIX,
                vmid,
                smi_rc,
                smi_gpus,
                expected,
                which,
                " / ".join(ct.get("smi_lines") or []),
                ct.get("error", ""),
                vmid,
            )
        )
    return found


class FilterModule:
    def filters(self):
        return {
            "pct_container_plan": pct_container_plan,
            "pct_container_node_steps": pct_container_node_steps,
            "pct_container_config": pct_container_config,
            "pct_container_config_report": pct_container_config_report,
            "pct_container_verify_errors": pct_container_verify_errors,
        }
