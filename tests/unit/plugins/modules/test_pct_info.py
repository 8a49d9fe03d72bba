"""gpulxc.sglang.pct_info: what it reads on the node and in the container, from recorded H200 output
(its /proc/driver/nvidia/version and device numbers) and a recorder for the pct/pvesm/systemctl calls."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible.plugins.loader import module_loader
from ansible_collections.gpulxc.sglang.plugins.modules import pct_info
from conftest import ModuleExit as Exit
from conftest import ModuleFail as Fail

H200 = Path(__file__).resolve().parents[2] / "fixtures/nvidia/h200"
PCT = Path(__file__).resolve().parents[2] / "fixtures/pct"
SMI = (H200 / "nvidia-smi.txt").read_text()
# the device numbers of the H200's dev-nodes.txt: nvidia0, nvidiactl, nvidia-uvm(-tools), nvidia-caps
H200_NODES = {
    "nvidia0": (195, 0),
    "nvidiactl": (195, 255),
    "nvidia-uvm": (238, 0),
    "nvidia-uvm-tools": (238, 1),
    "nvidia-caps/nvidia-cap1": (241, 1),
    "nvidia-caps/nvidia-cap2": (241, 2),
}


@pytest.fixture
def node(tmp_path, monkeypatch, module_exits):
    """A /dev with the H200's NVIDIA nodes (real character devices: the tests run as root), and pct's answers."""
    dev = tmp_path / "dev"
    (dev / "nvidia-caps").mkdir(parents=True)
    for name, (major, minor) in H200_NODES.items():
        os.mknod(dev / name, 0o020666, os.makedev(major, minor))
    (dev / "nvidia-not-a-device").write_text("")
    monkeypatch.setattr(pct_info, "DEVICE_GLOBS", (f"{dev}/nvidia*", f"{dev}/nvidia-caps/*"))
    state = {
        "status": (0, "status: running\n", ""),
        "exec": (0, "", ""),
        "pvesm": (0, "", ""),
        "calls": [],
        "pveversion": (0, (PCT / "pveversion-v-9.txt").read_text(), ""),
    }
    pveversion = tmp_path / "pveversion"
    pveversion.write_text("")
    monkeypatch.setattr(pct_info, "DEFAULT_PVEVERSION", str(pveversion))
    (tmp_path / "lxc").mkdir()
    monkeypatch.setattr(pct_info, "DEFAULT_CONFIG_DIR", str(tmp_path / "lxc"))
    state["lxc"] = tmp_path / "lxc"

    def run_command(self, args, **kwargs):
        state["calls"].append(args)
        if args[0].endswith("pvesm"):
            return state["pvesm"][tuple(args[1:])] if isinstance(state["pvesm"], dict) else state["pvesm"]
        if args[0].endswith("pveversion"):
            return state["pveversion"]
        if args[0] == "systemctl":
            return (0, "enabled\n", "") if args[2] == "on.service" else (1, "disabled\n", "")
        return state["status"] if args[1] == "status" else state["exec"]

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    state["dev"] = dev
    return state


def run(**args):
    args = {"vmid": 200, "driver_version_file": str(H200 / "proc-driver-nvidia-version.txt"), **args}
    with patch_module_args(args), pytest.raises((Exit, Fail)) as info:
        pct_info.main()
    return info.type is Exit, info.value.args[0]


def in_container(boot="running", nvml=("580.159.04",), smi_rc=0, smi=SMI):
    lines = [f"boot={boot}", *(f"nvml={v}" for v in nvml), f"smi_rc={smi_rc}"]
    return "\n".join(lines + [f"smi={line}" for line in smi.splitlines()]) + "\n"


def test_a_running_container_with_the_node_read_in_one_call(node):
    node["exec"] = (0, in_container(), "")
    ok, result = run()
    assert ok and not result["changed"]
    assert result["status"] == "running" and result["template"] == {}
    assert result["driver"] == {"version": "580.159.04", "open": True}
    assert [(n["path"].rsplit("/dev/", 1)[1], n["major"], n["minor"]) for n in result["device_nodes"]] == sorted(
        (name, *numbers) for name, numbers in H200_NODES.items()
    )
    assert result["container"] == {
        "boot_state": "running",
        "nvidia_userspace": "580.159.04",
        "smi_rc": 0,
        "smi_lines": SMI.splitlines(),
        "smi_gpus": 0,  # the table, not -L's lines
    }
    assert result["gpu_indexes"] == [0]
    execs = [c for c in node["calls"] if c[1] == "exec"]
    assert len(execs) == 1 and execs[0][:6] == ["/usr/sbin/pct", "exec", "200", "--", "/bin/sh", "-c"]


def test_the_script_run_in_the_container_reports_what_the_parser_reads(tmp_path):
    """The in-container script itself, run by a real shell, with stand-ins for systemctl and nvidia-smi."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text("#!/bin/sh\necho degraded\n")
    (bin_dir / "nvidia-smi").write_text(
        "#!/bin/sh\necho 'Failed to initialize NVML: Driver/library version mismatch'\nexit 18\n"
    )
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    out = subprocess.run(
        ["/bin/sh", "-c", pct_info.IN_CONTAINER],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
    ).stdout
    found = pct_info.parse_container(out)
    assert found["boot_state"] == "degraded"
    assert found["smi_rc"] == 18
    assert found["smi_lines"] == ["Failed to initialize NVML: Driver/library version mismatch"]


