"""Round trips of every `pct` subcommand the project uses, and Proxmox's refusals, on real LXC."""

import json
import os
import re
import subprocess
import threading
from pathlib import Path

import pytest
from conftest import REPO, TEMPLATE, conf_text, destroy, pct, pct_fails

VMID = 901
OTHER = 902


@pytest.fixture(scope="module")
def ct(lab_ready, tmp_path_factory):
    """A running CT with a GPU node (devN) and a bind mount (mpN), shared by the tests below."""
    destroy(VMID)
    share = tmp_path_factory.mktemp("share")
    (share / "hello.txt").write_text("from the node\n")
    pct(
        "create",
        VMID,
        TEMPLATE,
        "--hostname",
        "labtest",
        "--memory",
        "1024",
        "--swap",
        "0",
        "--cores",
        "2",
        "--rootfs",
        "local-lvm:4",
        "--net0",
        "name=eth0,bridge=vmbr0,ip=dhcp",
        "--features",
        "nesting=1",
        "--unprivileged",
        "0",
        "--dev0",
        "/dev/nvidia0,mode=0666",
        "--mp0",
        f"{share},mp=/models,ro=1",
    )
    pct("start", VMID)
    yield {"vmid": VMID, "share": share}
    destroy(VMID)


def in_ct(*cmd, check=True):
    return pct("exec", VMID, "--", *cmd, check=check)


def test_create_writes_proxmox_config(ct):
    lines = conf_text(VMID).splitlines()
    keys = [line.split(":", 1)[0] for line in lines]
    assert keys == sorted(keys)
    conf = dict(line.split(": ", 1) for line in lines)
    assert conf["arch"] == "amd64"
    assert conf["ostype"] == "debian"
    assert conf["hostname"] == "labtest"
    assert conf["rootfs"] == f"local-lvm:vm-{VMID}-disk-0,size=4G"
    assert re.fullmatch(r"name=eth0,bridge=vmbr0,hwaddr=BC:24:11(:[0-9A-F]{2}){3},ip=dhcp,type=veth", conf["net0"])
    assert conf["mp0"] == f"{ct['share']},mp=/models,ro=1"
    assert "unprivileged" not in conf  # written only when true


def test_create_refusals(ct):
    pct_fails("create", VMID, TEMPLATE, "--unprivileged", "0", message=f"CT {VMID} already exists on node")
    pct_fails("create", OTHER, TEMPLATE, message="unprivileged containers are not supported by the lab")
    pct_fails(
        "create",
        OTHER,
        TEMPLATE,
        "--unprivileged",
        "0",
        "--dev0",
        "/dev/nvidia99",
        message="Device /dev/nvidia99 does not exist",
    )
    pct_fails(
        "create", OTHER, TEMPLATE, "--unprivileged", "0", "--dev0", "/dev/shm", message="/dev/shm is not a device"
    )
    pct_fails(
        "create",
        OTHER,
        TEMPLATE,
        "--unprivileged",
        "0",
        "--dev0",
        "/tmp/nvidia0",
        message="/tmp/nvidia0 is not a valid device path",
    )
    pct_fails(
        "create",
        OTHER,
        "local:vztmpl/missing.tar.zst",
        "--unprivileged",
        "0",
        message="volume 'local:vztmpl/missing.tar.zst' does not exist",
    )
    # a default install's `local` has no rootdir content (pve-container create_vm)
    pct_fails(
        "create",
        OTHER,
        TEMPLATE,
        "--unprivileged",
        "0",
        "--rootfs",
        "local:4",
        message="storage: storage 'local' does not support container directories",
    )
    proc = pct_fails(
        "create",
        OTHER,
        TEMPLATE,
        "--unprivileged",
        "0",
        "--lxc.mount.entry",
        "x",
        message="Unknown option: lxc.mount.entry",
    )
    assert "400 unable to parse option" in proc.stderr
    assert not Path(f"/etc/pve/lxc/{OTHER}.conf").exists()


