#!/usr/bin/python
# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: pct_config
short_description: Create a Proxmox VE container and keep its config as asked, idempotently
version_added: 0.1.0
description:
  - Runs on a Proxmox VE node as root. Creates the container with C(pct create) if it does not exist,
    otherwise compares the asked settings with its config, parsed (current values with their pending
    changes), and sends only the keys that differ in one C(pct set) call.
  - Property strings are compared parsed, so C(nesting=1) and C(nesting=true) match and Proxmox's
    generated C(hwaddr) in C(netN) is kept; a changed C(netN) is sent with its current MAC, so
    re-running never gives the container a new MAC address.
  - Raw C(lxc.*) lines (which C(pct) and the API refuse) are written into the config file as Proxmox
    writes it, under its config lock (C(/run/lock/lxc/pve-config-<vmid>.lock), after C(pct set) has
    released it). The config is read again inside the lock, written to a temporary file in the same
    directory and renamed over it (C(/etc/pve) is pmxcfs, which refuses the chmod of Ansible's atomic
    move but renames within a directory). Only the main section's raw lines change; C([pve:pending]) and
    snapshot sections stay as they are.
  - A container whose config has a C(lock) key (a backup, migration or snapshot in progress) is refused
    before anything changes, naming the lock.
  - An empty value (C(features) from an empty list) deletes the key, as Proxmox cannot hold an empty value.
  - On a running container Proxmox applies what it can hot-plug and keeps the rest pending until the
    next start; the module returns what is pending in RV(pending) and RV(restart_required). It never
    restarts the container itself.
author:
  - gpulxc.sglang developers (@gpulxc)
notes:
  - C(devN) (device passthrough) and bind mounts can only be set by C(root@pam). C(pct) run as root on
    the node is C(root@pam); an API token (C(root@pam!name)) is refused with HTTP 403 "Permission check
    failed (configuring device passthrough is only allowed for root@pam)", so this module uses C(pct).
  - Changing the root filesystem of an existing container (resize, move) is not done here.
attributes:
  check_mode:
    support: full
    details: Reports what would be created, set, deleted and written, and changes nothing.
  diff_mode:
    support: full
    details: Shows the container's config (keys and raw lines) before and after.
extends_documentation_fragment:
  - gpulxc.sglang.pct
  - gpulxc.sglang.attributes
options:
  ostemplate:
    description:
      - Template to create the container from when it does not exist, as C(<storage>:vztmpl/<file>).
      - Without it, a missing container is an error.
    type: str
  create_options:
    description:
      - Settings passed only when the container is created (for example C(rootfs), C(unprivileged)),
        which Proxmox cannot change later with C(pct set).
    type: dict
    default: {}
  config:
    description:
      - Settings the container must have, by Proxmox key (C(cores), C(memory), C(features), C(net0),
        C(mp0), C(dev0) ...). Values are strings, numbers or booleans.
    type: dict
    default: {}
  devices:
    description:
      - C(devN) values the container must have (C(/dev/nvidia0,mode=0666)), known by their path, not by an
        index. A path already passed through keeps its C(devN); a new one takes the lowest index no C(devN)
        of the container uses, so a C(devN) added by hand survives and nothing collides with it.
      - Without it, C(devN) keys are only those in O(config).
    type: list
    elements: str
    version_added: 0.2.0
  mounts:
    description:
      - C(mpN) values the container must have (C(/srv/models,mp=/models,ro=1)), known by their mount point
        in the container (C(mp=)), placed as O(devices) are.
    type: list
    elements: str
    version_added: 0.2.0
  owned_devices:
    description:
      - Regular expressions on a C(devN) path; a C(devN) whose path matches one and that O(devices) does not
        name is deleted (a GPU no longer wanted). Any other C(devN) the inventory does not name is kept,
        unless O(exclusive) has V(dev).
    type: list
    elements: str
    default: []
    version_added: 0.2.0
  exclusive:
    description:
      - Key families this module owns completely, for example V(dev) or V(mp). A key of such a family
        that is not in O(config) (or O(devices), O(mounts)) is deleted (a stray C(devN), a bind mount no
        longer wanted). A storage-backed C(mpN) (C(<storage>:<volume>)) is never deleted (Proxmox
        detaches its volume as C(unusedN), whose delete destroys the data); it is
        listed in RV(kept).
    type: list
    elements: str
    choices: [dev, mp, net]
    default: []
  lxc:
    description:
      - "Raw lines the main section must contain, each C(lxc.<key>: <value>)."
    type: list
    elements: str
    default: []
  lxc_exclusive:
    description:
      - Regular expressions; a raw line matching one of them that is not in O(lxc) is removed
        (for example the old size of a C(/dev/shm) mount entry).
    type: list
    elements: str
    default: []
  config_dir:
    description: Directory of the container configs on the node.
    type: path
    default: /etc/pve/lxc
  pve_container_version:
    description:
      - The node's pve-container version (C(pve.container) of M(gpulxc.sglang.pct_info)), for check mode's
        prediction of what a running container takes at once. A new C(devN) is hot-plugged only from
        pve-container 6.0.4 (Proxmox VE 9), a new C(mpN) on 8 and 9; empty means the newest rules.
    type: str
    default: ""
    version_added: 0.2.0
