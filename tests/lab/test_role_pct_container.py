"""The pct_container role through site.yml on the lab: check mode on an empty node, converge and
idempotence, drift repaired, a node reboot, and bad input refused before any change.

Runs against its own CT (ct920, vmid 920) so that it can break things by hand.
"""

import contextlib
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, assert_refused, conf_text, destroy, pct, refused_side_by_side, run_site, task_output

# What changes the node for every CT on it (a node reboot, the Proxmox release pct plays switched, nvidia-uvm's major
# changed, a GPU's device node removed) is marked lab_alone, one test at a time: the rest changes only ct920 and runs
# in a lane (each part creates ct920 with its first converge).
ALONE = pytest.mark.lab_alone

VMID = 920
ABSENT = 921


@pytest.fixture(scope="module")
def inventory(lab_ready, tmp_path_factory):
    destroy(VMID)
    destroy(ABSENT)
    path = tmp_path_factory.mktemp("inv") / "ct920.yml"
    # joins the lab inventory's sglang_containers group, so it gets the lab's group_vars
    path.write_text(
        json.dumps({"sglang_containers": {"hosts": {"ct920": {"proxmox_vmid": VMID, "pct_container_node": "lab-pve"}}}})
    )
    yield path
    destroy(VMID)


def site(inventory, *extra):
    # (the container's software and services have their own suites)
    return run_site(inventory, "ct920", "--skip-tags=stack,services", *extra)


def converged(inventory):
    proc, _ = site(inventory)
    assert proc.returncode == 0, proc.stdout[-3000:]


def in_ct(*cmd):
    return pct("exec", VMID, "--", *cmd, check=False)


def mac():
    return re.search(r"hwaddr=([0-9A-F:]+)", conf_text(VMID)).group(1)


def test_check_mode_on_an_empty_node_predicts_and_changes_nothing(inventory):
    unit = Path("/etc/systemd/system/gpulxc-nvidia-nodes.service")
    unit_before = unit.read_text() if unit.exists() else None
    proc, changed = site(inventory, "--check", "--diff")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert changed and changed > 0
    assert "+dev0: /dev/nvidiactl,mode=0666" in proc.stdout and "+dev3: /dev/nvidia0,mode=0666" in proc.stdout
    assert "+lxc.mount.entry: tmpfs dev/shm tmpfs size=1G" in proc.stdout
    assert not Path(f"/etc/pve/lxc/{VMID}.conf").exists()
    assert (unit.read_text() if unit.exists() else None) == unit_before


def test_converge_gives_the_gpus_then_changes_nothing(inventory):
    proc, changed = site(inventory)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert changed > 0
    opened = in_ct(
        "python3",
        "-c",
        "import glob\nfor p in sorted(glob.glob('/dev/nvidia*')):\n"
        "    try: open(p)\n    except OSError as e: print(p, e.errno)",
    ).stdout.split("\n")
    assert len([line for line in opened if line.endswith(" 6")]) == 11  # all ENXIO (6): allowed, no driver
    assert len(in_ct("nvidia-smi", "-L").stdout.splitlines()) == 8
    assert in_ct("df", "--output=size", "-B1G", "/dev/shm").stdout.split()[-1] == "1"
    proc, changed = site(inventory)
    assert proc.returncode == 0
    assert changed == 0, proc.stdout[-3000:]


def test_drift_is_repaired_and_the_mac_never_changes(inventory):
    converged(inventory)
    mac_before = mac()
    path = Path(f"/etc/pve/lxc/{VMID}.conf")
    path.write_text("".join(line + "\n" for line in conf_text(VMID).splitlines() if not line.startswith("dev6:")))
    pct("set", VMID, "--cores", "1")
    other = "/var/lib/gpulxc-lab/nvidia/NVIDIA-Linux-x86_64-580.82.07.run"
    pct("push", VMID, other, "/root/other.run", "--perms", "0755")
    assert in_ct("/root/other.run", "--no-kernel-modules", "-s").returncode == 0
    assert "Driver/library version mismatch" in in_ct("nvidia-smi", "-L").stdout
    proc, changed = site(inventory)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert changed >= 2
    text = conf_text(VMID)
    assert "dev6: /dev/nvidia3,mode=0666" in text
    assert "cores: 2" in text
    assert len(in_ct("nvidia-smi", "-L").stdout.splitlines()) == 8
    assert "No such device or address" in in_ct("python3", "-c", "open('/dev/nvidia3')").stderr  # hot-plugged
    proc, changed = site(inventory)
    assert changed == 0, proc.stdout[-3000:]
    assert mac() == mac_before


