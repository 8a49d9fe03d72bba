"""lab/setup and lab/teardown: refusal on a real Proxmox node, and a teardown that leaves nothing."""

import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import REPO, TEMPLATE, conf_text, destroy, pct

# it tears the lab down and sets it up again
pytestmark = pytest.mark.lab_alone

LAB_MADE = [
    "/usr/sbin/pct",
    "/usr/local/lib/gpulxc-lab",
    "/etc/pve",
    "/var/lib/gpulxc-lab/ssh",
    "/dev/nvidia0",
    "/dev/nvidia7",
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/usr/sbin/pvesm",
    "/usr/bin/nvidia-modprobe",
    "/usr/bin/pveversion",
]


def run(*cmd):
    return subprocess.run(list(cmd), capture_output=True, text=True, check=False)


def test_setup_refuses_a_real_proxmox_node(lab_ready):
    # In a private mount namespace, make /usr/share/perl5/PVE appear as on a Proxmox node.
    script = 'mount -t tmpfs none /usr/share/perl5 && mkdir /usr/share/perl5/PVE && exec "$1"'
    proc = run("unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(REPO / "lab/setup"))
    assert proc.returncode == 1
    assert "this is a real Proxmox VE node (/usr/share/perl5/PVE exists)" in proc.stderr


def on_node2(*cmd):
    """A command as the lab's second node (lab/setup 5b): in its sshd's namespaces."""
    pid = Path("/var/lib/gpulxc-lab/ssh/sshd-node2.pid").read_text().strip()
    return run("nsenter", "-t", pid, "-m", "-u", "--", *cmd)


def test_teardown_removes_what_setup_made_then_setup_restores_it(lab_ready):
    pct("create", 905, TEMPLATE, "--unprivileged", "0", "--rootfs", "local-lvm:4")
    pct("start", 905)
    # and one on the second node, running
    assert (
        on_node2(
            "/usr/sbin/pct", "create", "906", TEMPLATE, "--unprivileged", "0", "--rootfs", "local-lvm:4", "--start", "1"
        ).returncode
        == 0
    )
    assert run("lxc-info", "-n", "906", "-s").stdout.split()[-1] == "RUNNING"
    proc = run(str(REPO / "lab/teardown"), "--keep-template")
    assert proc.returncode == 0, proc.stderr
    try:
        left = [path for path in LAB_MADE if os.path.lexists(path)]
        assert left == []
        for vmid in (905, 906):
            assert not Path(f"/var/lib/gpulxc-lab/lvm-thin/pve/data/vm-{vmid}-disk-0").exists()
            assert not Path(f"/var/lib/lxc/{vmid}").exists()
        for port in (2222, 2223):
            assert run("ss", "-ltn", f"sport = :{port}").stdout.count("LISTEN") == 0
        assert Path("/var/lib/vz/template/cache", TEMPLATE.split("/")[-1]).exists()  # --keep-template
    finally:
        proc = run(str(REPO / "lab/setup"))
        assert proc.returncode == 0, proc.stderr
    assert all(os.path.lexists(path) for path in LAB_MADE)


def test_setup_recovers_a_lab_whose_processes_were_killed(lab_ready):
    """A session cut off (or a reboot) kills the pmxcfs stand-in and the lab sshd but leaves their
    state: a FUSE mount answering ENOTCONN and a stale sshd pid file. lab/setup brings both back,
    with the CT configs written before."""
    destroy(907)
    pct("create", 907, TEMPLATE, "--unprivileged", "0", "--rootfs", "local-lvm:4")
    try:
        for pattern in ("pmxcfs /var/lib/gpulxc-lab/pmxcfs", "sshd -f /var/lib/gpulxc-lab/ssh/sshd_config"):
            assert run("pkill", "-KILL", "-f", pattern).returncode == 0, pattern
        for _ in range(50):
            dead = run("stat", "/etc/pve/lxc/907.conf")
            if dead.returncode != 0:
                break
            time.sleep(0.1)
        assert dead.returncode != 0
        assert "Transport endpoint is not connected" in dead.stderr

        proc = run(str(REPO / "lab/setup"))
        assert proc.returncode == 0, proc.stderr
        assert "detaching /etc/pve/nodes/" in proc.stdout
        assert "rootfs: " in conf_text(907)
        for port in (2222, 2223):
            assert run("ss", "-ltn", f"sport = :{port}").stdout.count("LISTEN") == 1
        # the stand-ins alone killed: the second node's sshd lives on with a view of /etc/pve holding their dead
        # mounts, so setup starts it again
        assert run("pkill", "-KILL", "-f", "pmxcfs /var/lib/gpulxc-lab/pmxcfs").returncode == 0
        time.sleep(0.5)
        proc = run(str(REPO / "lab/setup"))
        assert proc.returncode == 0 and "restarting the sshd of lab-pve2" in proc.stdout, (proc.stdout, proc.stderr)
        seen = on_node2("sh", "-c", "hostname; readlink /etc/pve/lxc; test -d /etc/pve/nodes/lab-pve2/lxc && echo ok")
        assert seen.stdout.split() == ["lab-pve2", "nodes/lab-pve2/lxc", "ok"], seen
        # the CTs the cut-off session left (one on each node, one running) go; the lab stays set up (tools/test)
        pct("start", 907)
        assert (
            on_node2(
                "/usr/sbin/pct", "create", "908", TEMPLATE, "--unprivileged", "0", "--rootfs", "local-lvm:4"
            ).returncode
            == 0
        )
        proc = run(str(REPO / "lab/teardown"), "--containers")
        assert proc.returncode == 0 and "destroying CT 907" in proc.stdout, (proc.stdout, proc.stderr)
        assert "destroying CT 908" in proc.stdout, proc.stdout
        assert not Path("/etc/pve/lxc/907.conf").exists() and not Path("/var/lib/lxc/907").exists()
        assert not Path("/etc/pve/nodes/lab-pve2/lxc/908.conf").exists() and not Path("/var/lib/lxc/908").exists()
        assert all(os.path.lexists(path) for path in LAB_MADE)
        assert pct("list").returncode == 0
    finally:
        destroy(907)
        if Path("/etc/pve/nodes/lab-pve2/lxc/908.conf").exists():
            on_node2("/usr/sbin/pct", "destroy", "908", "--force", "1")