def test_a_container_without_nvidia_userspace_and_without_nvidia_smi(node):
    node["exec"] = (0, in_container(boot="starting", nvml=(), smi_rc=127, smi="sh: 1: nvidia-smi: not found"), "")
    ok, result = run()
    assert ok
    assert result["container"] == {
        "boot_state": "starting",
        "nvidia_userspace": "",
        "smi_rc": 127,
        "smi_lines": ["sh: 1: nvidia-smi: not found"],
        "smi_gpus": 0,
    }


def test_a_missing_container_reads_the_template_and_nothing_inside(node, tmp_path):
    node["status"] = (2, "", "Configuration file 'nodes/pve1/lxc/200.conf' does not exist\n")
    template = tmp_path / "debian.tar.zst"
    template.write_text("")
    node["pvesm"] = (0, f"{template}\n", "")
    ok, result = run(ostemplate="local:vztmpl/debian.tar.zst")
    assert ok and result["status"] == "absent"
    assert result["template"] == {"path": str(template), "exists": True, "error": ""}
    assert result["container"] == {}
    assert not [c for c in node["calls"] if c[1:2] == ["exec"]]
    node["pvesm"] = (255, "", "storage 'nope' does not exist\n")
    ok, result = run(ostemplate="nope:vztmpl/debian.tar.zst")
    assert ok and result["template"] == {"path": "", "exists": False, "error": "storage 'nope' does not exist"}


def test_a_stopped_container_is_not_entered(node):
    node["status"] = (0, "status: stopped\n", "")
    ok, result = run()
    assert ok and result["status"] == "stopped" and result["container"] == {}
    assert [c[1] for c in node["calls"]] == ["status", "-v"]  # pct status, pveversion -v


def test_files_units_and_a_driverless_node_without_gpus(node, tmp_path):
    unit = tmp_path / "on.service"
    unit.write_text("[Unit]\n")
    unit.chmod(0o640)
    ok, result = run(
        files=[str(unit), str(tmp_path / "missing")],
        units=["on.service", "off.service"],
        driver_version_file=str(tmp_path / "no-driver"),
        container=False,
    )
    assert ok
    assert result["files"] == {
        str(unit): {
            "exists": True,
            "sha1": "e24fbc79ade688df0a3d97a7e8fbc6216ea2823a",
            "mode": "0640",
            "owner": "root",
            "group": "root",
        },
        str(tmp_path / "missing"): {"exists": False},
    }
    assert result["units"] == {"on.service": "enabled", "off.service": "disabled"}
    assert result["driver"] == {"version": "", "open": False}
    assert result["container"] == {}
    ok, result = run(gpus=False)
    assert result["device_nodes"] == [] and result["driver"] == {"version": "", "open": False}
    assert result["gpu_indexes"] == []