@ALONE
def test_node_reboot_brings_the_container_back_with_its_gpus(inventory):
    """boot-node empties /dev of every NVIDIA node, as the reboot of a node with the .run driver does; the boot
    unit's nvidia-modprobe calls (-c255 for nvidiactl, -cN, -u -c0) make every node CT 920's devN name."""
    converged(inventory)
    proc = subprocess.run([str(REPO / "lab/boot-node")], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "nvidia-modprobe -c255" in proc.stdout and "nvidia-modprobe -u -c0" in proc.stdout
    assert pct("status", VMID).stdout == "status: running\n"
    for node in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia7"):
        assert "No such device or address" in in_ct("python3", "-c", f"open('{node}')").stderr
    assert len(in_ct("nvidia-smi", "-L").stdout.splitlines()) == 8
    proc, changed = site(inventory)
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]


@ALONE
def test_without_the_boot_unit_a_reboot_leaves_the_container_down(inventory):
    """The negative control of the test above: the same reboot with the unit disabled."""
    converged(inventory)
    wants = Path("/etc/systemd/system/multi-user.target.wants/gpulxc-nvidia-nodes.service")
    wants.unlink()
    try:
        proc = subprocess.run([str(REPO / "lab/boot-node")], capture_output=True, text=True, check=False)
        assert proc.returncode == 1
        # Proxmox's own message, for the first devN it stats (in its config hash's order; the lab's: dev0)
        assert re.search(r"Device /dev/nvidia[a-z0-9-]* does not exist", proc.stdout), proc.stdout
    finally:
        converged(inventory)  # the role enables the unit again and recreates the nodes
    assert wants.exists()


# Bad input: its breadth (every class of bad value, every class of gpulxc.sglang.pve_errors) is
# tests/unit/roles/test_bad_input.py's and tests/unit/plugins/filter/test_pve.py's; here, runs that several bad
# settings share, side by side, refused in the preflight with every message: for a CT that does not exist yet, checked
# against what the node answers (its GPUs, its template, its storage's room and kind), nothing created; and on the
# converged CT, its config left byte for byte as it was.
NEW = (
    {
        "pct_container_gpus": [0, 8],
        "pct_container_memory_mb": 2048,
        "pct_container_device_mode": "666",
        "pct_container_rootfs_size_gb": 100000,
        "pct_container_ostemplate": "local:vztmpl/nope.tar.zst",
    },
    [
        "pct_container_gpus asks for GPUs [8] but the node has 8 GPU(s)",
        "pct_container_memory_mb (2048) must cover /dev/shm",
        "pct_container_device_mode: '666' is not an octal mode such as '0666'",
        "pct_container_rootfs_storage ('local-lvm') on lab-pve has",
        "the template pct_container_ostemplate ('local:vztmpl/nope.tar.zst') is not on lab-pve",
    ],
)
NEW_STORAGE = (
    {"pct_container_rootfs_storage": "local"},
    [
        "pct_container_rootfs_storage ('local') on lab-pve does not hold containers (Proxmox: storage 'local'"
        " does not support container directories"
    ],
)
CONVERGED = (
    {
        "pct_container_net0": "name=eth0,bridge=vmbr0,ip=dhcpx",
        "pct_container_features": ["nesting=1", "nesting=0"],
        "pct_container_hostname": "ct_920",
        "pct_container_rootfs_storage": "local lvm",
        "pct_container_shm_size_gb": 0,
        "pct_container_cores": 8193,
        "pct_container_mounts": [{"host_path": "/srv/../etc", "ct_path": "/mnt/m,x"}],
        "pct_container_device_gid": "video",
        "pct_container_unprivileged": True,
    },
    [
        "pct_container_net0: 'ip=dhcpx' net0.ip: invalid format",
        "pct_container_features: 'nesting=0' features.duplicate key",
        "pct_container_hostname: 'ct_920' is not a DNS label",
        "pct_container_rootfs_storage: 'local lvm' is not a storage ID",
        "pct_container_shm_size_gb: '0' is out of range",
        "pct_container_cores: '8193' is out of range; Proxmox's cores is 1 to 8192",
        "pct_container_mounts: '/srv/../etc' entry 0: host_path: /srv/../etc contains illegal",
        "pct_container_mounts: '/mnt/m,x' entry 0: ct_path must not hold ','",
        "pct_container_device_gid: 'video' is not an integer",
        f"CT {VMID} exists and is privileged, but pct_container_unprivileged is true",
    ],
)
PREFLIGHT = "pct_container : Check the role's input and that the node can take the container"


