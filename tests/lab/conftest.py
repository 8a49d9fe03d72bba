"""Tests of the lab's stand-ins: they are the ground truth every later suite relies on.

Tests marked `lxc` drive real LXC containers through the installed /usr/sbin/pct and need root and a
built lab (`lab/setup`); the test command builds it first.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "lab"))

TEMPLATE = "local:vztmpl/debian-12-gpulxclab_12.0-1_amd64.tar.zst"


def pct(*args, check=True, stdin=None):
    proc = subprocess.run(["/usr/sbin/pct", *map(str, args)], capture_output=True, text=True, check=False, stdin=stdin)
    if check and proc.returncode != 0:
        raise AssertionError(f"pct {' '.join(map(str, args))} failed ({proc.returncode}): {proc.stderr}")
    return proc


def pct_fails(*args, message):
    proc = pct(*args, check=False)
    assert proc.returncode == 255, (proc.returncode, proc.stdout, proc.stderr)
    assert message in proc.stderr, proc.stderr
    return proc


def conf_text(vmid):
    return Path(f"/etc/pve/lxc/{vmid}.conf").read_text()


def destroy(vmid):
    if Path(f"/etc/pve/lxc/{vmid}.conf").exists():
        pct("destroy", vmid, "--force", "1")


@pytest.fixture(scope="module")
def lab_ready():
    if os.geteuid() != 0 or not Path("/usr/sbin/pct").exists():
        pytest.fail("the lab is not built: run lab/setup as root (the test command does)")
    return True
