"""gpulxc.sglang.pct_config against recorded container configs: idempotence, drift, check and diff
mode, raw lines written without touching other sections, and every error path."""

import fcntl
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible.plugins.loader import fragment_loader
from ansible.utils.plugin_docs import get_docstring
from ansible_collections.gpulxc.sglang.plugins.modules import pct_config
from conftest import ModuleExit as Exit
from conftest import ModuleFail as Fail

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures/pct"
SHM = "lxc.mount.entry: tmpfs dev/shm tmpfs size=1G,nosuid,nodev,create=dir 0 0"
WANT = {
    "hostname": "ct200",
    "cores": 2,
    "memory": 4096,
    "swap": 0,
    "onboot": True,
    "features": "nesting=true",
    "net0": "name=eth0,bridge=vmbr0,ip=dhcp",
    "dev0": "/dev/nvidia0,mode=0666",
    "dev1": "/dev/nvidiactl,mode=0666",
}


@pytest.fixture
def pve(tmp_path, monkeypatch, module_exits):
    """A config dir, and a recorder for the pct calls (answers: status by default 'running')."""
    calls = []
    state = {"status": "status: running", "fail": None}

    def run_command(self, args, **kwargs):
        calls.append(args[1:])
        if state["fail"] and args[1] == state["fail"][0]:
            return state["fail"][1], "", state["fail"][2]
        if args[1] == "status":
            return 0, state["status"] + "\n", ""
        return 0, "", ""

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(pct_config, "LOCK_DIR", str(tmp_path / "lock"))
    return {"dir": tmp_path, "calls": calls, "state": state}


def install(pve, fixture):
    shutil.copy(FIXTURES / fixture, pve["dir"] / "200.conf")
    return pve["dir"] / "200.conf"


def run(pve, check=False, diff=False, **args):
    args = {"vmid": 200, "config_dir": str(pve["dir"]), **args}
    if check:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    with patch_module_args(args), pytest.raises((Exit, Fail)) as info:
        pct_config.main()
    return info.type, info.value.args[0]


def sets(pve):
    return [c for c in pve["calls"] if c[0] in ("set", "create")]


def test_converged_container_is_left_alone(pve):
    path = install(pve, "200-converged.conf")
    before = path.read_text()
    kind, result = run(pve, config=WANT, exclusive=["dev"], lxc=[SHM])
    assert kind is Exit
    assert result["changed"] is False
    assert sets(pve) == []
    assert path.read_text() == before
    assert result["pending"] == [] and result["restart_required"] is False


def test_drift_is_repaired_in_one_set_call_keeping_the_mac(pve):
    path = install(pve, "200-drifted.conf")
    original = path.read_text()
    kind, result = run(
        pve,
        config={**WANT, "net0": "name=eth0,bridge=vmbr1,ip=dhcp"},
        exclusive=["dev"],
        lxc=[SHM],
        lxc_exclusive=["^lxc\\.mount\\.entry: tmpfs dev/shm "],
    )
    assert kind is Exit and result["changed"] is True
    (call,) = sets(pve)
    sent = dict(zip(call[2::2], call[3::2], strict=False))
    assert call[:2] == ["set", "200"]
    assert sent["--cores"] == "2"
    assert sent["--dev1"] == "/dev/nvidiactl,mode=0666"
    assert sent["--features"] == "nesting=1"  # pending nesting=1,keyctl=1 is not what is asked
    assert sent["--swap"] == "0"  # a pending delete counts: the key is going away
    assert sent["--net0"] == "name=eth0,bridge=vmbr1,ip=dhcp,hwaddr=BC:24:11:5A:01:7E"
    assert sent["--delete"] == "dev3"
    # the raw line is replaced in the main section only; pending and snapshot sections are untouched
    text = path.read_text()
    main, rest = text.split("\n\n", 1)
    assert main.endswith("lxc.apparmor.profile: unconfined\n" + SHM)
    assert rest == original.split("\n\n", 1)[1]
    assert "size=2G" not in main
    assert result["lxc_removed"] == ["lxc.mount.entry: tmpfs dev/shm tmpfs size=2G,nosuid,nodev,create=dir 0 0"]


