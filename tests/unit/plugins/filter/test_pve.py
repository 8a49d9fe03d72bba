"""gpulxc.sglang.pve_errors: pct_container's Proxmox-bound variables checked by the rules real pct applies.
Classes of bad input, several values each; every message names the variable and the offending part. The lab
and example inventories' values and the role's defaults pass."""

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.gpulxc.sglang.plugins.filter.pve import RULES, pve_errors

REPO = Path(__file__).resolve().parents[4]
DEFAULTS = yaml.safe_load((REPO / "roles/pct_container/defaults/main.yml").read_text())
LAB = yaml.safe_load((REPO / "inventories/lab/group_vars/sglang_containers.yml").read_text())

GOOD = {
    "pct_container_vmid": 200,
    "pct_container_hostname": "ct200.example.org",
    "pct_container_ostemplate": "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst",
    "pct_container_rootfs_storage": "local-lvm",
    "pct_container_rootfs_size_gb": 200,
    "pct_container_cores": 16,
    "pct_container_memory_mb": 131072,
    "pct_container_swap_mb": 0,
    "pct_container_net0": "name=eth0,bridge=vmbr0,ip=dhcp",
    "pct_container_features": ["nesting=1"],
    "pct_container_unprivileged": False,
    "pct_container_onboot": True,
    "pct_container_gpus": [0, 1, 2, 3],
    "pct_container_device_mode": "0666",
    "pct_container_device_gid": "",
    "pct_container_shm_size_gb": 64,
    "pct_container_mounts": [{"host_path": "/srv/models", "ct_path": "/mnt/models", "read_only": True}],
}

# class -> (variable, [(bad value, offending part in the message)])
CLASSES = {
    "vmid out of pve-vmid's range": (
        "pct_container_vmid",
        [
            (99, "'99'"),
            (0, "'0'"),
            (1000000000, "'1000000000'"),
            ("20a", "'20a'"),
            (-200, "'-200'"),
        ],
    ),
    "hostname not a DNS name": (
        "pct_container_hostname",
        [
            ("ct_200", "'ct_200'"),
            ("-ct200", "'-ct200'"),
            ("ct200.", "''"),
            ("a.b-.c", "'b-'"),
            ("x" * 256, "..."),
        ],
    ),
    "storage not a pve-storage-id": (
        "pct_container_rootfs_storage",
        [
            ("l", "'l'"),
            ("1local", "'1local'"),
            ("local lvm", "'local lvm'"),
            ("local-", "'local-'"),
            ("", "''"),
        ],
    ),
    "template not <storage>:vztmpl/<file>": (
        "pct_container_ostemplate",
        [
            ("debian-12.tar.zst", "'debian-12.tar.zst'"),
            ("local:iso/x.iso", "'local:iso/x.iso'"),
            ("l:vztmpl/x.tar.zst", "'l'"),
            ("local:vztmpl/a/b.tar.zst", "'local:vztmpl/a/b.tar.zst'"),
        ],
    ),
    "sizes not positive": ("pct_container_rootfs_size_gb", [(0, "'0'"), (-8, "'-8'"), ("big", "'big'")]),
    "shm size not positive": ("pct_container_shm_size_gb", [(0, "'0'"), (-1, "'-1'"), ("1G", "'1G'")]),
    "cores outside $confdesc": ("pct_container_cores", [(0, "'0'"), (8193, "'8193'"), ("two", "'two'")]),
    "memory below $confdesc's minimum": ("pct_container_memory_mb", [(15, "'15'"), (0, "'0'"), ("4G", "'4G'")]),
    "swap below $confdesc's minimum": ("pct_container_swap_mb", [(-1, "'-1'"), ("none", "'none'")]),
    "net0 property string": (
        "pct_container_net0",
        [
            ("name=eth0,colour=red", "'colour=red' net0.invalid key"),
            ("name=eth0,name=eth1", "'name=eth1' net0.duplicate key"),
            ("bridge=vmbr0,ip=dhcp", "'name' net0.name: property is missing"),
            ("name=eth0,ip=dhcpx", "'ip=dhcpx' net0.ip: invalid format"),
            ("name=eth0,firewall=maybe", "'firewall=maybe' net0.firewall: type check ('boolean')"),
            ("name=eth0,tag=5000", "'tag=5000' net0.tag: value must have a maximum value of 4094"),
            ("name=eth0,hwaddr=01:00:00:00:00:01", "'hwaddr=01:00:00:00:00:01' net0.hwaddr: invalid format"),
            ("name=eth0,type=macvlan", "'type=macvlan' net0.type: value 'macvlan' does not have a value in the enum"),
            ("eth0", "'eth0' net0.value without key"),
            ("name=eth0,gw=10.0.0", "'gw=10.0.0' net0.gw: invalid format"),
        ],
    ),
    "features property string": (
        "pct_container_features",
        [
            (["nesting=1", "nesting=0"], "'nesting=0' features.duplicate key"),
            (["nesting"], "'nesting' features.value without key"),
            (["nesting=2"], "'nesting=2' features.nesting: type check ('boolean')"),
            (["docker=1"], "'docker=1' features.invalid key"),
            (["mount=nfs,cifs"], "'cifs' features.value without key"),
            ("nesting=1", "'nesting=1' must be a list"),
        ],
    ),
    "mount paths and options": (
        "pct_container_mounts",
        [
            ([{"host_path": "srv/models", "ct_path": "/m"}], "'srv/models' entry 0: host_path must be an absolute"),
            ([{"host_path": "/srv/../etc", "ct_path": "/m"}], "'/srv/../etc' entry 0: host_path: /srv/../etc contains"),
            ([{"host_path": "/srv", "ct_path": "/m/."}], "'/m/.' entry 0: ct_path: /m/. contains illegal"),
            ([{"host_path": "/srv/a,b", "ct_path": "/m"}], "'/srv/a,b' entry 0: host_path must not hold ','"),
            ([{"host_path": "/srv", "ct_path": "/m", "read_only": "maybe"}], "'maybe' entry 0: read_only must be"),
            ([{"host_path": "/srv", "ct_path": "/m", "readonly": True}], "'readonly' entry 0: unknown key"),
            ([{"host_path": "/srv", "ct_path": "/"}], "'/' ct_path '/' is the rootfs"),
        ],
    ),
    "lists that repeat": (
        "pct_container_mounts",
        [
            (
                [{"host_path": "/a", "ct_path": "/m"}, {"host_path": "/b", "ct_path": "/m/"}],
                "'/m' is the ct_path of more",
            ),
            (
                [{"host_path": "/a", "ct_path": "/x"}, {"host_path": "/b", "ct_path": "/x"}],
                "'/x' is the ct_path of more",
            ),
        ],
    ),
    "GPU indexes": (
        "pct_container_gpus",
        [
            ([0, 0], "'0' is listed more than once"),
            ([1, "1"], "'1' is listed more than once"),
            ([-1], "'-1' is not a GPU index"),
            ([255], "'255' is not a GPU index"),
            (["a"], "'a' is not a GPU index"),
            ("some", "'some' must be 'all' or a list"),
        ],
    ),
    "device mode and gid": (
        "pct_container_device_mode",
        [
            ("666", "'666' is not an octal mode"),
            ("0668", "'0668'"),
            ("00666", "'00666'"),
        ],
    ),
    "device gid": ("pct_container_device_gid", [("video", "'video' is not an integer"), (-1, "'-1' is out of range")]),
    "booleans": ("pct_container_onboot", [("maybe", "'maybe' is not a boolean"), (2, "'2' is not a boolean")]),
}