@pytest.fixture(scope="module")
def refused(inventory):
    """The refused runs, side by side: two for a CT that does not exist yet, one on the converged CT; and the
    converged CT's config before and after them."""
    converged(inventory)
    arguments = [
        (inventory, "-e", json.dumps({"proxmox_vmid": ABSENT, **NEW[0]})),
        (inventory, "-e", json.dumps({"proxmox_vmid": ABSENT, **NEW_STORAGE[0]})),
        (inventory, "-e", json.dumps(CONVERGED[0])),
    ]
    return refused_side_by_side(site, arguments, Path(f"/etc/pve/lxc/{VMID}.conf").read_bytes)


@pytest.mark.parametrize(("case", "run"), [(NEW, 0), (NEW_STORAGE, 1), (CONVERGED, 2)], ids=["new", "storage", "ct"])
def test_bad_input_fails_in_the_preflight_before_any_change(refused, case, run):
    runs, before, after = refused
    assert_refused(runs[run], [PREFLIGHT, *case[1]])
    assert not Path(f"/etc/pve/lxc/{ABSENT}.conf").exists()
    assert after == before and b"[pve:pending]" not in after


@ALONE
def test_a_missing_gpu_node_is_made_again(inventory):
    """/dev/nvidia5 gone (a boot unit that did not run): the driver still lists GPU 5 (gpus/<pci>/information),
    so the role makes its node again with `nvidia-modprobe -c5` before the container needs it."""
    converged(inventory)
    node = Path("/dev/nvidia5")
    rdev = node.stat().st_rdev
    node.unlink()
    try:
        proc, changed = site(inventory)
        assert proc.returncode == 0 and changed >= 1, proc.stdout[-3000:]
        assert "'-c5'" in task_output(
            proc, "gpulxc.sglang.pct_container : Create the missing NVIDIA device nodes now (as the unit does at boot)"
        )
        assert node.stat().st_rdev == rdev
    finally:
        if not node.exists():
            os.mknod(node, 0o020666, rdev)
            os.chmod(node, 0o666)


def test_userspace_mismatch_with_install_disabled_fails_naming_both_versions(inventory):
    converged(inventory)
    pct("push", VMID, "/var/lib/gpulxc-lab/nvidia/NVIDIA-Linux-x86_64-580.82.07.run", "/root/o.run", "--perms", "0755")
    assert in_ct("/root/o.run", "--no-kernel-modules", "-s").returncode == 0
    before = conf_text(VMID)
    proc, changed = site(inventory, "-e", "pct_container_driver_install=false")
    assert proc.returncode != 0 and changed == 0
    assert (
        f"the NVIDIA userspace in CT {VMID} is '580.82.07' but the kernel driver on lab-pve is 580.95.05"
        in " ".join(proc.stdout.split())
    )
    assert conf_text(VMID) == before
    converged(inventory)


def test_pending_change_is_reported_and_applied_only_when_allowed(inventory):
    converged(inventory)
    keyctl = {"pct_container_features": ["nesting=1", "keyctl=1"]}
    proc, _ = site(inventory, "-e", json.dumps(keyctl))
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert f"CT {VMID} keeps running with changes pending until its next start: features" in " ".join(
        proc.stdout.split()
    )
    assert "\n[pve:pending]\nfeatures: nesting=1,keyctl=1\n" in conf_text(VMID)
    proc, changed = site(inventory, "-e", json.dumps({**keyctl, "pct_container_restart_allowed": True}))
    assert proc.returncode == 0 and changed >= 1
    assert "[pve:pending]" not in conf_text(VMID)
    assert "features: nesting=1,keyctl=1" in conf_text(VMID)
    proc, changed = site(inventory, "-e", "pct_container_restart_allowed=true")  # back to the inventory's
    assert proc.returncode == 0 and "features: nesting=1\n" in conf_text(VMID)


@contextlib.contextmanager
def lab_pve(release):
    """The lab node answers `pveversion -v` as that Proxmox VE release (9: pve-container 6.1.10, 8: 5.3.5, 8.1:
    5.0.6), and its pct hot-plugs as that release does (the lab setting GPULXC_LAB_PVE, stored by lab/setup)."""
    setting = Path("/var/lib/gpulxc-lab/pve")
    before = setting.read_text() if setting.exists() else "9\n"
    setting.write_text(release + "\n")
    try:
        yield release
    finally:
        setting.write_text(before)


