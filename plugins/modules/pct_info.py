#!/usr/bin/python
# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: pct_info
short_description: Read a Proxmox VE node and one of its containers in one call, before anything changes
version_added: 0.2.0
description:
  - Runs on a Proxmox VE node as root and changes nothing. It reads, in one module call, everything
    C(gpulxc.sglang.pct_container) decides on, so a re-run that has nothing to change costs one round trip
    to the node instead of one per fact.
  - The container's status (C(pct status)); when it does not exist, whether its template is on the node
    (C(pvesm path) and the file).
  - With O(gpus), the node's NVIDIA character device nodes (C(/dev/nvidia*), C(/dev/nvidia-caps/*)), its kernel
    driver's version from O(driver_version_file), and the character device majors drivers hold now
    (C(/proc/devices); nvidia-uvm's and nvidia-caps' are dynamic).
  - The state of files (checksum, mode, owner) and of units (C(systemctl is-enabled)) on the node.
  - With O(storage) and the container absent, the storage its root filesystem would be made on, from
    C(pvesm status --content rootdir) (and C(pvesm status) when it is not listed there, to tell a missing
    storage from one without C(rootdir) content) - RV(storage).
  - When the container exists, whether its config makes it unprivileged (RV(unprivileged)), read from
    O(config_dir).
  - With O(gpus), the GPUs the node's other containers pass through (RV(gpu_users)), read from their configs
    in O(config_dir) - two containers given one GPU are refused unless both allow it.
  - With O(gpus), every container config in O(config_dir), this one included, that passes an NVIDIA device through
    (RV(nvidia_users)) - what decides whether the node still needs its unit that makes the device nodes at boot.
  - With O(pve), the node's Proxmox VE release from C(pveversion -v) - the version of C(pve-manager) and of
    C(pve-container), which decides what the node supports (C(devN) since pve-container 5.0.7) and what it
    applies to a running container at once (a new C(devN) since 6.0.4, PVE 9).
  - With O(container) and the container running, one C(pct exec) reads inside it the boot state
    (C(systemctl is-system-running)), the version of the NVIDIA userspace (C(libnvidia-ml.so.<version>))
    and the GPUs C(nvidia-smi -L) lists.
author:
  - gpulxc.sglang developers (@gpulxc)
notes:
  - Formerly C(gpulxc.sglang.pct_probe); that name redirects here.
extends_documentation_fragment:
  - gpulxc.sglang.pct
  - gpulxc.sglang.attributes
  - gpulxc.sglang.attributes.info_module
options:
  ostemplate:
    description:
      - Template volume (C(<storage>:vztmpl/<file>)) to look for when the container does not exist.
    type: str
  gpus:
    description: Read the NVIDIA device nodes and the kernel driver's version.
    type: bool
    default: true
  driver_version_file:
    description: The kernel driver's version file.
    type: path
    default: /proc/driver/nvidia/version
  files:
    description: Files on the node whose state to return in RV(files).
    type: list
    elements: path
    default: []
  units:
    description: Units on the node whose C(systemctl is-enabled) state to return in RV(units).
    type: list
    elements: str
    default: []
  container:
    description: When the container runs, read its boot state, NVIDIA userspace and GPUs (RV(container)).
    type: bool
    default: true
  storage:
    description:
      - The storage of the container's root filesystem; read into RV(storage) when the container does not exist.
    type: str
  config_dir:
    description: Where the node keeps the containers' configs (C(<vmid>.conf)).
    type: path
    default: /etc/pve/lxc
  pvesm:
    description: Path of C(pvesm) on the node.
    type: path
    default: /usr/sbin/pvesm
  pve:
    description: Read the node's Proxmox VE release (RV(pve)) with O(pveversion).
    type: bool
    default: true
  pveversion:
    description: Path of C(pveversion) on the node.
    type: path
    default: /usr/bin/pveversion
