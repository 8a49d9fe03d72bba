"""The lab's `pct` stand-in (lab/pve), as strict as pve-container: property strings and top-level values
checked by Proxmox's rules (classes of bad input, each refused with Proxmox's message), a refused
`pct set` leaving the config byte-identical, the config lock and a `lock:` key, exit codes, the
environment of `pct exec`, and push/pull failing inside their worker with exit 0. No container: the
config store is a temporary /etc/pve, the CT's state is patched."""

import fcntl
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "lab"))
from pve import config as pveconf  # noqa: E402
from pve import pct, schema  # noqa: E402
from pve.config import ConfigError  # noqa: E402

sys.path.remove(str(REPO / "lab"))

pytestmark = pytest.mark.timed  # its waits and fakes time what they test (tests/unit/conftest.py)

BASE = (
    "arch: amd64\n"
    "cores: 2\n"
    "dev0: /dev/null,mode=0666\n"
    "hostname: ct200\n"
    "memory: 2048\n"
    "net0: name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:01,ip=dhcp,type=veth\n"
    "ostype: debian\n"
    "rootfs: local:200/subvol-200-disk-0.subvol,size=8G\n"
    "swap: 512\n"
    "lxc.cgroup2.devices.allow: c 195:* rwm\n"
)


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A node with CT 200 (stopped) in a temporary /etc/pve; returns the config path."""
    monkeypatch.setattr(pct, "PVE_DIR", tmp_path / "pve")
    monkeypatch.setattr(pct, "LOCK_DIR", tmp_path / "lock")
    monkeypatch.setattr(pct, "nodename", lambda: "lab")
    monkeypatch.setattr(pct.lxc, "state", lambda vmid: "stopped")
    monkeypatch.setattr(pct.os, "geteuid", lambda: 0)
    path = tmp_path / "pve/nodes/lab/lxc/200.conf"
    path.parent.mkdir(parents=True)
    path.write_text(BASE)
    return path


def run(capsys, *argv):
    code = pct.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- property strings: each class of bad input, refused with Proxmox's message --------------------------

BAD = [
    # (key, value, message part)
    ("net0", "name=eth0,colour=red", "invalid key in comma-separated list property: colour"),
    ("net0", "name=eth0,name=eth1", "duplicate key in comma-separated list property: name"),
    ("net0", "bridge=vmbr0", "net0.name: property is missing and it is not optional"),
    ("net0", "name=eth0,firewall=maybe", "net0.firewall: type check ('boolean') failed - got 'maybe'"),
    ("net0", "name=eth0,type=macvlan", "net0.type: value 'macvlan' does not have a value in the enumeration 'veth'"),
    ("net0", "name=eth0,tag=5000", "net0.tag: value must have a maximum value of 4094"),
    ("net0", "name=eth0,mtu=big", "net0.mtu: type check ('integer') failed - got 'big'"),
    ("net0", "name=eth0,ip=10.0.0.300/24", "net0.ip: invalid format - value does not look like a valid ipv4"),
    ("net0", "name=eth0,hwaddr=01:00:00:00:00:01", "valid unicast MAC address"),
    ("net0", "eth0", "value without key, but schema does not define a default key"),
    ("net0", "name=eth0,bridge=", "missing key in comma-separated list property"),
    ("mp0", "/srv/models", "mp0.mp: property is missing and it is not optional"),
    ("mp0", "/srv/models,mp=/mnt/../etc", "mp0.mp: invalid format - /mnt/../etc contains illegal character sequences"),
    ("mp0", "/srv/models,mp=/mnt/m,ro=sometimes", "mp0.ro: type check ('boolean') failed - got 'sometimes'"),
    ("mp0", "/srv/a,/srv/b,mp=/mnt/m", "duplicate key in comma-separated list property: volume"),
    ("mp0", "/srv/models,mp=/mnt/m,size=lots", "mp0.size: invalid format - value does not look like a valid disk size"),
    ("mp0", "/srv/models,mp=/mnt/m,mountoptions=rw", "mp0.mountoptions: value does not match the regex pattern"),
    ("dev0", "/tmp/null", "dev0.path: invalid format - /tmp/null is not a valid device path"),
    ("dev0", "/dev/../etc/passwd", "is not a valid device path"),
    ("dev0", "/dev/null,mode=666", "dev0.mode: value does not match the regex pattern"),
    ("dev0", "/dev/null,uid=-1", "dev0.uid: value must have a minimum value of 0"),
    ("dev0", "/dev/null,deny-write=perhaps", "dev0.deny-write: type check ('boolean') failed"),
    ("dev0", "mode=0666", "Path is not defined for passthrough device dev0"),
    ("dev0", "/dev/gpulxc-no-such-node", "Device /dev/gpulxc-no-such-node does not exist"),
    ("features", "nesting=1,docker=1", "invalid key in comma-separated list property: docker"),
    ("features", "nesting=2", "features.nesting: type check ('boolean') failed - got '2'"),
    ("features", "mount=nfs|cifs", "features.mount: value does not match the regex pattern"),
    ("rootfs", "local:8,acl=maybe", "rootfs.acl: type check ('boolean') failed"),
    ("rootfs", "size=8G", "rootfs.volume: property is missing and it is not optional"),
    ("hostname", "gpu_box", "hostname: invalid format - value does not look like a valid DNS name"),
    ("hostname", "-gpu", "value does not look like a valid DNS name"),
    ("hostname", "gpu..lab", "value does not look like a valid DNS name"),
    ("hostname", "a" * 256, "hostname: value may only be 255 characters long"),
    ("arch", "x86_64", "arch: value 'x86_64' does not have a value in the enumeration"),
    ("cores", "0", "cores: value must have a minimum value of 1"),
    ("cores", "two", "cores: type check ('integer') failed - got 'two'"),
    ("lock", "holiday", "lock: value 'holiday' does not have a value in the enumeration"),
]


@pytest.mark.parametrize(("key", "value", "message"), BAD, ids=[f"{k}={v[:30]}" for k, v, _ in BAD])
def test_bad_values_are_refused_with_proxmox_message(key, value, message):
    with pytest.raises(ConfigError) as exc:
        schema.check_value(key, value)
    assert message in str(exc.value)


GOOD = [
    ("net0", "name=eth0,bridge=vmbr0,firewall=yes,ip=10.0.0.5/24,gw=10.0.0.1,ip6=auto,tag=10,mtu=1500"),
    ("net0", "name=eth0,firewall=TRUE,link_down=off"),
    ("mp0", "/srv/models,mp=/mnt/models,ro=1,backup=no"),
    ("mp0", "volume=/srv/models,mp=/mnt/models"),
    ("dev0", "/dev/null,mode=0666,uid=0,gid=0,deny-write=on"),
    ("dev0", "path=/dev/null"),
    ("features", "nesting=1,fuse=yes,mount=nfs;cifs"),
    ("rootfs", "local:8"),
    ("hostname", "gpu-box.lab.example"),
    ("hostname", "CT200"),
    ("onboot", "yes"),
]


@pytest.mark.parametrize(("key", "value"), GOOD)
def test_good_values_are_accepted(key, value):
    schema.check_value(key, value)


@pytest.mark.parametrize(
    ("key", "value", "written"),
    [
        # print_lxc_network: name (required) first, then sorted; booleans canonical; type veth; a MAC generated
        (
            "net0",
            "type=veth,name=eth0,firewall=yes,hwaddr=BC:24:11:00:00:01",
            "name=eth0,firewall=1,hwaddr=BC:24:11:00:00:01,type=veth",
        ),
        (
            "net0",
            "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:01,link_down=FALSE",
            "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:01,link_down=0,type=veth",
        ),
        # print_ct_mountpoint: the volume bare, then mp (required), then sorted; sizes by format_size
        ("mp0", "ro=true,mp=/mnt/m,volume=/srv/m,size=1024M", "/srv/m,mp=/mnt/m,ro=1,size=1G"),
        # devN, features and rootfs are stored as given
        ("dev0", "path=/dev/null,deny-write=yes", "path=/dev/null,deny-write=yes"),
        ("features", "nesting=true", "nesting=true"),
    ],
)
def test_values_written_back_as_proxmox_writes_them(key, value, written):
    assert schema.canonical(key, value) == written


def test_generated_mac_is_proxmox_oui_and_unicast():
    net = schema.canonical("net0", "name=eth0")
    hwaddr = pveconf.parse_property_string(net)["hwaddr"]
    assert hwaddr.startswith("BC:24:11:")
    schema.check_value("net0", net)


# --- pct set: refused calls change nothing ----------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["--net0", "name=eth0,colour=red"],
        ["--hostname", "gpu_box"],
        ["--dev1", "/dev/gpulxc-no-such-node"],
        ["--cores", "4", "--mp0", "/srv/m"],  # one bad key refuses the whole call
        ["--onboot", "perhaps"],
        ["--lxc.cgroup2.devices.allow", "c 1:1 rwm"],
        ["--delete", "memory"],
        ["--delete", "colour"],
        ["--unprivileged", "1"],
    ],
)
def test_refused_set_leaves_config_byte_identical(node, capsys, argv):
    before = node.read_bytes()
    code, _, err = run(capsys, "set", "200", *argv)
    assert code != 0, err
    assert node.read_bytes() == before
    assert "[pve:pending]" not in node.read_text()


def test_refusal_exit_code_is_a_die_not_255(node, capsys):
    code, _, err = run(capsys, "set", "200", "--hostname", "gpu_box")
    assert (code, err.splitlines()[0]) == (pct.EXIT_DIE, "400 Parameter verification failed.")
    code, _, err = run(capsys, "status", "201")
    assert code == pct.EXIT_DIE
    assert "Configuration file 'nodes/lab/lxc/201.conf' does not exist" in err


def test_set_writes_booleans_as_proxmox_does(node, capsys):
    code, _, err = run(
        capsys, "set", "200", "--onboot", "yes", "--net0", "name=eth0,hwaddr=BC:24:11:00:00:01,firewall=on"
    )
    assert code == 0, err
    keys = pveconf.parse(node.read_text())["main"]["keys"]
    assert keys["onboot"] == "1"
    assert keys["net0"] == "name=eth0,firewall=1,hwaddr=BC:24:11:00:00:01,type=veth"


def test_set_rewrites_tags_and_dns_lists_as_update_pct_config_does(node, capsys):
    code, _, err = run(
        capsys,
        "set",
        "200",
        "--tags",
        "Prod,gpu;prod sglang",
        "--nameserver",
        "1.1.1.1,8.8.8.8",
        "--searchdomain",
        "a.example;b.example",
    )
    assert code == 0, err
    keys = pveconf.parse(node.read_text())["main"]["keys"]
    assert (keys["tags"], keys["nameserver"], keys["searchdomain"]) == (
        "gpu;prod;sglang",
        "1.1.1.1 8.8.8.8",
        "a.example b.example",
    )


def test_set_fails_when_a_device_node_is_missing(node, capsys):
    """update_lxc_config runs after the write and stats every devN (LXC.pm): a lost node fails even --cores."""
    node.write_text(BASE.replace("dev0: /dev/null,mode=0666", "dev0: /dev/gpulxc-no-such-node,mode=0666"))
    code, _, err = run(capsys, "set", "200", "--cores", "4")
    assert (code, err.strip()) == (2, "Device /dev/gpulxc-no-such-node does not exist")


def test_lock_key_refuses_set_and_start(node, capsys):
    node.write_text(BASE.replace("hostname:", "lock: backup\nhostname:"))
    before = node.read_bytes()
    code, _, err = run(capsys, "set", "200", "--cores", "4")
    assert (code, err.strip()) == (pct.EXIT_DIE, "CT is locked (backup)")
    assert node.read_bytes() == before
    code, _, err = run(capsys, "start", "200")
    assert (code, err.strip()) == (pct.EXIT_TASK, "CT is locked (backup)")


def test_set_waits_for_the_config_lock_then_times_out(node, capsys, monkeypatch):
    monkeypatch.setattr(pct, "LOCK_TIMEOUT", 0.2)
    pct.LOCK_DIR.mkdir(parents=True)
    with open(pct.lock_path(200), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        code, _, err = run(capsys, "set", "200", "--cores", "4")
    assert code == pct.EXIT_DIE
    assert "trying to acquire lock..." in err
    assert f"can't lock file '{pct.lock_path(200)}' - got timeout" in err
    assert "cores: 2" in node.read_text()


def test_set_holds_the_config_lock_while_writing(node, capsys, monkeypatch):
    seen = []

    def save(vmid, conf):
        with open(pct.lock_path(vmid), "a") as other:
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
                seen.append("free")
            except BlockingIOError:
                seen.append("held")

    monkeypatch.setattr(pct, "save", save)
    assert run(capsys, "set", "200", "--cores", "4")[0] == 0
    assert seen == ["held"]


# --- pct exec's environment ---------------------------------------------------------------------------------


def test_exec_environment_is_pcts():
    env = pct.exec_environment(
        {
            "PATH": "/usr/local/bin:/usr/bin",
            "SSL_CERT_FILE": "/x",
            "SSL_CERT_DIR": "/y",
            "LANG": "C.UTF-8",
            "TERM": "xterm",
        }
    )
    assert env == {"PATH": "/sbin:/bin:/usr/sbin:/usr/bin", "LANG": "C.UTF-8", "TERM": "linux"}
    assert pct.exec_argv(200, {}, ["id"]) == ["lxc-attach", "-n", "200", "--keep-env", "--", "id"]
    assert pct.exec_argv(200, {"keep-env": "0"}, ["id"])[3] == "--clear-env"


def test_exec_refusals(node, capsys):
    code, _, err = run(capsys, "exec", "200", "--", "true")
    assert (code, err.strip()) == (pct.EXIT_DIE, "container '200' not running!")


# --- push / pull: worker errors print on stderr and exit 0 -------------------------------------------------


def test_push_pull_refuse_a_stopped_ct_before_the_worker(node, capsys, tmp_path):
    code, _, err = run(capsys, "push", "200", str(tmp_path / "x"), "/root/x")
    assert (code, err.strip()) == (pct.EXIT_DIE, "can only push files to a running CT")
    code, _, err = run(capsys, "pull", "200", "/root/x", str(tmp_path / "x"))
    assert code == pct.EXIT_DIE
    assert err.startswith("can only pull files from a running VM at ")


def test_push_of_a_missing_source_exits_0(node, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(pct.lxc, "state", lambda vmid: "running")
    code, out, err = run(capsys, "push", "200", str(tmp_path / "missing"), "/root/x")
    assert (code, out, err.strip()) == (0, "", f"failed to open {tmp_path / 'missing'} for reading")


def test_pull_into_a_missing_directory_exits_0(node, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(pct.lxc, "state", lambda vmid: "running")
    dest = tmp_path / "no/such/dir/x"
    code, _, err = run(capsys, "pull", "200", "/etc/hostname", str(dest))
    assert (code, err.strip()) == (0, f"failed to create file: {dest}: No such file or directory")


def test_push_perms_as_pct_reads_them():
    assert pct.transfer_options({"perms": "700"})[2] == "700"
    assert pct.transfer_options({"perms": "0x1ff"})[2] == "777"
    with pytest.raises(pct.PctError, match="invalid mode: '09'"):
        pct.transfer_options({"perms": "9"})