def test_start_status_exec(ct):
    assert pct("status", VMID).stdout == "status: running\n"
    pct_fails("start", VMID, message=f"CT {VMID} already running")
    proc = pct("exec", VMID, "--", "sh", "-c", "exit 7", check=False)
    assert proc.returncode == 7  # pct exec returns the command's own exit code
    state = in_ct("timeout", "60", "systemctl", "is-system-running", "--wait", check=False).stdout.strip()
    assert state in ("running", "degraded")
    assert in_ct("hostname").stdout.strip() == "labtest"


def test_list_format(ct):
    out = pct("list").stdout.splitlines()
    assert out[0] == "%-10s %-10s %-12s %-20s" % ("VMID", "Status", "Lock", "Name")
    assert "%-10s %-10s %-12s %-20s" % (VMID, "running", "", "labtest") in out


def test_devn_is_passed_through_with_its_mode(ct):
    assert in_ct("stat", "-c", "%t:%T %a", "/dev/nvidia0").stdout.strip() == "c3:0 666"
    # allowed but no driver: ENXIO, exactly as on the lab host; EPERM would mean the rule is missing
    proc = in_ct("python3", "-c", "open('/dev/nvidia0')", check=False)
    assert "[Errno 6] No such device or address" in proc.stderr
    # negative control: a node the CT was not given is refused by the device cgroup
    proc = in_ct("sh", "-c", "mknod /tmp/nv3 c 195 3 && python3 -c \"open('/tmp/nv3')\"", check=False)
    assert "Operation not permitted" in proc.stderr


def test_mpn_bind_mount(ct):
    assert in_ct("cat", "/models/hello.txt").stdout == "from the node\n"
    assert in_ct("touch", "/models/x", check=False).returncode != 0  # ro=1


def test_set_on_running_ct_hotplugs_or_keeps_pending(ct):
    pct("set", VMID, "--memory", "1536", "--features", "nesting=1,keyctl=1", "--dev1", "/dev/nvidia1,gid=44")
    current = pct("config", VMID, "--current").stdout
    assert "memory: 1536" in current  # applied now
    assert in_ct("cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes").stdout.strip() == str(1536 << 20)
    assert "dev1: /dev/nvidia1,gid=44" in current  # a new devN is hot-plugged
    assert in_ct("stat", "-c", "%a %g", "/dev/nvidia1").stdout.strip() == "660 44"
    assert "No such device or address" in in_ct("python3", "-c", "open('/dev/nvidia1')", check=False).stderr
    assert "features: nesting=1\n" in current  # not hot-pluggable: pending
    assert "features: nesting=1,keyctl=1" in pct("config", VMID).stdout  # shown with pending values
    # a changed existing devN is not hot-plugged over
    pct("set", VMID, "--dev0", "/dev/nvidia0,mode=0660")
    pending = pct("pending", VMID).stdout
    assert "cur dev0: /dev/nvidia0,mode=0666\nnew dev0: /dev/nvidia0,mode=0660\n" in pending
    assert "cur features: nesting=1\nnew features: nesting=1,keyctl=1\n" in pending
    pct("set", VMID, "--delete", "dev1")
    assert "del dev1: /dev/nvidia1,gid=44" in pct("pending", VMID).stdout
    text = conf_text(VMID)
    assert text.split("\n\n[pve:pending]\n")[1].splitlines() == [
        "delete: dev1",
        "dev0: /dev/nvidia0,mode=0660",
        "features: nesting=1,keyctl=1",
    ]


def test_a_new_bind_mount_is_hot_plugged_a_changed_one_waits(ct, tmp_path):
    """PVE 8 and 9 hot-plug a new bind mpN into a running CT (lab/pve/hotplug.py); a changed one stays pending."""
    (tmp_path / "hot.txt").write_text("hot\n")
    pct("set", VMID, "--mp1", f"{tmp_path},mp=/hot,ro=1")
    assert f"mp1: {tmp_path},mp=/hot,ro=1" in pct("config", VMID, "--current").stdout
    assert in_ct("cat", "/hot/hot.txt").stdout == "hot\n"
    assert in_ct("touch", "/hot/x", check=False).returncode != 0  # ro=1
    pct("set", VMID, "--mp1", f"{tmp_path},mp=/elsewhere")
    assert f"new mp1: {tmp_path},mp=/elsewhere" in pct("pending", VMID).stdout
    pct("set", VMID, "--revert", "mp1")