"""

EXAMPLES = r"""
- name: Read the node and container 200
  gpulxc.sglang.pct_info:
    vmid: 200
    ostemplate: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    files: [/etc/systemd/system/gpulxc-nvidia-nodes.service]
    units: [gpulxc-nvidia-nodes.service]
  delegate_to: pve1
  register: probe

- name: Say what runs in it
  ansible.builtin.debug:
    msg: "{{ probe.status }}, driver {{ probe.driver.version }}, {{ probe.container.smi_lines | length }} GPU(s)"
  when: probe.status == 'running'
"""

RETURN = r"""
status:
  description: The container's status.
  returned: always
  type: str
  choices: [running, stopped, absent]
template:
  description: The template's path and whether it is on the node; empty unless the container is absent.
  returned: always
  type: dict
  contains:
    path:
      description: The file O(ostemplate) resolves to (empty when C(pvesm path) failed).
      type: str
    exists:
      description: Whether that file exists.
      type: bool
    error:
      description: What C(pvesm path) said when it failed.
      type: str
storage:
  description:
    - The storage O(storage) as C(pvesm status) reports it; empty unless the container is absent and O(storage) is
      given. Sizes in KiB, as C(pvesm status) prints them.
  returned: always
  type: dict
  contains:
    name:
      description: The storage (O(storage)).
      type: str
    exists:
      description: Whether the node has a storage of that name (enabled or not).
      type: bool
    rootdir:
      description: Whether it is listed by C(pvesm status --content rootdir) (enabled and holds container directories).
      type: bool
    type:
      description: Its type (C(dir), C(lvmthin), C(zfspool) ...).
      type: str
    status:
      description: C(active), C(inactive) or C(disabled).
      type: str
    total_kib:
      description: Its size.
      type: int
    used_kib:
      description: Space used.
      type: int
    avail_kib:
      description: Space available.
      type: int
    rootdir_storages:
      description: The names of the storages C(pvesm status --content rootdir) lists.
      type: list
      elements: str
    error:
      description: What C(pvesm) said when it failed.
      type: str
  sample: {name: local-lvm, exists: true, rootdir: true, type: lvmthin, status: active, total_kib: 367001600,
           used_kib: 0, avail_kib: 367001600, rootdir_storages: [local-lvm], error: ""}
unprivileged:
  description: Whether the existing container is unprivileged (its config says C(unprivileged) 1); null when absent.
  returned: always
  type: bool
device_nodes:
  description: The node's NVIDIA character device nodes, sorted by path (empty without O(gpus)).
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: Device node path.
      type: str
    major:
      description: Major number.
      type: int
    minor:
      description: Minor number.
      type: int
  sample: [{path: /dev/nvidia0, major: 195, minor: 0}, {path: /dev/nvidia-uvm, major: 238, minor: 0}]
char_devices:
  description: The character device majors registered now (C(/proc/devices)), with their drivers' names
    (empty without O(gpus)).
  returned: always
  type: list
  elements: dict
  contains:
    major:
      description: Major number.
      type: int
    name:
      description: The driver's name for it.
      type: str
  sample: [{major: 10, name: misc}, {major: 195, name: nvidia}, {major: 238, name: nvidia-uvm}]
