"""The lab's hot-plug rules per Proxmox VE release (lab/pve/hotplug.py, after pve-container's
vmconfig_hotplug_pending at 5.3.5 = PVE 8 and 6.1.10 = PVE 9), and the pveversion stand-in's output."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lab"))
from pve import hotplug, pveversion

CURRENT = {"dev0": "/dev/nvidiactl,mode=0666", "mp0": "/srv/models,mp=/mnt/models", "features": "nesting=1"}


def conf(key, value):
    return {"main": {"keys": dict(CURRENT)}, "pending": {"keys": {key: value}}}


@pytest.mark.parametrize(
    ("key", "value", "pve8", "pve9"),
    [
        ("dev1", "/dev/nvidia0,mode=0666", False, True),  # a new devN: only PVE 9
        ("dev0", "/dev/nvidia-uvm,mode=0666", False, False),  # a changed devN: never
        ("mp1", "/srv/cache,mp=/cache", True, True),  # a new bind mpN: both
        ("mp0", "/srv/other,mp=/mnt/models", False, False),  # a changed mpN: never
        ("net0", "name=eth0,bridge=vmbr0", True, True),
        ("cores", "4", True, True),
        ("memory", "4096", True, True),
        ("features", "nesting=1,keyctl=1", False, False),
        ("rootfs", "local:200/vm-200-disk-0.raw,size=8G", False, False),
    ],
)
def test_what_a_running_container_takes_at_once_per_release(key, value, pve8, pve9):
    assert hotplug.hotplug_allowed(key, conf(key, value), version="5.3.5") is pve8
    assert hotplug.hotplug_allowed(key, conf(key, value), version="6.1.10") is pve9


def test_device_hotplug_starts_at_6_0_4_and_deletes_of_dev_and_mp_never_hot():
    new_dev = conf("dev1", "/dev/nvidia0")
    assert not hotplug.hotplug_allowed("dev1", new_dev, version="6.0.3")
    assert hotplug.hotplug_allowed("dev1", new_dev, version="6.0.4")
    assert not any(hotplug.hot_delete_allowed(k) for k in ("dev0", "mp0", "features", "net10"))
    assert all(hotplug.hot_delete_allowed(k) for k in ("net0", "cores", "swap", "cpulimit", "unused3"))


@pytest.mark.parametrize(("setting", "container"), [("9", "6.1.10"), ("8", "5.3.5"), ("8.1", "5.0.6"), ("", "6.1.10")])
def test_the_lab_setting_picks_the_release_pveversion_prints(tmp_path, monkeypatch, setting, container):
    monkeypatch.setattr(pveversion, "SETTING", tmp_path / "pve")
    (tmp_path / "pve").write_text(setting + "\n")
    assert hotplug.container_version() == container
    lines = pveversion.output(verbose=True).splitlines()
    assert lines[0].startswith("proxmox-ve: ") and "(running kernel: " in lines[0]
    assert lines[1].startswith("pve-manager: ") and "(running version: " in lines[1]
    assert f"pve-container: {container}" in lines
    assert pveversion.output(verbose=False).startswith("pve-manager/")
    new_dev = conf("dev1", "/dev/nvidia0")
    assert hotplug.hotplug_allowed("dev1", new_dev) is (container == "6.1.10")