def test_check_mode_changes_nothing_and_predicts_pending(pve):
    path = install(pve, "200-drifted.conf")
    before = path.read_text()
    kind, result = run(pve, check=True, diff=True, config=WANT, exclusive=["dev"], lxc=[SHM], lxc_exclusive=["dev/shm"])
    assert kind is Exit and result["changed"] is True
    assert sets(pve) == []
    assert path.read_text() == before
    assert "-cores: 1\n" in "".join("-" + line for line in result["diff"]["before"].splitlines(True))
    assert "cores: 2\n" in result["diff"]["after"]
    assert "dev3" in result["diff"]["before"] and "dev3" not in result["diff"]["after"]
    assert SHM + "\n" in result["diff"]["after"]
    # on a running CT, a changed existing devN, features and a deleted devN wait for the next start
    assert {"features", "dev3"} <= set(result["pending"])
    assert "cores" not in result["pending"]
    assert result["restart_required"] is True


def test_pending_value_equal_to_the_request_sends_nothing_but_needs_a_restart(pve):
    install(pve, "200-drifted.conf")
    want = {"features": "nesting=1,keyctl=1"}
    kind, result = run(pve, config=want)
    assert kind is Exit and result["changed"] is False
    assert sets(pve) == []
    assert result["pending"] == ["features", "swap"]
    assert result["restart_required"] is True


def test_stopped_container_needs_no_restart(pve):
    install(pve, "200-drifted.conf")
    pve["state"]["status"] = "status: stopped"
    _, result = run(pve, config={"features": "nesting=1,keyctl=1"})
    assert result["restart_required"] is False and result["running"] is False


def test_check_mode_on_a_missing_container_predicts_the_creation(pve):
    kind, result = run(
        pve,
        check=True,
        diff=True,
        ostemplate="local:vztmpl/t.tar.zst",
        create_options={"rootfs": "local:8", "unprivileged": False},
        config=WANT,
        lxc=[SHM],
    )
    assert kind is Exit and result["created"] is True and result["changed"] is True
    assert pve["calls"] == []  # check mode: nothing ran
    assert "dev0: /dev/nvidia0,mode=0666\n" in result["diff"]["after"]
    assert result["diff"]["before"] == ""


def test_create_runs_pct_create_then_writes_raw_lines(pve, monkeypatch):
    original = basic.AnsibleModule.run_command

    def run_command(self, args, **kwargs):
        if args[1] == "create":
            (pve["dir"] / "200.conf").write_text("arch: amd64\nhostname: ct200\n")
        return original(self, args, **kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    kind, result = run(
        pve,
        ostemplate="local:vztmpl/t.tar.zst",
        create_options={"unprivileged": False},
        config={"hostname": "ct200", "features": "nesting=1"},
        lxc=[SHM],
    )
    assert kind is Exit and result["created"] is True
    (call,) = sets(pve)
    assert call[:3] == ["create", "200", "local:vztmpl/t.tar.zst"]
    assert call[call.index("--unprivileged") : call.index("--unprivileged") + 2] == ["--unprivileged", "0"]
    assert (pve["dir"] / "200.conf").read_text() == "arch: amd64\nhostname: ct200\n" + SHM + "\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"vmid": 99}, "vmid: 99 is below 100"),
        ({}, "CT 200 does not exist on this node"),
        ({"lxc": ["mount.entry = x"]}, "lxc: not a raw lxc line"),
        ({"config": {"lxc.mount.entry": "x"}}, "raw key 'lxc.mount.entry' goes in the lxc option"),
    ],
)
def test_bad_input_fails_before_any_change(pve, args, message):
    kind, result = run(pve, **args)
    assert kind is Fail
    assert message in result["msg"]
    assert pve["calls"] == []


def test_pct_refusal_is_reported_with_its_message(pve):
    install(pve, "200-drifted.conf")
    pve["state"]["fail"] = ("set", 255, "Device /dev/nvidia9 does not exist\n")
    kind, result = run(pve, config={"dev9": "/dev/nvidia9"})
    assert kind is Fail
    assert "pct set 200 --dev9 /dev/nvidia9 failed: Device /dev/nvidia9 does not exist" in result["msg"]


NVIDIA_ALLOW = "lxc.cgroup2.devices.allow: c 195:* rwm"