"""

EXAMPLES = r"""
- name: Container 200 with 8 GPUs and a 64 GiB /dev/shm
  gpulxc.sglang.pct_config:
    vmid: 200
    ostemplate: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    create_options:
      rootfs: local-lvm:200
      unprivileged: false
    config:
      hostname: sglang
      cores: 64
      memory: 262144
      features: nesting=1
      net0: name=eth0,bridge=vmbr0,ip=dhcp
      dev0: /dev/nvidia0,mode=0666
      dev1: /dev/nvidiactl,mode=0666
    exclusive: [dev]
    lxc:
      - "lxc.mount.entry: tmpfs dev/shm tmpfs size=64G,nosuid,nodev,create=dir 0 0"
    lxc_exclusive:
      - "^lxc\\.mount\\.entry: tmpfs dev/shm "
  delegate_to: pve1
  register: ct_config

- name: Say what waits for a restart
  ansible.builtin.debug:
    msg: "pending until the next start: {{ ct_config.pending | join(', ') }}"
  when: ct_config.restart_required
"""

RETURN = r"""
created:
  description: Whether the container was created.
  returned: always
  type: bool
set:
  description: The keys sent to C(pct set) (or C(pct create)) with their values.
  returned: always
  type: dict
  sample: {cores: "4", dev8: "/dev/nvidia-uvm,mode=0666"}
deleted:
  description: The keys deleted.
  returned: always
  type: list
  elements: str
lxc_added:
  description: Raw lines added to the main section.
  returned: always
  type: list
  elements: str
lxc_removed:
  description: Raw lines removed from the main section.
  returned: always
  type: list
  elements: str
pending:
  description: Keys whose change waits for the next start of the container (C([pve:pending])).
  returned: always
  type: list
  elements: str
restart_required:
  description: Whether a restart is needed to apply everything (pending keys, or raw lines changed while running).
  returned: always
  type: bool
running:
  description: Whether the container is running.
  returned: always
  type: bool
config:
  description: The container's config after the run (current values; pending ones in RV(pending)).
  returned: always
  type: dict
kept:
  description: The C(devN) and C(mpN) keys the inventory does not name that stay, with the reason.
  returned: always
  type: dict
  sample:
    dev5: "/dev/fuse, not in the inventory: kept"
    mp1: "storage volume local-lvm:vm-200-disk-1 at /data: never detached"
