"""The lab's nvidia-modprobe (lab/bin/nvidia-modprobe) makes exactly the nodes the real one makes for the same
options (NVIDIA/nvidia-modprobe nvidia-modprobe.c main()): run as a program against a scratch /dev (root)."""

import os
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
TOOL = REPO / "lab/bin/nvidia-modprobe"
UVM, CAPS = 508, 507


@pytest.fixture
def node(tmp_path):
    (tmp_path / "dev").mkdir()
    (tmp_path / "state").mkdir()
    (tmp_path / "state/uvm-major").write_text(f"{UVM}\n")
    (tmp_path / "state/caps-major").write_text(f"{CAPS}\n")
    mig = tmp_path / "proc/capabilities/mig"
    mig.mkdir(parents=True)
    (mig / "config").write_text("DeviceFileMinor: 1\nDeviceFileMode: 256\nDeviceFileModify: 1\n")
    (mig / "monitor").write_text("DeviceFileMinor: 2\nDeviceFileMode: 292\nDeviceFileModify: 1\n")
    env = dict(
        os.environ,
        GPULXC_LAB_DEV_ROOT=str(tmp_path),
        GPULXC_LAB_STATE=str(tmp_path / "state"),
        GPULXC_LAB_PROC_DRIVER=str(tmp_path / "proc"),
    )

    def modprobe(*args):
        return subprocess.run([str(TOOL), *args], capture_output=True, text=True, env=env, check=False)

    def nodes():
        found = {}
        for path in sorted((tmp_path / "dev").rglob("*")):
            info = path.lstat()
            if stat.S_ISCHR(info.st_mode):
                found[str(path.relative_to(tmp_path))] = (
                    os.major(info.st_rdev),
                    os.minor(info.st_rdev),
                    "%04o" % stat.S_IMODE(info.st_mode),
                )
        return found

    modprobe.nodes = nodes
    modprobe.root = tmp_path
    return modprobe


def test_c_n_makes_only_that_gpu_node_and_c_255_the_control_node(node):
    assert node("-c0").returncode == 0
    assert node("-c", "3").returncode == 0
    assert node.nodes() == {"dev/nvidia0": (195, 0, "0666"), "dev/nvidia3": (195, 3, "0666")}
    assert node("--create-nvidia-device-file=255").returncode == 0
    assert node.nodes()["dev/nvidiactl"] == (195, 255, "0666")
    assert len(node.nodes()) == 3


def test_with_u_the_c_numbers_are_uvm_minors(node):
    assert node("-u", "-c0").returncode == 0
    assert node.nodes() == {"dev/nvidia-uvm": (UVM, 0, "0666"), "dev/nvidia-uvm-tools": (UVM, 1, "0666")}
    assert node("-u").returncode == 0  # loads the module, makes no node
    assert len(node.nodes()) == 2


def test_modeset_caps_and_a_wrong_node_replaced(node):
    (node.root / "dev/nvidiactl").write_text("not a device")
    assert node("-c255", "-m").returncode == 0
    assert node.nodes() == {"dev/nvidiactl": (195, 255, "0666"), "dev/nvidia-modeset": (195, 254, "0666")}
    proc = node(
        "-f", str(node.root / "proc/capabilities/mig/config"), "-f", str(node.root / "proc/capabilities/mig/monitor")
    )
    assert proc.returncode == 0, proc.stderr
    assert node.nodes()["dev/nvidia-caps/nvidia-cap1"] == (CAPS, 1, "0400")
    assert node.nodes()["dev/nvidia-caps/nvidia-cap2"] == (CAPS, 2, "0444")


@pytest.mark.parametrize("args", [["-c256"], ["-c", "x"], ["-c"], ["-f", "/etc/passwd"], ["--nvswitch"]])
def test_what_the_real_tool_refuses_fails_with_1_and_makes_nothing(node, args):
    assert node(*args).returncode == 1
    assert node.nodes() == {}