def test_the_gpus_nvidia_smi_lists_and_the_nodes_gpu_indexes(node):
    """The GPU count pct_container checks after a change: nvidia-smi -L's GPU lines, its other lines not."""
    for index in (1, 10):
        os.mknod(node["dev"] / f"nvidia{index}", 0o020666, os.makedev(195, index))
    lines = [f"GPU {i}: NVIDIA H200 (UUID: GPU-{i})" for i in range(3)] + ["  MIG 1g.18gb Device 0: (UUID: MIG-0)"]
    node["exec"] = (0, in_container(smi="\n".join(lines)), "")
    ok, result = run()
    assert ok and result["container"]["smi_gpus"] == 3
    assert result["gpu_indexes"] == [0, 1, 10]


def test_the_old_name_pct_probe_redirects_to_pct_info():
    found = module_loader.find_plugin_with_context("gpulxc.sglang.pct_probe")
    assert found.resolved and found.resolved_fqcn == "gpulxc.sglang.pct_info"


def test_pct_failing_otherwise_fails_the_module_with_its_message(node):
    node["status"] = (13, "", "unable to connect to pmxcfs\n")
    ok, result = run()
    assert not ok and result["msg"] == "pct status 200 failed (rc 13): unable to connect to pmxcfs"
    node["status"] = (0, "status: running\n", "")
    node["exec"] = (255, "", "container 200 not running\n")
    ok, result = run()
    assert ok and result["container"] == {"error": "pct exec 200 failed (rc 255): container 200 not running"}


@pytest.mark.parametrize(
    ("release", "version", "container"),
    [("9", "9.1.1", "6.1.10"), ("8", "8.4.14", "5.3.5"), ("8.1", "8.1.3", "5.0.6")],
)
def test_the_proxmox_release_from_pveversion(node, release, version, container):
    node["pveversion"] = (0, (PCT / f"pveversion-v-{release}.txt").read_text(), "")
    ok, result = run(container=False)
    assert ok and result["pve"] == {"version": version, "container": container, "error": ""}
    assert ["-v"] in [c[1:] for c in node["calls"] if c[0].endswith("pveversion")]


def test_an_unreadable_proxmox_release_says_why(node, tmp_path):
    node["pveversion"] = (
        0,
        "pve-manager: 8.4.14 (running version: 8.4.14/b502d23c)\npve-container: not correctly installed\n",
        "",
    )
    ok, result = run(container=False)
    assert ok and result["pve"] == {
        "version": "8.4.14",
        "container": "",
        "error": "pveversion -v lists no installed pve-container",
    }
    ok, result = run(container=False, pveversion=str(tmp_path / "none"))
    assert ok and result["pve"]["error"] == f"{tmp_path / 'none'} is missing"
    ok, result = run(container=False, pve=False)
    assert ok and result["pve"] == {"version": "", "container": "", "error": ""}
    assert not [c for c in node["calls"][-1:] if c[0].endswith("pveversion")]


def test_the_character_majors_drivers_hold_now(node, tmp_path, monkeypatch):
    """nvidia-uvm's major is dynamic: what /proc/devices says now, so a line for an old major can be told apart."""
    devices = tmp_path / "devices"
    devices.write_text(
        "Character devices:\n  1 mem\n 10 misc\n195 nvidia-frontend\n238 nvidia-uvm\n"
        "241 nvidia-caps\n\nBlock devices:\n  8 sd\n259 blkext\n"
    )
    monkeypatch.setattr(pct_info, "PROC_DEVICES", str(devices))
    ok, result = run(container=False)
    assert ok and result["char_devices"] == [
        {"major": 1, "name": "mem"},
        {"major": 10, "name": "misc"},
        {"major": 195, "name": "nvidia-frontend"},
        {"major": 238, "name": "nvidia-uvm"},
        {"major": 241, "name": "nvidia-caps"},
    ]
    ok, result = run(container=False, gpus=False)
    assert ok and result["char_devices"] == []