def test_the_good_values_the_defaults_and_the_lab_inventory_pass():
    assert pve_errors(GOOD) == []
    for source in (DEFAULTS, LAB):
        values = {k: v for k, v in source.items() if k in RULES and "{{" not in str(v)}
        assert pve_errors(values) == [], values


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_each_class_of_bad_input_is_refused_naming_the_variable_and_the_part(name):
    variable, cases = CLASSES[name]
    assert len(cases) >= 2
    for value, part in cases:
        messages = pve_errors({**GOOD, variable: value})
        assert messages, (variable, value)
        assert all(m.startswith("pct_container: %s: " % variable) for m in messages), messages
        assert any(part in m for m in messages), (part, messages)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("pct_container_vmid", 999999999),
        ("pct_container_vmid", "100"),
        ("pct_container_hostname", "a.b-c.d"),
        ("pct_container_rootfs_storage", "local-zfs"),
        ("pct_container_rootfs_storage", "nfs.backup_1"),
        ("pct_container_rootfs_size_gb", 0.5),
        ("pct_container_cores", 8192),
        ("pct_container_memory_mb", 16),
        ("pct_container_net0", ""),
        ("pct_container_net0", "name=eth0,firewall=true,tag=10,ip=10.0.0.2/24,gw=10.0.0.1"),
        ("pct_container_net0", "name=eth0,ip6=auto,mtu=9000,rate=12.5,trunks=10;20"),
        ("pct_container_features", []),
        ("pct_container_features", ["nesting=1", "keyctl=yes", "mount=nfs;cifs"]),
        ("pct_container_gpus", "all"),
        ("pct_container_gpus", ["0", 3]),
        ("pct_container_device_gid", "44"),
        ("pct_container_mounts", []),
        ("pct_container_onboot", "yes"),
    ],
)
def test_what_proxmox_accepts_passes(variable, value):
    assert pve_errors({variable: value}) == []


def test_every_refused_part_is_its_own_message():
    messages = pve_errors({"pct_container_net0": "name=eth0,colour=red,tag=0", "pct_container_gpus": [2, 2, 300]})
    assert len(messages) == 4, messages


def test_an_unknown_variable_or_input_is_an_error():
    with pytest.raises(AnsibleFilterError, match="no rule for pct_container_node"):
        pve_errors({"pct_container_node": "pve1"})
    with pytest.raises(AnsibleFilterError, match="expects a dict"):
        pve_errors(["pct_container_vmid"])