gpu_indexes:
  description:
    - The node's GPUs by the minor N of their C(/dev/nvidiaN), sorted (empty without O(gpus)). Read from the
      driver (C(Device Minor) in C(gpus/*/information) next to O(driver_version_file)), so GPUs whose node is
      missing (after a reboot) are counted; from the C(/dev/nvidiaN) nodes when the driver lists none.
  returned: always
  type: list
  elements: int
  sample: [0, 1, 2, 3]
gpu_users:
  description:
    - By vmid, the GPU indexes N (C(/dev/nvidiaN)) every other container config in O(config_dir) passes
      through, in a C(devN) (current or pending) or a raw C(lxc.mount.entry); containers without a GPU are
      left out (empty without O(gpus)). A config that cannot be read or parsed is left out too.
  returned: always
  type: dict
  sample: {"201": [0, 1], "202": [2]}
nvidia_users:
  description:
    - The vmids, sorted, of every container config in O(config_dir), this container's included, that passes an
      NVIDIA device through - a C(devN) (current or pending) or a raw C(lxc.mount.entry) of a C(/dev/nvidia*) node,
      or a raw C(lxc.cgroup2.devices.allow) (or C(lxc.cgroup.devices.allow)) rule for a major an NVIDIA driver
      holds (195, nvidia-uvm's, nvidia-caps'). A config that cannot be read or parsed is left out (empty without
      O(gpus)).
  returned: always
  type: list
  elements: str
  sample: ["200", "201"]
driver:
  description: The node's NVIDIA kernel driver (empty version when O(driver_version_file) is missing).
  returned: always
  type: dict
  contains:
    version:
      description: Its version, for example C(580.159.04).
      type: str
    open:
      description: Whether it is the open kernel module.
      type: bool
files:
  description: Per path of O(files), its state.
  returned: always
  type: dict
  sample: {/etc/systemd/system/x.service: {exists: true, sha1: "3f...", mode: "0644", owner: root, group: root}}
units:
  description: Per unit of O(units), what C(systemctl is-enabled) printed (empty when it printed nothing).
  returned: always
  type: dict
  sample: {gpulxc-nvidia-nodes.service: enabled}
pve:
  description: The node's Proxmox VE release, from C(pveversion -v); empty without O(pve).
  returned: always
  type: dict
  contains:
    version:
      description: The version of C(pve-manager) (the Proxmox VE release), for example C(9.1.1); empty when unknown.
      type: str
    container:
      description: The version of C(pve-container), for example C(6.1.10); empty when unknown.
      type: str
    error:
      description: Why the release could not be read (C(pveversion) missing or failing, or no C(pve-container) line).
      type: str
  sample: {version: 9.1.1, container: 6.1.10, error: ""}
container:
  description: Read inside the running container; empty when it is not running or O(container) is false.
  returned: always
  type: dict
  contains:
    boot_state:
      description: What C(systemctl is-system-running) printed (C(running), C(degraded), C(starting) ...).
      type: str
    nvidia_userspace:
      description: Version of the NVIDIA userspace (C(libnvidia-ml.so.<version>)); empty when not installed.
      type: str
    smi_rc:
      description: Exit status of C(nvidia-smi -L).
      type: int
    smi_lines:
      description: Output lines of C(nvidia-smi -L), its errors included.
      type: list
      elements: str
    smi_gpus:
      description: How many GPUs C(nvidia-smi -L) lists (its C(GPU <N>:) lines).
      type: int
    error:
      description: Why C(pct exec) failed, when it did (the other keys are then empty).
      type: str
"""

import glob
import grp
import hashlib
import os
import pwd
import re
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpulxc.sglang.plugins.module_utils import _nvidia as nvidia
from ansible_collections.gpulxc.sglang.plugins.module_utils import _pct_conf as pctconf

DEVICE_GLOBS = ("/dev/nvidia*", "/dev/nvidia-caps/*")
GPU_NODE = re.compile(r"/dev/nvidia([0-9]+)$")
SMI_GPU = re.compile(r"GPU [0-9]+:")
DEVICE_MINOR = re.compile(r"^Device Minor:\s*([0-9]+)", re.M)
DEFAULT_PVEVERSION = "/usr/bin/pveversion"
DEFAULT_CONFIG_DIR = "/etc/pve/lxc"
PROC_DEVICES = "/proc/devices"
# pve-manager's bin/pveversion print_status: "<package>: <version>[ (running kernel|version: ...)]"
PVEVERSION_LINE = re.compile(r"^([a-z0-9][a-z0-9.+-]*): (\S+)")

# Run inside the container by one `pct exec`: each line is `<key>=<value>`.
IN_CONTAINER = r"""
printf 'boot=%s\n' "$(systemctl is-system-running 2>/dev/null)"
find /usr/lib /usr/lib64 -maxdepth 2 -name 'libnvidia-ml.so.*.*' 2>/dev/null | sed 's|^.*/libnvidia-ml\.so\.|nvml=|'
smi=$(nvidia-smi -L 2>&1); rc=$?
printf 'smi_rc=%s\n' "$rc"
[ -n "$smi" ] && printf '%s\n' "$smi" | sed 's/^/smi=/'
exit 0
"""


def device_nodes():
    nodes = []
    for path in sorted({p for pattern in DEVICE_GLOBS for p in glob.glob(pattern)}):
        try:
            info = os.stat(path)
        except OSError:
            continue
        if stat.S_ISCHR(info.st_mode):
            nodes.append({"path": path, "major": os.major(info.st_rdev), "minor": os.minor(info.st_rdev)})
    return nodes


def char_devices(path=None):
    """The "Character devices:" section of /proc/devices: [{major, name}]."""
    found = []
    try:
        with open(path or PROC_DEVICES, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return found
    section = text.split("Character devices:", 1)[1].split("\n\n", 1)[0] if "Character devices:" in text else ""
    for line in section.splitlines():
        major, _sep, name = line.strip().partition(" ")
        if major.isdigit():
            found.append({"major": int(major), "name": name.strip()})
    return found


def gpu_indexes(nodes, driver_version_file):
    """The GPUs' minors as the driver lists them (/proc/driver/nvidia/gpus/<pci>/information), else the nodes'."""
    minors = set()
    for info in glob.glob(os.path.join(os.path.dirname(driver_version_file), "gpus", "*", "information")):
        try:
            with open(info, encoding="utf-8", errors="replace") as handle:
                match = DEVICE_MINOR.search(handle.read())
        except OSError:
            continue
        if match:
            minors.add(int(match.group(1)))
    if minors:
        return sorted(minors)
    return sorted(int(m.group(1)) for m in (GPU_NODE.search(n["path"]) for n in nodes) if m)


def read_driver(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        text = ""
    return {"version": nvidia.parse_kernel_driver_version(text), "open": "Open Kernel Module" in text}


def file_state(path):
    try:
        info = os.stat(path)
        with open(path, "rb") as handle:
            digest = hashlib.sha1(handle.read()).hexdigest()  # the checksum Ansible's copy reports
    except OSError:
        return {"exists": False}
    return {
        "exists": True,
        "sha1": digest,
        "mode": "%04o" % stat.S_IMODE(info.st_mode),
        "owner": name_of(pwd.getpwuid, info.st_uid),
        "group": name_of(grp.getgrgid, info.st_gid),
    }


def name_of(lookup, number):
    try:
        return lookup(number)[0]
    except KeyError:
        return str(number)


def parse_container(text):
    found = {"boot_state": "", "nvidia_userspace": "", "smi_rc": None, "smi_lines": []}
    versions = []
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        if key == "boot":
            found["boot_state"] = value.strip()
        elif key == "nvml":
            versions.append(value.strip())
        elif key == "smi_rc" and value.strip().isdigit():
            found["smi_rc"] = int(value)
        elif key == "smi":
            found["smi_lines"].append(value)
    found["nvidia_userspace"] = sorted(versions)[0] if versions else ""
    found["smi_gpus"] = len([line for line in found["smi_lines"] if SMI_GPU.match(line)])
    return found


# pve-storage src/PVE/CLI/pvesm.pm $print_status: "%-<n>s %10s %10s %15d %15d %15d % 7.2f%%" after a header line
PVESM_STATUS_HEADER = ("Name", "Type", "Status", "Total", "(KiB)", "Used", "(KiB)", "Available", "(KiB)", "%")


def parse_pvesm_status(text):
    """{name: {type, status, total_kib, used_kib, avail_kib}} from `pvesm status`'s table."""
    found = {}
    lines = text.splitlines()
    if not lines or tuple(lines[0].split()) != PVESM_STATUS_HEADER:
        raise ValueError("not the table pvesm status prints: %r" % text[:200])
    for line in lines[1:]:
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 7 or not all(f.lstrip("-").isdigit() for f in fields[3:6]):
            raise ValueError("unexpected pvesm status line: %r" % line)
        found[fields[0]] = {
            "type": fields[1],
            "status": fields[2],
            "total_kib": int(fields[3]),
            "used_kib": int(fields[4]),
            "avail_kib": int(fields[5]),
        }
    return found


def parse_pveversion(text):
    """The pve-manager and pve-container versions from `pveversion -v`'s output."""
    packages = {}
    for line in text.splitlines():
        match = PVEVERSION_LINE.match(line.strip())
        if match and match.group(2)[:1].isdigit():  # not "not correctly installed", "residual config"
            packages[match.group(1)] = match.group(2)
    found = {"version": packages.get("pve-manager", ""), "container": packages.get("pve-container", ""), "error": ""}
    if not found["container"]:
        found["error"] = "pveversion -v lists no installed pve-container"
    return found


class Probe:
    def __init__(self, module):
        self.module = module
        self.params = module.params

    def run(self, *args):
        return self.module.run_command([str(a) for a in args])

    def status(self):
        rc, out, err = self.run(self.params["pct"], "status", self.params["vmid"])
        if rc == 0 and out.strip().startswith("status:"):
            return out.split(":", 1)[1].strip()
        if "does not exist" in err:
            return "absent"
        self.module.fail_json(msg="pct status %s failed (rc %s): %s" % (self.params["vmid"], rc, (err or out).strip()))
        return None

    def template(self):
        volume = self.params["ostemplate"]
        if not volume:
            return {"path": "", "exists": False, "error": "no ostemplate given"}
        rc, out, err = self.run(self.params["pvesm"], "path", volume)
        path = out.strip() if rc == 0 else ""
        return {"path": path, "exists": bool(path) and os.path.isfile(path), "error": "" if rc == 0 else err.strip()}

    def storage(self, name):
        """`pvesm status --content rootdir`, then `pvesm status` when the storage is not listed."""
        found = {
            "name": name,
            "exists": False,
            "rootdir": False,
            "type": "",
            "status": "",
            "total_kib": 0,
            "used_kib": 0,
            "avail_kib": 0,
            "rootdir_storages": [],
            "error": "",
        }
        listed = self.pvesm_status("--content", "rootdir")
        if isinstance(listed, str):
            found["error"] = listed
            return found
        found["rootdir_storages"] = sorted(listed)
        if name not in listed:
            listed = self.pvesm_status()
            if isinstance(listed, str):
                found["error"] = listed
                return found
        else:
            found["rootdir"] = True
        if name in listed:
            found.update(listed[name], exists=True)
        return found

    def pvesm_status(self, *args):
        """The parsed table, or what went wrong (a str)."""
        rc, out, err = self.run(self.params["pvesm"], "status", *args)
        if rc != 0:
            return "pvesm status %s failed (rc %s): %s" % (" ".join(args), rc, (err or out).strip())
        try:
            return parse_pvesm_status(out)
        except ValueError as error:
            return str(error)

    def unprivileged(self):
        path = os.path.join(self.params["config_dir"], "%d.conf" % self.params["vmid"])
        for _attempt in range(3):  # pmxcfs renames a config over the old one: an open can miss it for a moment
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    text = handle.read()
                break
            except FileNotFoundError:
                continue
            except OSError as error:
                self.module.fail_json(msg="cannot read %s: %s" % (path, error))
        else:
            return None
        try:
            conf = pctconf.parse(text)
        except pctconf.PctConfError as error:
            self.module.fail_json(msg="%s: %s" % (path, error))
        return pctconf.normalize("unprivileged", conf["main"].get("unprivileged", "0")) == "1"

    def node_configs(self):
        """(vmid, parsed config) of every container config on the node, by name; one that cannot be read or parsed
        is left out (pmxcfs renamed it away, or another tool's half-written file: not ours to judge)."""
        directory = self.params["config_dir"]
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            return
        for name in names:
            match = re.fullmatch(r"([0-9]+)\.conf", name)
            if not match:
                continue
            try:
                with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as handle:
                    conf = pctconf.parse(handle.read())
            except (OSError, pctconf.PctConfError):
                continue
            yield match.group(1), conf

    def gpu_users(self):
        """{vmid: [GPU indexes]} of the node's other container configs that pass GPUs through."""
        found = {}
        for vmid, conf in self.node_configs():
            indexes = pctconf.gpu_indexes(conf) if int(vmid) != self.params["vmid"] else []
            if indexes:
                found[vmid] = indexes
        return found

    def nvidia_users(self, majors):
        """The vmids of the node's container configs (this one's included) that pass an NVIDIA device through."""
        return sorted((vmid for vmid, conf in self.node_configs() if pctconf.passes_nvidia(conf, majors)), key=int)

    def unit(self, name):
        return self.run("systemctl", "is-enabled", name)[1].strip()

    def pve(self):
        if not os.path.exists(self.params["pveversion"]):
            return {"version": "", "container": "", "error": "%s is missing" % self.params["pveversion"]}
        rc, out, err = self.run(self.params["pveversion"], "-v")
        if rc != 0:
            return {
                "version": "",
                "container": "",
                "error": "%s -v failed (rc %s): %s" % (self.params["pveversion"], rc, (err or out).strip()),
            }
        return parse_pveversion(out)

    def container(self):
        rc, out, err = self.run(self.params["pct"], "exec", self.params["vmid"], "--", "/bin/sh", "-c", IN_CONTAINER)
        if rc != 0:
            return {"error": "pct exec %s failed (rc %s): %s" % (self.params["vmid"], rc, (err or out).strip())}
        return parse_container(out)


def main():
    module = AnsibleModule(
        argument_spec={
            "vmid": {"type": "int", "required": True},
            "ostemplate": {"type": "str"},
            "gpus": {"type": "bool", "default": True},
            "driver_version_file": {"type": "path", "default": "/proc/driver/nvidia/version"},
            "files": {"type": "list", "elements": "path", "default": []},
            "units": {"type": "list", "elements": "str", "default": []},
            "container": {"type": "bool", "default": True},
            "pct": {"type": "path", "default": "/usr/sbin/pct"},
            "pvesm": {"type": "path", "default": "/usr/sbin/pvesm"},
            "storage": {"type": "str"},
            "config_dir": {"type": "path", "default": DEFAULT_CONFIG_DIR},
            "pve": {"type": "bool", "default": True},
            "pveversion": {"type": "path", "default": DEFAULT_PVEVERSION},
        },
        supports_check_mode=True,
    )
    probe = Probe(module)
    params = module.params
    status = probe.status()
    nodes = device_nodes() if params["gpus"] else []
    majors = char_devices() if params["gpus"] else []
    nvidia_majors = {195} | {entry["major"] for entry in majors if entry["name"].startswith("nvidia")}
    module.exit_json(
        changed=False,
        status=status,
        template=probe.template() if status == "absent" else {},
        storage=probe.storage(params["storage"]) if status == "absent" and params["storage"] else {},
        unprivileged=probe.unprivileged() if status != "absent" else None,
        device_nodes=nodes,
        gpu_indexes=gpu_indexes(nodes, params["driver_version_file"]) if params["gpus"] else [],
        gpu_users=probe.gpu_users() if params["gpus"] else {},
        nvidia_users=probe.nvidia_users(nvidia_majors) if params["gpus"] else [],
        char_devices=majors,
        driver=read_driver(params["driver_version_file"]) if params["gpus"] else {"version": "", "open": False},
        files={path: file_state(path) for path in params["files"]},
        units={name: probe.unit(name) for name in params["units"]},
        pve=probe.pve() if params["pve"] else {"version": "", "container": "", "error": ""},
        container=probe.container() if params["container"] and status == "running" else {},
    )


if __name__ == "__main__":
    main()