def test_the_gpus_the_driver_lists_count_when_their_nodes_are_gone(node, tmp_path):
    """After a reboot /dev/nvidiaN may be missing: the driver's gpus/<pci>/information (recorded on the H200)
    still names each GPU's minor."""
    proc = tmp_path / "nvidia"
    shutil.copytree(H200 / "proc-driver-nvidia-gpus", proc / "gpus")
    shutil.copy(H200 / "proc-driver-nvidia-version.txt", proc / "version")
    (proc / "gpus/0000:00:07.0").mkdir()
    info = (H200 / "proc-driver-nvidia-gpus/0000:00:06.0/information").read_text()
    (proc / "gpus/0000:00:07.0/information").write_text(info.replace("Device Minor: \t 0", "Device Minor: \t 3"))
    (node["dev"] / "nvidia0").unlink()
    ok, result = run(container=False, driver_version_file=str(proc / "version"))
    assert ok and result["gpu_indexes"] == [0, 3]
    assert "/dev/nvidia0" not in [n["path"].rsplit("/dev", 1)[1] for n in result["device_nodes"]]


def pvesm_answers(layout):
    """What pvesm status prints on a default install of that layout (tests/unit/fixtures/pct/README.md)."""
    rootdir = (PCT / f"pvesm-status-{layout}-rootdir.txt").read_text()
    return {
        ("status",): (0, (PCT / f"pvesm-status-{layout}.txt").read_text(), ""),
        ("status", "--content", "rootdir"): (0, rootdir, ""),
    }


@pytest.mark.parametrize(
    ("layout", "name", "expected"),
    [
        ("lvmthin", "local-lvm", (True, True, "lvmthin", 806548467)),
        ("lvmthin", "local", (True, False, "dir", 82400468)),
        ("lvmthin", "local-zfs", (False, False, "", 0)),
        ("zfs", "local-zfs", (True, True, "zfspool", 1793237376)),
        ("zfs", "local-lvm", (False, False, "", 0)),
    ],
)
def test_the_rootfs_storage_from_pvesm_status(node, layout, name, expected):
    node["status"] = (2, "", "Configuration file 'nodes/pve1/lxc/200.conf' does not exist\n")
    node["pvesm"] = pvesm_answers(layout)
    ok, result = run(storage=name)
    assert ok, result
    storage = result["storage"]
    assert (storage["exists"], storage["rootdir"], storage["type"], storage["avail_kib"]) == expected
    rootdir = expected[1]
    assert storage["rootdir_storages"] == ["local-lvm" if layout == "lvmthin" else "local-zfs"]
    assert storage["error"] == ""
    # pvesm status without --content only when the storage is not a rootdir one
    assert len([c for c in node["calls"] if c[1:2] == ["status"] and c[0].endswith("pvesm")]) == (1 if rootdir else 2)


def test_the_storage_is_read_only_for_a_container_to_create(node):
    node["pvesm"] = pvesm_answers("lvmthin")
    ok, result = run(storage="local-lvm")
    assert ok and result["storage"] == {}
    assert not [c for c in node["calls"] if c[0].endswith("pvesm")]


def test_pvesm_failing_or_printing_something_else_says_why(node):
    node["status"] = (2, "", "Configuration file 'nodes/pve1/lxc/200.conf' does not exist\n")
    node["pvesm"] = {("status", "--content", "rootdir"): (2, "", "ipcc_send_rec[1] failed: Connection refused\n")}
    ok, result = run(storage="local-lvm")
    assert ok and "pvesm status --content rootdir failed (rc 2): ipcc_send_rec[1] failed" in result["storage"]["error"]
    node["pvesm"] = {("status", "--content", "rootdir"): (0, "local-lvm lvmthin active 1 2 3 4%\n", "")}
    ok, result = run(storage="local-lvm")
    assert "not the table pvesm status prints" in result["storage"]["error"]


