"""gpulxc.sglang.pct_devices, pct_mounts, pct_lxc_devices and pct_settings: the property strings pct_container sends,
pinned byte for byte to what its Jinja built before these filters (roles/pct_container/tasks/config.yml at eb6fcd1;
the settings at 5775e4c), for the lab and the example inventories and for the options they leave at their defaults."""

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.gpulxc.sglang.plugins.filter.pct import pct_devices, pct_lxc_devices, pct_mounts, pct_settings

REPO = Path(__file__).resolve().parents[4]
DEFAULTS = yaml.safe_load((REPO / "roles/pct_container/defaults/main.yml").read_text())
CONTROL = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
CAPS = ["/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-caps/nvidia-cap2"]
EIGHT = [f"/dev/nvidia{i}" for i in range(8)] + CONTROL
EIGHT_DEVS = {
    "dev0": "/dev/nvidia0,mode=0666",
    "dev1": "/dev/nvidia1,mode=0666",
    "dev2": "/dev/nvidia2,mode=0666",
    "dev3": "/dev/nvidia3,mode=0666",
    "dev4": "/dev/nvidia4,mode=0666",
    "dev5": "/dev/nvidia5,mode=0666",
    "dev6": "/dev/nvidia6,mode=0666",
    "dev7": "/dev/nvidia7,mode=0666",
    "dev8": "/dev/nvidiactl,mode=0666",
    "dev9": "/dev/nvidia-uvm,mode=0666",
    "dev10": "/dev/nvidia-uvm-tools,mode=0666",
}


def inventory_vars(name):
    return {**DEFAULTS, **yaml.safe_load((REPO / f"inventories/{name}/group_vars/sglang_containers.yml").read_text())}


@pytest.mark.parametrize(
    ("inventory", "mp0"),
    [("lab", "/var/lib/gpulxc-lab/models,mp=/mnt/models,ro=1"), ("example", "/tank/models,mp=/mnt/models,ro=1")],
)
def test_the_shipped_inventories_get_the_strings_they_got_before(inventory, mp0):
    found = inventory_vars(inventory)
    assert (
        pct_devices(EIGHT, mode=found["pct_container_device_mode"], gid=found["pct_container_device_gid"]) == EIGHT_DEVS
    )
    assert pct_mounts(found["pct_container_mounts"]) == {"mp0": mp0}


def test_a_group_id_caps_and_mounts_without_read_only():
    assert pct_devices(["/dev/nvidia2", "/dev/nvidia5", *CONTROL, *CAPS], mode="0660", gid=44) == {
        "dev0": "/dev/nvidia2,gid=44,mode=0660",
        "dev1": "/dev/nvidia5,gid=44,mode=0660",
        "dev2": "/dev/nvidiactl,gid=44,mode=0660",
        "dev3": "/dev/nvidia-uvm,gid=44,mode=0660",
        "dev4": "/dev/nvidia-uvm-tools,gid=44,mode=0660",
        "dev5": "/dev/nvidia-caps/nvidia-cap1,gid=44,mode=0660",
        "dev6": "/dev/nvidia-caps/nvidia-cap2,gid=44,mode=0660",
    }
    mounts = [
        {"host_path": "/a", "ct_path": "/b"},
        {"host_path": "/c", "ct_path": "/d", "read_only": False},
        {"host_path": "/e", "ct_path": "/f", "read_only": "yes"},
    ]
    assert pct_mounts(mounts) == {"mp0": "/a,mp=/b", "mp1": "/c,mp=/d", "mp2": "/e,mp=/f,ro=1"}
    assert pct_devices([]) == {} and pct_mounts([]) == {}


def test_raw_lxc_lines_allow_each_major_then_bind_each_node():
    assert pct_lxc_devices(["/dev/nvidia0", "/dev/nvidia1", *CONTROL, *CAPS], [195, 238, 241]) == [
        "lxc.cgroup2.devices.allow: c 195:* rwm",
        "lxc.cgroup2.devices.allow: c 238:* rwm",
        "lxc.cgroup2.devices.allow: c 241:* rwm",
        "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file",
        "lxc.mount.entry: /dev/nvidia1 dev/nvidia1 none bind,optional,create=file",
        "lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file",
        "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file",
        "lxc.mount.entry: /dev/nvidia-uvm-tools dev/nvidia-uvm-tools none bind,optional,create=file",
        "lxc.mount.entry: /dev/nvidia-caps/nvidia-cap1 dev/nvidia-caps/nvidia-cap1 none bind,optional,create=file",
        "lxc.mount.entry: /dev/nvidia-caps/nvidia-cap2 dev/nvidia-caps/nvidia-cap2 none bind,optional,create=file",
    ]


def test_a_mount_without_its_paths_is_named():
    with pytest.raises(AnsibleFilterError, match="host_path and ct_path"):
        pct_mounts([{"host_path": "/a"}])


SETTINGS = ("tags", "description", "startup", "protection", "nameserver", "searchdomain", "cpulimit")
GOOD_SETTINGS = {
    "tags": ["gpu", "SGLang_2", "a+b.c-d"],
    "startup": "order=2,up=60,down=30",
    "cpulimit": "12.5",
    "protection": True,
    "description": "x\ny",
    "nameserver": "1.1.1.1 2001:db8::53 fe80::1%vmbr0",
    "searchdomain": "lab.example x",
}


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        ({}, {}),  # the defaults: nothing managed
        (GOOD_SETTINGS, {**GOOD_SETTINGS, "tags": "gpu;SGLang_2;a+b.c-d"}),
        ({"protection": False, "cpulimit": 0}, {"protection": False, "cpulimit": "0"}),
    ],
)
def test_empty_settings_are_not_managed_and_set_ones_are_sent(given, sent):
    defaults = {key: DEFAULTS["pct_container_" + key] for key in SETTINGS}
    assert pct_settings({**defaults, **given}) == sent