def test_refusals_on_set(ct):
    pct_fails("set", VMID, "--unprivileged", "1", message="unable to modify read-only option: 'unprivileged'")
    pct_fails("set", VMID, "--delete", "memory", message="unable to delete required option 'memory'")
    pct_fails("set", VMID, "--dev5", "/dev/nvidia42", message="Device /dev/nvidia42 does not exist")
    pct_fails("set", VMID, "--lxc.cgroup2.devices.allow", "c 195:* rwm", message="Unknown option")
    pct_fails("set", VMID, "--memory", "lots", message="memory: type check ('integer') failed")
    pct_fails("set", VMID, message="no options specified")


def test_push_and_pull(ct, tmp_path):
    src = tmp_path / "blob"
    src.write_bytes(bytes(range(256)) * 4096)
    pct("push", VMID, src, "/root/blob", "--perms", "0600")
    assert in_ct("stat", "-c", "%a %U", "/root/blob").stdout.strip() == "600 root"
    back = tmp_path / "back"
    pct("pull", VMID, "/root/blob", back)
    assert back.read_bytes() == src.read_bytes()


def test_push_and_pull_exit_0_when_their_worker_fails(ct, tmp_path):
    """As pct.pm's push/pull: fork_worker prints the worker's error on stderr, pct exits 0."""
    empty = tmp_path / "x"
    proc = pct("pull", VMID, "/root/missing", empty)
    assert proc.stderr == "failed to open /root/missing: No such file or directory\n"
    assert empty.read_bytes() == b""  # create_file ran first: the destination is left empty
    proc = pct("pull", VMID, "/etc/hostname", tmp_path / "no/dir/x")
    assert proc.stderr == f"failed to create file: {tmp_path / 'no/dir/x'}: No such file or directory\n"
    proc = pct("push", VMID, tmp_path / "missing", "/root/x")
    assert proc.stderr == f"failed to open {tmp_path / 'missing'} for reading\n"
    proc = pct("push", VMID, "/etc/hostname", "/nonexistent/dir/x")
    assert proc.stderr == "failed to create file: /nonexistent/dir/x: No such file or directory\n"
    assert in_ct("test", "-e", "/nonexistent", check=False).returncode == 1