@pytest.mark.parametrize(
    ("line", "unprivileged"), [("unprivileged: 1\n", True), ("", False), ("unprivileged: 0\n", False)]
)
def test_whether_the_existing_container_is_unprivileged(node, line, unprivileged):
    node["status"] = (0, "status: stopped\n", "")
    (node["lxc"] / "200.conf").write_text((PCT / "200-converged.conf").read_text() + line)
    ok, result = run()
    assert ok and result["unprivileged"] is unprivileged


def test_unprivileged_is_none_for_a_container_to_create(node):
    node["status"] = (2, "", "Configuration file 'nodes/pve1/lxc/200.conf' does not exist\n")
    ok, result = run()
    assert ok and result["unprivileged"] is None


def test_the_gpus_the_nodes_other_containers_pass_through(node):
    lxc = node["lxc"]
    (lxc / "200.conf").write_text("dev0: /dev/nvidia5\n")  # the container itself is not another user
    (lxc / "201.conf").write_text("dev0: /dev/nvidiactl\ndev1: /dev/nvidia0,mode=0666\ndev2: /dev/nvidia3\n")
    (lxc / "202.conf").write_text(
        "hostname: b\nlxc.mount.entry: /dev/nvidia1 dev/nvidia1 none bind,optional,create=file\n"
        "\n[pve:pending]\ndev0: /dev/nvidia2\n"
    )
    (lxc / "203.conf").write_text("dev0: /dev/fuse\n")  # no GPU
    (lxc / "204.conf").write_text("this is not a config\n")  # unparsable: left out
    (lxc / "205.conf.tmp.1234").write_text("dev0: /dev/nvidia7\n")  # pmxcfs' temporary name
    ok, result = run()
    assert ok and result["changed"] is False
    assert result["gpu_users"] == {"201": [0, 3], "202": [1, 2]}
    ok, result = run(gpus=False)
    assert ok and result["gpu_users"] == {}


def test_the_containers_that_pass_an_nvidia_device_through_this_one_included(node, monkeypatch):
    lxc = node["lxc"]
    monkeypatch.setattr(pct_info, "PROC_DEVICES", str(node["lxc"] / "devices"))
    (lxc / "devices").write_text("Character devices:\n  1 mem\n195 nvidia\n238 nvidia-uvm\n\nBlock devices:\n")
    (lxc / "200.conf").write_text("dev0: /dev/nvidia5\n")  # this container: listed
    (lxc / "201.conf").write_text("dev0: /dev/nvidiactl,mode=0666\n")  # the control node alone
    (lxc / "202.conf").write_text("hostname: b\n\n[pve:pending]\ndev0: /dev/nvidia-uvm\n")  # pending
    (lxc / "203.conf").write_text("lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n")
    (lxc / "204.conf").write_text("lxc.cgroup2.devices.allow: c 238:* rwm\n")  # nvidia-uvm's major, by /proc/devices
    (lxc / "205.conf").write_text("lxc.cgroup.devices.allow = c 195:* rwm\n")  # the v1 form
    (lxc / "206.conf").write_text("dev0: /dev/fuse\nlxc.cgroup2.devices.allow: c 10:229 rwm\n")  # no NVIDIA device
    (lxc / "207.conf").write_text("this is not a config\n")  # unparsable: left out
    (lxc / "1000.conf").write_text("dev1: /dev/nvidia1\n")  # sorted as numbers
    ok, result = run()
    assert ok and result["changed"] is False
    assert result["nvidia_users"] == ["200", "201", "202", "203", "204", "205", "1000"]
    ok, result = run(gpus=False)
    assert ok and result["nvidia_users"] == []
