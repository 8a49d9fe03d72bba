"""lab/setup and lab/teardown: refusal on a real Proxmox node, and a teardown that leaves nothing."""

import os
import subprocess
from pathlib import Path

from conftest import REPO, TEMPLATE, pct

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
]


def run(*cmd):
    return subprocess.run(list(cmd), capture_output=True, text=True, check=False)


def test_setup_refuses_a_real_proxmox_node(lab_ready):
    # In a private mount namespace, make /usr/share/perl5/PVE appear as on a Proxmox node.
    script = 'mount -t tmpfs none /usr/share/perl5 && mkdir /usr/share/perl5/PVE && exec "$1"'
    proc = run("unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(REPO / "lab/setup"))
    assert proc.returncode == 1
    assert "this is a real Proxmox VE node (/usr/share/perl5/PVE exists)" in proc.stderr


def test_teardown_removes_what_setup_made_then_setup_restores_it(lab_ready):
    pct("create", 905, TEMPLATE, "--unprivileged", "0")
    pct("start", 905)
    proc = run(str(REPO / "lab/teardown"), "--keep-template")
    assert proc.returncode == 0, proc.stderr
    try:
        left = [path for path in LAB_MADE if os.path.lexists(path)]
        assert left == []
        assert not Path("/var/lib/vz/images/905").exists()
        assert not Path("/var/lib/lxc/905").exists()
        assert run("ss", "-ltn", "sport = :2222").stdout.count("LISTEN") == 0
        assert Path("/var/lib/vz/template/cache", TEMPLATE.split("/")[-1]).exists()  # --keep-template
    finally:
        proc = run(str(REPO / "lab/setup"))
        assert proc.returncode == 0, proc.stderr
    assert all(os.path.lexists(path) for path in LAB_MADE)