def test_exec_environment_is_pcts(ct):
    env = dict(
        line.split("=", 1)
        for line in subprocess.run(
            ["/usr/sbin/pct", "exec", str(VMID), "--", "/usr/bin/env"],
            env={"PATH": "/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE": "/x", "LANG": "C.UTF-8", "TERM": "xterm"},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    )
    assert (env["PATH"], env["TERM"], env["LANG"], "SSL_CERT_FILE" in env) == (
        "/sbin:/bin:/usr/sbin:/usr/bin",
        "linux",
        "C.UTF-8",
        False,
    )


def test_refused_set_leaves_the_config_byte_identical(ct):
    before = conf_text(VMID)
    for args, message in [
        (["--net0", "name=eth0,firewall=maybe"], "net0.firewall: type check ('boolean') failed - got 'maybe'"),
        (["--hostname", "gpu_box"], "hostname: invalid format - value does not look like a valid DNS name"),
        (["--cores", "3", "--mp1", "/srv/x"], "mp1.mp: property is missing and it is not optional"),
        (["--dev3", "/dev/nvidia0,colour=red"], "invalid key in comma-separated list property: colour"),
    ]:
        pct_fails("set", VMID, *args, message=message)
        assert conf_text(VMID) == before


def test_lock_key_refuses_changes(ct):
    path = Path(f"/etc/pve/lxc/{VMID}.conf")
    before = path.read_text()
    path.write_text(before.replace("hostname:", "lock: backup\nhostname:", 1))
    try:
        locked = path.read_text()
        pct_fails("set", VMID, "--cores", "3", message="CT is locked (backup)")
        assert path.read_text() == locked
    finally:
        path.write_text(before)


def pct_config_module(**args):
    """gpulxc.sglang.pct_config on this node (the lab host), as the pct_container role runs it."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    proc = subprocess.run(
        [
            str(REPO / ".venv/bin/ansible"),
            "localhost",
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            "ansible_python_interpreter=/usr/bin/python3",
            "-m",
            "gpulxc.sglang.pct_config",
            "-a",
            json.dumps({"vmid": VMID, **args}),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_raw_line_changes_beside_pct_set_lose_nothing(ct):
    """pct_config writes raw lines under pct's config lock, renaming a re-read config into place: a pct set
    in a loop beside it loses no change, and the config never reads empty or half-written."""
    line = "lxc.cgroup2.devices.allow: c 10:200 rwm"
    stop, bad, sets, renamed = threading.Event(), [], [], []

    def setter():
        cores = 1
        while not stop.is_set():
            cores = cores % 4 + 1
            pct("set", VMID, "--cores", cores)
            sets.append(cores)

    def reader():
        path = Path(f"/etc/pve/lxc/{VMID}.conf")
        while not stop.is_set():
            try:
                text = path.read_text()
            except FileNotFoundError:
                # an open racing a rename through the lab's FUSE pmxcfs (path-based libfuse): never empty
                renamed.append(1)
                continue
            if "\nrootfs: " not in text or not text.endswith("\n"):
                bad.append(text)

    threads = [threading.Thread(target=setter), threading.Thread(target=reader)]
    for thread in threads:
        thread.start()
    try:
        for round_ in range(4):
            pct_config_module(
                lxc=[line] if round_ % 2 == 0 else [], lxc_exclusive=["^lxc.cgroup2.devices.allow: c 10:200 "]
            )
            assert (line in conf_text(VMID)) == (round_ % 2 == 0)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert len(sets) > 4, sets
    assert f"cores: {sets[-1]}\n" in conf_text(VMID)  # the last pct set survived every raw-line write
    assert line not in conf_text(VMID)
    assert bad == []


def test_reboot_applies_pending(ct):
    pct("reboot", VMID)
    text = conf_text(VMID)
    assert "[pve:pending]" not in text
    assert "features: nesting=1,keyctl=1" in text
    assert "dev1" not in text
    assert in_ct("stat", "-c", "%a", "/dev/nvidia0").stdout.strip() == "660"


def test_stopped_ct(ct, tmp_path):
    pct("shutdown", VMID, "--timeout", "30", "--forceStop", "1")
    assert pct("status", VMID).stdout == "status: stopped\n"
    pct_fails("stop", VMID, message=f"CT {VMID} not running")
    pct_fails("exec", VMID, "--", "true", message=f"container '{VMID}' not running!")
    pct_fails("push", VMID, "/etc/hostname", "/root/x", message="can only push files to a running CT")
    pct_fails("pull", VMID, "/etc/hostname", tmp_path / "x", message="can only pull files from a running VM")
    pct_fails("reboot", VMID, message=f"VM {VMID} not running")
    # on a stopped CT every change is applied directly
    pct("set", VMID, "--cores", "1", "--delete", "mp0", "--features", "nesting=1")
    text = conf_text(VMID)
    assert "[pve:pending]" not in text
    assert "cores: 1" in text
    assert "mp0" not in text
    pct("start", VMID)
    pct("stop", VMID)
    assert pct("status", VMID).stdout == "status: stopped\n"


def test_destroy(ct):
    pct("start", VMID)
    pct_fails("destroy", VMID, message=f"unable to destroy CT {VMID} - container is running")
    pct("stop", VMID)
    rootfs = Path(f"/var/lib/gpulxc-lab/lvm-thin/pve/data/vm-{VMID}-disk-0")  # local-lvm
    assert rootfs.exists()
    pct("destroy", VMID)
    assert not rootfs.exists()
    node = subprocess.check_output(["hostname", "-s"], text=True).strip()
    pct_fails("status", VMID, message=f"Configuration file 'nodes/{node}/lxc/{VMID}.conf' does not exist")