"""

import contextlib
import errno
import fcntl
import os
import re
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpulxc.sglang.plugins.module_utils import _pct_conf as pctconf


def pct_args(values):
    args = []
    for key, value in values.items():
        args += ["--%s" % key, str(value)]
    return args


class PctConfig:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.vmid = self.params["vmid"]
        self.path = os.path.join(self.params["config_dir"], "%d.conf" % self.vmid)
        self.result = {
            "changed": False,
            "created": False,
            "set": {},
            "deleted": [],
            "lxc_added": [],
            "lxc_removed": [],
            "pending": [],
            "restart_required": False,
            "running": False,
            "kept": {},
        }
        try:
            self.desired_lxc = [pctconf.parse_raw_line(line) for line in self.params["lxc"]]
        except pctconf.PctConfError as exc:
            module.fail_json(msg="lxc: %s" % exc)
        for key in self.params["config"]:
            if key.startswith("lxc"):
                module.fail_json(msg="config: raw key '%s' goes in the lxc option" % key)

    def pct(self, *args):
        rc, out, err = self.module.run_command([self.params["pct"], *[str(a) for a in args]])
        if rc != 0:
            self.module.fail_json(
                msg="pct %s failed: %s" % (" ".join(str(a) for a in args), (err or out).strip()),
                rc=rc,
                stdout=out,
                stderr=err,
            )
        return out

    def read(self):
        with open(self.path) as handle:
            return handle.read()

    def write_raw_lines(self, remove, add):
        """Splice raw lines into the config under Proxmox's config lock (PVE::Tools::lock_file, 10 s), from
        the config read again inside it, with a temporary file in the same directory renamed over the
        config (PVE::File::file_set_contents: pmxcfs renames within a directory, refuses chmod)."""
        with self.config_lock():
            text = self.read()
            self.refuse_locked(pctconf.parse(text))
            new = pctconf.splice_raw_lines(text, remove, add)
            temporary = "%s.tmp.%d" % (self.path, os.getpid())
            try:
                with open(temporary, "w") as out:
                    out.write(new)
                os.rename(temporary, self.path)
            except OSError as exc:
                if os.path.exists(temporary):
                    os.unlink(temporary)
                self.module.fail_json(msg="writing %s: %s" % (self.path, exc))

    @contextlib.contextmanager
    def config_lock(self):
        """PVE::Tools::lock_file on /run/lock/lxc/pve-config-<vmid>.lock: exclusive, 10 s, then Proxmox's
        message. Held while the config is read or written here, never around a pct call (pct takes it)."""
        os.makedirs(LOCK_DIR, exist_ok=True)
        lock = os.path.join(LOCK_DIR, "pve-config-%d.lock" % self.vmid)
        with open(lock, "a") as handle:
            deadline = time.monotonic() + LOCK_TIMEOUT
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() >= deadline:
                        self.module.fail_json(
                            msg="can't lock file '%s' - got timeout (CT %d's config is held by "
                            "another change)" % (lock, self.vmid)
                        )
                    time.sleep(0.05)
            yield

    def read_locked(self):
        """The config as one consistent read (None: no such CT): under the lock, as pct's own writes are."""
        with self.config_lock():
            return self.read() if os.path.exists(self.path) else None

    def refuse_locked(self, conf):
        lock = conf["main"].get("lock")
        if lock:
            self.module.fail_json(
                msg="CT %d is locked (%s): Proxmox refuses changes while it is (a backup, "
                "migration or snapshot holds it); wait for it to finish, or clear a stale "
                "lock with pct unlock %d" % (self.vmid, lock, self.vmid)
            )

    def run(self):
        text = self.read_locked()
        if text is None:
            self.create()
        else:
            self.update(text)
        if not self.module.check_mode or not self.result["created"]:
            self.report()
        self.module.exit_json(**self.result)

    def create(self):
        if not self.params["ostemplate"]:
            self.module.fail_json(
                msg="CT %d does not exist on this node (%s missing) and no ostemplate was given"
                % (self.vmid, self.path)
            )
        asked = {**self.params["create_options"], **self.params["config"]}
        for fam, option in (("dev", "devices"), ("mp", "mounts")):
            asked.update(self.plan(fam, option, {})[0])
        values = {k: pctconf.to_pct_value(k, v, None) for k, v in asked.items() if not pctconf.is_empty(v)}
        self.result.update(changed=True, created=True, set=values, lxc_added=[": ".join(e) for e in self.desired_lxc])
        if self.module._diff:
            after = pctconf.render(values, self.desired_lxc)
            self.result["diff"] = {"before": "", "before_header": self.path, "after": after, "after_header": self.path}
        if self.module.check_mode:
            return
        self.pct("create", self.vmid, self.params["ostemplate"], *pct_args(values))
        if self.desired_lxc:
            self.write_raw_lines([], self.desired_lxc)

    def update(self, before_text):
        conf = pctconf.parse(before_text)
        current = pctconf.effective(conf)
        values = {}
        emptied = set()
        for key, desired in self.params["config"].items():
            if pctconf.is_empty(desired):
                # `key: ` is no config line Proxmox can read back: an empty value is no value
                if key in current:
                    emptied.add(key)
            elif not pctconf.matches(key, desired, current.get(key)):
                values[key] = pctconf.to_pct_value(key, desired, current.get(key))
        deleted = sorted(emptied | self.plan_families(current, values))
        remove, add = pctconf.plan_raw_lines(conf["lxc"], self.desired_lxc, self.params["lxc_exclusive"])
        after = dict(current)
        after.update(values)
        for key in deleted:
            after.pop(key, None)
        after_lxc = [e for e in conf["lxc"] if e not in remove] + add
        self.result.update(
            set=values,
            deleted=deleted,
            lxc_added=[": ".join(e) for e in add],
            lxc_removed=[": ".join(e) for e in remove],
        )
        changed = bool(values or deleted or remove or add)
        self.result["changed"] = changed
        if self.module._diff:
            self.result["diff"] = {
                "before": pctconf.render(current, conf["lxc"]),
                "before_header": self.path,
                "after": pctconf.render(after, after_lxc),
                "after_header": self.path,
            }
        if not changed:
            return
        self.refuse_locked(conf)
        if self.module.check_mode:
            return
        if values or deleted:
            args = pct_args(values)
            if deleted:
                args += ["--delete", ",".join(deleted)]
            self.pct("set", self.vmid, *args)
        if remove or add:
            self.write_raw_lines(remove, add)

    def plan_families(self, current, values):
        """Add the devN/mpN values to send to `values`; the keys to delete (exclusive families, owned devN)."""
        deleted = set()
        for fam, option in (("dev", "devices"), ("mp", "mounts")):
            wanted, gone, kept = self.plan(fam, option, current)
            for key, desired in wanted.items():
                if not pctconf.matches(key, desired, current.get(key)):
                    values[key] = pctconf.to_pct_value(key, desired, current.get(key))
            deleted.update(gone)
            self.result["kept"].update(kept)
        # families owned whole, set key by key in config (without the devices/mounts lists)
        listed = {"dev": "devices", "mp": "mounts"}
        for key, value in current.items():
            fam = pctconf.family(key)
            if fam not in self.params["exclusive"] or key in self.params["config"] or key in self.result["kept"]:
                continue
            if fam in listed and self.params[listed[fam]] is not None:
                continue  # planned above
            if fam == "mp" and pctconf.mount_type(value) == "volume":
                self.result["kept"][key] = "storage volume: never detached"
            else:
                deleted.add(key)
        return deleted

    def plan(self, fam, option, current):
        """(wanted, deleted, kept) for the devN or mpN list option; nothing when it is not given."""
        if self.params[option] is None:
            return {}, [], {}
        owned = self.params["owned_devices"] if fam == "dev" else ()
        try:
            reserved = set(self.params["config"])
            exclusive = fam in self.params["exclusive"]
            wanted = self.params[option]
            return pctconf.plan_indexed(fam, current, wanted, owned=owned, exclusive=exclusive, reserved=reserved)
        except pctconf.PctConfError as exc:
            self.module.fail_json(msg="%s: %s" % (option, exc))
            raise

    def is_running(self):
        return self.pct("status", self.vmid).strip() == "status: running"

    def report(self):
        conf = pctconf.parse(self.read_locked())
        running = self.is_running()
        pending = sorted({k for k in conf["pending"] if k != "delete"} | set(pctconf.pending_deletes(conf)))
        if self.module.check_mode and running:
            # predicted: what Proxmox would not hot-plug stays pending
            version = self.params["pve_container_version"]
            pending = sorted(
                set(pending)
                | {k for k in self.result["set"] if not hotpluggable(k, conf, version)}
                | {k for k in self.result["deleted"] if not hot_deletable(k)}
            )
        raw_changed = bool(self.result["lxc_added"] or self.result["lxc_removed"])
        self.result.update(
            config=conf["main"],
            pending=pending,
            running=running,
            restart_required=running and bool(pending or raw_changed),
        )