@pytest.fixture(params=["8", "9"], ids=["pve8", "pve9"])
def pve_release(request):
    with lab_pve(request.param):
        yield request.param


@ALONE
def test_a_node_without_devn_is_refused_naming_its_version(inventory):
    with lab_pve("8.1"):
        proc, changed = site(inventory, "-e", json.dumps({"proxmox_vmid": ABSENT}))
    assert proc.returncode != 0 and changed == 0
    assert "lab-pve runs Proxmox VE 8.1.3 with pve-container 5.0.6, which has no devN passthrough" in " ".join(
        proc.stdout.split()
    ), proc.stdout[-3000:]
    assert not Path(f"/etc/pve/lxc/{ABSENT}.conf").exists()


def smi_gpus():
    return len([line for line in in_ct("nvidia-smi", "-L").stdout.splitlines() if line.startswith("GPU ")])


def devs(text):
    return {m.group(1): m.group(2) for m in re.finditer(r"^(dev\d+): (.*)$", text.split("\n[")[0], re.M)}


@ALONE
def test_a_longer_gpu_list_waits_for_a_restart_or_gets_it(inventory, pve_release):
    """GPUs [0, 1] -> [0, 1, 2, 3] on the running CT: the fixed nodes keep dev0..2, the GPUs only add keys.
    PVE 9 hot-plugs the new devN; PVE 8 keeps them pending, and the run succeeds saying so; check mode
    predicts which; with the restart allowed the CT ends with 4 GPUs."""
    allowed = {"pct_container_restart_allowed": True}
    proc, _ = site(inventory, "-e", json.dumps({"pct_container_gpus": [0, 1], **allowed}))
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert smi_gpus() == 2
    before = devs(conf_text(VMID))
    assert before["dev0"] == "/dev/nvidiactl,mode=0666" and before["dev3"] == "/dev/nvidia0,mode=0666"
    four = {"pct_container_gpus": [0, 1, 2, 3]}
    pending_message = f"CT {VMID} keeps running with changes pending until its next start: dev5, dev6."
    try:
        proc, _ = site(inventory, "--check", "-e", json.dumps(four))
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert (pending_message in " ".join(proc.stdout.split())) is (pve_release == "8")
        proc, _ = site(inventory, "-e", json.dumps(four))
        out = " ".join(proc.stdout.split())
        assert proc.returncode == 0, proc.stdout[-3000:]
        text = conf_text(VMID)
        assert {k: v for k, v in devs(text).items() if k in before} == before  # nothing renumbered
        if pve_release == "8":
            assert pending_message in out and "The GPU list (devN) is pending until restart" in out
            assert "\n[pve:pending]\ndev5: /dev/nvidia2,mode=0666\ndev6: /dev/nvidia3,mode=0666\n" in text
            assert smi_gpus() == 2
        else:
            assert "keeps running with changes pending" not in out and "[pve:pending]" not in text
            assert devs(text)["dev6"] == "/dev/nvidia3,mode=0666"
            assert smi_gpus() == 4
        proc, _ = site(inventory, "-e", json.dumps({**four, **allowed}))
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert "[pve:pending]" not in conf_text(VMID) and smi_gpus() == 4
    finally:
        proc, _ = site(inventory, "-e", json.dumps(allowed))  # back to the inventory's 8 GPUs
    assert proc.returncode == 0 and smi_gpus() == 8, proc.stdout[-3000:]


def test_gpu_preflight_runs_in_the_container_and_stops_at_a_wrong_sm(inventory):
    converged(inventory)
    fact = in_ct("cat", "/etc/ansible/facts.d/gpulxc_gpus.fact").stdout
    # compute capabilities only: the attention backend per SM is the stack profile's (ansible_local.gpulxc_stack)
    assert json.loads(fact)["capabilities"] == ["12.0"] and "attention_backends" not in json.loads(fact)
    assert json.loads(fact)["indexes"] == list(range(8))
    proc, _ = site(inventory, "-e", json.dumps({"gpu_preflight_compute_capabilities": ["9.0"]}))
    assert proc.returncode != 0
    failed_task = re.findall(r"TASK \[([^\]]+)\]", proc.stdout.split("fatal:")[0])[-1]
    assert failed_task == "gpulxc.sglang.gpu_preflight : Check the container's GPUs, count and driver"
    assert (
        "GPU 0 (NVIDIA RTX PRO 6000 Blackwell Server Edition, 00000000:18:00.0) has compute capability 12.0; "
        "required: 9.0" in proc.stdout
    )