def test_raw_lines_are_renamed_into_place_under_the_config_lock_after_pcts_write(pve, monkeypatch):
    path = install(pve, "200-converged.conf")
    inode = path.stat().st_ino
    seen = []

    def set_by_pct(self, args, **kwargs):
        # pct set writes the config (cores 4) after the module read it: that write must survive
        if args[1] == "set":
            path.write_text(path.read_text().replace("cores: 2", "cores: 4"))
        return 0, "status: running\n" if args[1] == "status" else "", ""

    real_rename = pct_config.os.rename

    def rename(src, dst):
        with open(Path(pve["dir"]) / "lock/pve-config-200.lock", "a") as other:
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
                seen.append("lock free")
            except BlockingIOError:
                seen.append("lock held")
        seen.append((Path(src).parent == Path(dst).parent, Path(src).name))
        real_rename(src, dst)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", set_by_pct)
    monkeypatch.setattr(pct_config.os, "rename", rename)
    kind, result = run(pve, config={**WANT, "cores": 4}, exclusive=["dev"], lxc=[SHM, NVIDIA_ALLOW])
    assert kind is Exit, result
    text = path.read_text()
    assert "cores: 4" in text and text.endswith(SHM + "\n" + NVIDIA_ALLOW + "\n")
    assert path.stat().st_ino != inode  # renamed over, never truncated in place
    assert seen == ["lock held", (True, "200.conf.tmp.%d" % os.getpid())]
    assert sorted(p.name for p in pve["dir"].iterdir()) == ["200.conf", "lock"]


def test_a_locked_container_is_refused_naming_the_lock(pve):
    path = install(pve, "200-converged.conf")
    path.write_text(path.read_text().replace("memory:", "lock: backup\nmemory:"))
    before = path.read_bytes()
    kind, result = run(pve, config={**WANT, "cores": 4}, lxc=[SHM, NVIDIA_ALLOW])
    assert kind is Fail
    assert result["msg"].startswith("CT 200 is locked (backup)")
    assert sets(pve) == []
    assert path.read_bytes() == before