LOCK_DIR = "/run/lock/lxc"
LOCK_TIMEOUT = 10

HOTPLUG = {
    "description",
    "onboot",
    "startup",
    "protection",
    "hostname",
    "hookscript",
    "cores",
    "tags",
    "lock",
    "cpulimit",
    "cpuunits",
    "memory",
    "swap",
}


DEVICE_HOTPLUG_SINCE = (6, 0, 4)  # pve-container 6.0.4 (PVE 9): "implement device hotplug"


def hotpluggable(key, conf, version=""):
    """What Proxmox applies to a running container at once (pve-container vmconfig_hotplug_pending): a new
    mpN on PVE 8 and 9, a new devN only from pve-container 6.0.4 (an empty version: the newest rules)."""
    fam = pctconf.family(key)
    new = key not in conf["main"]
    numbers = tuple(int(part) for part in re.findall(r"[0-9]+", version or ""))
    new_device_hot = not numbers or numbers >= DEVICE_HOTPLUG_SINCE
    return key in HOTPLUG or fam == "net" or (fam == "mp" and new) or (fam == "dev" and new and new_device_hot)


def hot_deletable(key):
    """A delete Proxmox applies to a running container at once: fast-plug keys, swap, cpu limits, net<digit>."""
    return (key in HOTPLUG - {"memory"}) or re.fullmatch(r"net[0-9]|unused[0-9]+", key) is not None


def main():
    module = AnsibleModule(
        argument_spec={
            "vmid": {"type": "int", "required": True},
            "ostemplate": {"type": "str"},
            "create_options": {"type": "dict", "default": {}},
            "config": {"type": "dict", "default": {}},
            "devices": {"type": "list", "elements": "str"},
            "mounts": {"type": "list", "elements": "str"},
            "owned_devices": {"type": "list", "elements": "str", "default": []},
            "exclusive": {"type": "list", "elements": "str", "choices": ["dev", "mp", "net"], "default": []},
            "lxc": {"type": "list", "elements": "str", "default": []},
            "lxc_exclusive": {"type": "list", "elements": "str", "default": []},
            "config_dir": {"type": "path", "default": "/etc/pve/lxc"},
            "pct": {"type": "path", "default": "/usr/sbin/pct"},
            "pve_container_version": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    if module.params["vmid"] < 100:
        module.fail_json(msg="vmid: %d is below 100 (ids below 100 are reserved by Proxmox)" % module.params["vmid"])
    PctConfig(module).run()


if __name__ == "__main__":
    main()