def test_stopped_container_with_another_userspace_is_caught_once_started(inventory):
    converged(inventory)
    pct("push", VMID, "/var/lib/gpulxc-lab/nvidia/NVIDIA-Linux-x86_64-580.82.07.run", "/root/o.run", "--perms", "0755")
    assert in_ct("/root/o.run", "--no-kernel-modules", "-s").returncode == 0
    pct("stop", VMID)
    proc, _ = site(inventory, "-e", "pct_container_driver_install=false")
    assert proc.returncode != 0
    assert (
        f"the NVIDIA userspace in CT {VMID} is '580.82.07' but the kernel driver on lab-pve is 580.95.05"
        in " ".join(proc.stdout.split())
    )
    converged(inventory)


def test_raw_lxc_passthrough_allows_the_majors_read_from_the_node(inventory):
    """pct_container_gpu_passthrough: lxc (raw lines instead of devN): the cgroup allows the major numbers
    pct_info read from the node's device nodes (195, and nvidia-uvm's dynamic one), checked in check mode."""
    converged(inventory)
    uvm_major = os.major(Path("/dev/nvidia-uvm").stat().st_rdev)
    proc, changed = site(inventory, "--check", "--diff", "-e", "pct_container_gpu_passthrough=lxc")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert changed and changed > 0
    assert "+lxc.cgroup2.devices.allow: c 195:* rwm" in proc.stdout, proc.stdout[-3000:]
    assert f"+lxc.cgroup2.devices.allow: c {uvm_major}:* rwm" in proc.stdout
    assert "+lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file" in proc.stdout
    assert "-dev0: /dev/nvidiactl,mode=0666" in proc.stdout


def free_char_major(*taken):
    used = {
        int(line.split()[0])
        for line in Path("/proc/devices").read_text().split("Block devices:")[0].splitlines()
        if line.strip()[:1].isdigit()
    }
    return next(m for m in range(383, 255, -1) if m not in used and m not in taken)


@ALONE
def test_raw_lxc_passthrough_leaves_no_line_for_an_old_uvm_major(inventory):
    """lxc mode writes nvidia-uvm's dynamic major into an allow line: once it changed (a driver update, another
    module load order), a re-run replaces the old major's line (check mode shows it), one uvm line is left."""
    lxc_mode = {"pct_container_gpu_passthrough": "lxc", "pct_container_restart_allowed": True}
    state = Path("/var/lib/gpulxc-lab/uvm-major")
    old = int(state.read_text())
    caps = Path("/var/lib/gpulxc-lab/caps-major")
    new = free_char_major(old, int(caps.read_text()) if caps.exists() else 0)

    def uvm_nodes(major):
        state.write_text(f"{major}\n")
        for node in ("/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"):
            Path(node).unlink(missing_ok=True)
        subprocess.run(["/usr/bin/nvidia-modprobe", "-u", "-c0"], check=True)

    try:
        proc, _ = site(inventory, "-e", json.dumps(lxc_mode))
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert f"lxc.cgroup2.devices.allow: c {old}:* rwm" in conf_text(VMID)
        uvm_nodes(new)
        proc, _ = site(inventory, "--check", "--diff", "-e", json.dumps(lxc_mode))
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert f"-lxc.cgroup2.devices.allow: c {old}:* rwm" in proc.stdout
        assert f"+lxc.cgroup2.devices.allow: c {new}:* rwm" in proc.stdout
        proc, _ = site(inventory, "-e", json.dumps(lxc_mode))
        assert proc.returncode == 0, proc.stdout[-3000:]
        allows = [line for line in conf_text(VMID).splitlines() if line.startswith("lxc.cgroup2.devices.allow")]
        assert allows == ["lxc.cgroup2.devices.allow: c 195:* rwm", f"lxc.cgroup2.devices.allow: c {new}:* rwm"]
        assert "No such device or address" in in_ct("python3", "-c", "open('/dev/nvidia-uvm')").stderr
    finally:
        uvm_nodes(old)
        proc, _ = site(inventory, "-e", "pct_container_restart_allowed=true")  # back to devN passthrough
    assert proc.returncode == 0 and "lxc.cgroup2.devices.allow" not in conf_text(VMID), proc.stdout[-3000:]