def test_a_held_config_lock_times_out_with_proxmoxs_message(pve, monkeypatch):
    path = install(pve, "200-converged.conf")
    before = path.read_bytes()
    monkeypatch.setattr(pct_config, "LOCK_TIMEOUT", 0.2)
    (pve["dir"] / "lock").mkdir()
    with open(pve["dir"] / "lock/pve-config-200.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        kind, result = run(pve, config=WANT, lxc=[SHM, NVIDIA_ALLOW])
    assert kind is Fail
    assert "can't lock file" in result["msg"] and "got timeout" in result["msg"]
    assert path.read_bytes() == before


def test_empty_features_deletes_the_key_and_stays_converged(pve):
    path = install(pve, "200-converged.conf")
    kind, result = run(pve, config={**WANT, "features": ""}, exclusive=["dev"], lxc=[SHM])
    assert (kind, result["deleted"], result["set"]) == (Exit, ["features"], {})
    assert sets(pve) == [["set", "200", "--delete", "features"]]
    # what a `--features ''` once wrote: Proxmox ignores the line; so does the module, and sends nothing
    path.write_text(path.read_text().replace("features: nesting=1", "features: "))
    pve["calls"].clear()
    kind, result = run(pve, config={**WANT, "features": ""}, exclusive=["dev"], lxc=[SHM])
    assert (kind, result["changed"], sets(pve)) == (Exit, False, [])


def set_line(path, key, value):
    """The config with `key: value` in place of its line, or added."""
    lines = [line for line in path.read_text().splitlines() if not line.startswith(key + ":")]
    lines.insert(0, "%s: %s" % (key, value))
    keys = sorted(line for line in lines if not line.startswith("lxc."))
    path.write_text("".join(line + "\n" for line in keys + [line for line in lines if line.startswith("lxc.")]))


MAC = "hwaddr=BC:24:11:5A:01:7E"


@pytest.mark.parametrize(
    ("key", "desired", "written"),
    [
        ("net0", "name=eth0,bridge=vmbr0,ip=dhcp,firewall=true", f"name=eth0,bridge=vmbr0,firewall=1,{MAC},ip=dhcp"),
        ("net0", "name=eth0,bridge=vmbr0,link_down=no", f"name=eth0,bridge=vmbr0,{MAC},link_down=0,type=veth"),
        ("dev0", "/dev/nvidia0,mode=0666,deny-write=1", "/dev/nvidia0,mode=0666,deny-write=yes"),
        ("mp0", "/srv/models,mp=/mnt/models,ro=true", "/srv/models,mp=/mnt/models,ro=1"),
    ],
)
def test_booleans_in_property_strings_match_as_proxmox_writes_them(pve, key, desired, written):
    set_line(install(pve, "200-converged.conf"), key, written)
    kind, result = run(pve, config={**WANT, key: desired}, exclusive=["dev"], lxc=[SHM])
    assert (kind, result["changed"], sets(pve)) == (Exit, False, [])


def test_documentation_renders():
    # with the shared options of the gpulxc.sglang.pct doc fragment, as ansible-doc shows them
    doc = get_docstring(pct_config.__file__, fragment_loader, collection_name="gpulxc.sglang")[0]
    assert set(doc["options"]) == {
        "vmid",
        "ostemplate",
        "create_options",
        "config",
        "exclusive",
        "lxc",
        "lxc_exclusive",
        "config_dir",
        "pct",
        "pve_container_version",
        "devices",
        "mounts",
        "owned_devices",
    }
    json.dumps(yaml.safe_load(pct_config.RETURN))


@pytest.mark.parametrize(("version", "dev_pending"), [("5.3.5", True), ("6.1.10", False), ("", False)])
def test_check_mode_predicts_hotplug_per_pve_version(pve, version, dev_pending):
    """A new devN is hot-plugged only from pve-container 6.0.4 (PVE 9); a new bind mpN on 8 and 9."""
    install(pve, "200-converged.conf")
    want = {**WANT, "features": "nesting=1", "dev2": "/dev/nvidia1,mode=0666", "mp0": "/srv/models,mp=/mnt/models"}
    kind, result = run(pve, check=True, config=want, lxc=[SHM], pve_container_version=version)
    assert kind is Exit and result["changed"] is True
    assert set(result["set"]) == {"dev2", "mp0"}
    assert result["pending"] == (["dev2"] if dev_pending else [])
    assert result["restart_required"] is dev_pending


# --- devN/mpN the inventory does not name; Proxmox settings passed through; GPUs of other CTs (issue 21) ---

NVIDIA = ["/dev/nvidiactl,mode=0666", "/dev/nvidia-uvm,mode=0666", "/dev/nvidia0,mode=0666"]
VOLUME = "local-lvm:vm-200-disk-1,mp=/data,size=8G"
BASE = {k: v for k, v in WANT.items() if not k.startswith("dev")}


def hand_edit(path, *lines):
    """Lines added to the main section, as an operator's edit (or the web UI) would."""
    main, sep, rest = path.read_text().partition("\n\n")
    keys = [line for line in main.splitlines() if not line.startswith("lxc.")] + list(lines)
    raw = [line for line in main.splitlines() if line.startswith("lxc.")]
    path.write_text("".join(line + "\n" for line in sorted(keys) + raw) + sep + rest)


def sent(pve):
    (call,) = sets(pve)
    return dict(zip(call[2::2], call[3::2], strict=False))


def test_a_hand_added_devn_and_a_volume_mpn_are_kept_and_listed(pve):
    path = install(pve, "200-converged.conf")
    hand_edit(path, "dev2: /dev/fuse", "mp1: " + VOLUME, "mp0: /srv/old,mp=/old")
    kind, result = run(
        pve,
        diff=True,
        config=BASE,
        devices=NVIDIA[2:] + NVIDIA[:1],
        mounts=[],
        owned_devices=["^/dev/nvidia"],
        lxc=[SHM],
    )
    assert kind is Exit
    assert result["deleted"] == []
    assert set(result["kept"]) == {"dev2", "mp0", "mp1"}
    assert "never detached" in result["kept"]["mp1"]
    assert result["changed"] is False and sets(pve) == []


def test_owned_devn_no_longer_asked_for_go_and_new_ones_take_free_indexes(pve):
    path = install(pve, "200-converged.conf")  # dev0 nvidia0, dev1 nvidiactl
    hand_edit(path, "dev2: /dev/fuse", "dev4: /dev/nvidia3,mode=0666")
    kind, result = run(pve, config=BASE, devices=NVIDIA, owned_devices=["^/dev/nvidia"], lxc=[SHM])
    assert kind is Exit and result["changed"] is True
    # nvidiactl and nvidia0 keep their keys, nvidia-uvm takes dev3 (dev2 is the hand-added /dev/fuse)
    assert result["set"] == {"dev3": "/dev/nvidia-uvm,mode=0666"}
    assert result["deleted"] == ["dev4"]
    assert result["kept"] == {"dev2": "/dev/fuse, not in the inventory: kept"}
    assert sent(pve) == {"--dev3": "/dev/nvidia-uvm,mode=0666", "--delete": "dev4"}


def test_exclusive_removes_every_unnamed_devn_and_bind_mpn_never_a_volume(pve):
    path = install(pve, "200-converged.conf")
    hand_edit(path, "dev2: /dev/fuse", "mp0: /srv/old,mp=/old", "mp1: " + VOLUME)
    kind, result = run(
        pve, check=True, diff=True, config=BASE, devices=NVIDIA[2:], mounts=[], exclusive=["dev", "mp"], lxc=[SHM]
    )
    assert kind is Exit and result["changed"] is True
    assert result["deleted"] == ["dev1", "dev2", "mp0"]
    assert list(result["kept"]) == ["mp1"]
    assert "mp1: " + VOLUME in result["diff"]["after"]
    assert "dev2: /dev/fuse" in result["diff"]["before"] and "dev2" not in result["diff"]["after"]
    assert sets(pve) == []


def test_exclusive_mp_in_config_keys_keeps_a_volume_too(pve):
    hand_edit(install(pve, "200-converged.conf"), "mp1: " + VOLUME)
    kind, result = run(pve, config=WANT, exclusive=["dev", "mp"], lxc=[SHM])
    assert (kind, result["changed"], list(result["kept"])) == (Exit, False, ["mp1"])


def test_a_bind_mount_cannot_replace_a_volume_at_its_mount_point(pve):
    path = install(pve, "200-converged.conf")
    hand_edit(path, "mp0: " + VOLUME)
    before = path.read_bytes()
    kind, result = run(pve, config=BASE, devices=[], mounts=["/srv/data,mp=/data"], lxc=[SHM])
    assert kind is Fail and "storage volume local-lvm:vm-200-disk-1" in result["msg"]
    assert path.read_bytes() == before and sets(pve) == []


def test_a_path_asked_twice_is_refused(pve):
    install(pve, "200-converged.conf")
    kind, result = run(pve, config=BASE, devices=[NVIDIA[0], NVIDIA[0]], lxc=[SHM])
    assert kind is Fail and "asked for twice" in result["msg"]


def test_create_numbers_devices_and_mounts_from_zero(pve, monkeypatch):
    kind, result = run(
        pve,
        check=True,
        ostemplate="local:vztmpl/x.tar.zst",
        config=BASE,
        devices=NVIDIA,
        mounts=["/srv/models,mp=/models"],
    )
    assert kind is Exit and result["created"] is True
    assert {k: v for k, v in result["set"].items() if k[:2] in ("de", "mp")} == {
        "dev0": NVIDIA[0],
        "dev1": NVIDIA[1],
        "dev2": NVIDIA[2],
        "mp0": "/srv/models,mp=/models",
    }


@pytest.mark.parametrize(
    ("key", "desired", "written"),
    [
        ("tags", "Prod;gpu,sglang prod", "gpu;prod;sglang"),  # get_unique_tags: lower-cased, sorted, unique, ';'
        ("nameserver", "1.1.1.1,8.8.8.8", "1.1.1.1 8.8.8.8"),  # verify_nameserver_list: joined by a space
        ("searchdomain", "lab.example;example", "lab.example example"),
        ("startup", "order=2,up=30", "2,up=30"),
        ("cpulimit", "2", "2.0"),
        ("protection", True, "1"),
    ],
)
def test_proxmox_settings_match_as_proxmox_writes_them_back(pve, key, desired, written):
    set_line(install(pve, "200-converged.conf"), key, written)
    kind, result = run(pve, config={**WANT, key: desired}, exclusive=["dev"], lxc=[SHM])
    assert (kind, result["changed"], sets(pve)) == (Exit, False, [])


def test_a_changed_setting_is_sent_and_a_description_read_from_its_comment_lines(pve):
    path = install(pve, "200-converged.conf")
    path.write_text("#GPU server%3A 8 H200\n#second line\n" + path.read_text())
    want = {**WANT, "description": "GPU server: 8 H200\nsecond line\n", "tags": "sglang"}
    kind, result = run(pve, config=want, exclusive=["dev"], lxc=[SHM])
    assert kind is Exit and result["set"] == {"tags": "sglang"}
