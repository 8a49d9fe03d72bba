"""The lab's reader/writer of Proxmox's container config format (lab/pve/config.py)."""

import pytest
from pve import config

SAMPLE = """#Hello%3A 100%25 sure
#second line
arch: amd64
hostname: h
lxc.cgroup2.devices.allow: c 195:* rwm
lxc.mount.entry = /dev/nvidia0 dev/nvidia0 none bind,optional,create=file
lxc.cgroup2.devices.allow: c 511:* rwm

[pve:pending]
delete: swap
memory: 1024

[before-upgrade]
arch: amd64
snaptime: 1457170803
"""


def test_round_trip_keeps_sections_raw_lines_in_order_and_description():
    conf = config.parse(SAMPLE)
    assert conf["main"]["description"] == "Hello: 100% sure\nsecond line\n"
    assert conf["main"]["lxc"] == [
        ("lxc.cgroup2.devices.allow", "c 195:* rwm"),
        ("lxc.mount.entry", "/dev/nvidia0 dev/nvidia0 none bind,optional,create=file"),
        ("lxc.cgroup2.devices.allow", "c 511:* rwm"),
    ]
    assert conf["pending"]["keys"] == {"delete": "swap", "memory": "1024"}
    assert conf["snapshots"]["before-upgrade"]["keys"]["snaptime"] == "1457170803"
    # Proxmox writes `lxc.x: v`, whatever separator it read
    assert config.write(conf) == SAMPLE.replace("lxc.mount.entry = ", "lxc.mount.entry: ")


def test_keys_are_written_in_perl_string_sort_order_then_raw_lines():
    conf = config.parse("")
    conf["main"]["keys"] = {"dev2": "/dev/nvidia2", "memory": "512", "dev10": "/dev/nvidia10", "arch": "amd64"}
    conf["main"]["lxc"] = [("lxc.mount.entry", "tmpfs dev/shm tmpfs size=1G 0 0")]
    assert config.write(conf).splitlines() == [
        "arch: amd64",
        "dev10: /dev/nvidia10",
        "dev2: /dev/nvidia2",
        "memory: 512",
        "lxc.mount.entry: tmpfs dev/shm tmpfs size=1G 0 0",
    ]


def test_no_pending_section_when_nothing_is_pending():
    conf = config.parse("arch: amd64\n")
    assert "[pve:pending]" not in config.write(conf)


def test_delete_outside_pending_is_refused():
    with pytest.raises(config.ConfigError, match=r"only allowed in \[pve:pending\]"):
        config.parse("delete: swap\n")


def test_garbage_line_is_refused():
    with pytest.raises(config.ConfigError, match="unable to parse config: not a config line"):
        config.parse("not a config line\n")


def test_encode_text_escapes_percent_colon_controls_and_non_ascii():
    assert config.encode_text("a:b%c\td é") == "a%3Ab%25c%09d %C3%A9"


def test_property_string_order_default_key_then_required_then_sorted():
    data = {"type": "veth", "ip": "dhcp", "name": "eth0", "bridge": "vmbr0", "hwaddr": "BC:24:11:00:00:01"}
    assert config.print_property_string(data, None, ("name",)) == (
        "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:01,ip=dhcp,type=veth"
    )
    assert config.print_property_string(
        {"ro": "1", "mp": "/m", "volume": "/srv", "backup": "0"}, "volume", ("mp",)
    ) == ("/srv,mp=/m,backup=0,ro=1")


def test_property_string_duplicate_key_is_refused():
    with pytest.raises(config.ConfigError, match="duplicate key"):
        config.parse_property_string("/dev/nvidia0,mode=0666,mode=0660", "path")