def hand_edit(*lines):
    """Lines written at the top of the CT's config, as an operator editing /etc/pve/lxc/<vmid>.conf would."""
    path = Path(f"/etc/pve/lxc/{VMID}.conf")
    path.write_text("".join(line + "\n" for line in lines) + path.read_text())


def hand_undo(*lines):
    path = Path(f"/etc/pve/lxc/{VMID}.conf")
    path.write_text("".join(line + "\n" for line in path.read_text().splitlines() if line not in lines))


KEPT = "gpulxc.sglang.pct_container : Say which devN and mpN the inventory does not name, and what becomes of them"


def test_an_unnamed_devn_and_a_storage_backed_mpn_survive_a_run(inventory):
    """A /dev/fuse passed through by hand and a storage volume mounted at /data (the lab's pvesm may not
    know local-lvm, so the line is written as a hand edit would) are not the role's: they stay, and the
    run says so; the role's own devN keep their indexes."""
    converged(inventory)
    mine = [line for line in conf_text(VMID).splitlines() if line.startswith("dev")]
    lines = ("dev11: /dev/fuse", f"mp1: local-lvm:vm-{VMID}-disk-1,mp=/data,size=1G")
    hand_edit(*lines)
    try:
        before = conf_text(VMID)
        proc, changed = site(inventory, "--diff")
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert changed == 0, proc.stdout[-3000:]
        assert conf_text(VMID) == before
        said = " ".join(task_output(proc, KEPT).split())
        assert "dev11" in said and "/dev/fuse, not in the inventory: kept" in said, said
        assert "never detached" in said, said
        # even when the role owns the mounts, a storage volume is never detached
        proc, changed = site(inventory, "-e", json.dumps({"pct_container_exclusive_mounts": True}))
        assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]
        assert conf_text(VMID) == before
    finally:
        hand_undo(*lines)
    assert [line for line in conf_text(VMID).splitlines() if line.startswith("dev")] == mine


def test_two_containers_asking_for_the_same_gpu_are_refused_before_any_change(inventory):
    """CT 922, outside the inventory, passes GPU 2 through (its config on the node): CT 920, asking for all
    GPUs without declaring the sharing, is refused naming both and the GPU, its config byte-identical; the
    lab inventory declares the sharing (its suites' CTs share the simulated GPUs), which lets it pass."""
    converged(inventory)
    other = Path("/etc/pve/lxc/922.conf")
    other.write_text("arch: amd64\ndev0: /dev/nvidia2,mode=0666\nhostname: other\nmemory: 512\nostype: debian\n")
    try:
        before = conf_text(VMID)
        proc, changed = site(inventory, "-e", json.dumps({"pct_container_gpus_shared": False}))
        assert proc.returncode != 0
        said = " ".join(proc.stdout.split())
        assert "CT 920 (ct920) asks for GPU(s) 0, 1, 2" in said, proc.stdout[-3000:]
        assert "CT 922 (not in the inventory) passes GPU 2 through now" in said, proc.stdout[-3000:]
        assert changed == 0
        assert conf_text(VMID) == before
        proc, changed = site(inventory)
        assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]
    finally:
        other.unlink()


def test_proxmox_settings_pass_through_and_converge(inventory):
    """tags, startup, cpulimit, nameserver as operators set them: written by pct set, then no change (Proxmox
    writes the tags lower-cased, sorted, ';'-separated and the nameservers space-separated)."""
    converged(inventory)
    settings = {
        "pct_container_tags": ["SGLang", "gpu"],
        "pct_container_startup": "order=2,up=30",
        "pct_container_cpulimit": 4,
        "pct_container_nameserver": "1.1.1.1,8.8.8.8",
    }
    proc, changed = site(inventory, "-e", json.dumps(settings))
    assert proc.returncode == 0 and changed >= 1, proc.stdout[-3000:]
    text = conf_text(VMID)
    for line in ("tags: gpu;sglang", "startup: order=2,up=30", "cpulimit: 4", "nameserver: 1.1.1.1 8.8.8.8"):
        assert line in text.splitlines(), text
    proc, changed = site(inventory, "-e", json.dumps(settings))
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]
    # not managed any more (the defaults are empty): what is set stays
    proc, changed = site(inventory)
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]
    assert "tags: gpu;sglang" in conf_text(VMID)
