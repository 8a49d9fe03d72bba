"""The lab's storage (lab/pve/storage.py, `pvesm`, `pct create`'s rootfs): a default install's storage.cfg,
`pvesm status` in pve-storage's format, and `pct create` refusing a storage without `rootdir` content as
pve-container does. No container: storage.cfg and the backing directories are temporary."""

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "lab"))
from pve import pct, storage  # noqa: E402

sys.path.remove(str(REPO / "lab"))

TEMPLATE = "local:vztmpl/debian-12-gpulxclab_12.0-1_amd64.tar.zst"


@pytest.fixture
def node(tmp_path, monkeypatch):
    """storage.cfg as the installer writes it, `local` at tmp/vz, local-lvm's volumes under tmp/lvm."""
    cfg = storage.DEFAULT_CFG.replace("/var/lib/vz", str(tmp_path / "vz"))
    (tmp_path / "storage.cfg").write_text(cfg)
    monkeypatch.setattr(storage, "STORAGE_CFG", tmp_path / "storage.cfg")
    monkeypatch.setattr(storage, "LVM_BACKING", tmp_path / "lvm")
    monkeypatch.setattr(pct, "PVE_DIR", tmp_path / "pve")
    monkeypatch.setattr(pct, "LOCK_DIR", tmp_path / "lock")
    monkeypatch.setattr(pct, "nodename", lambda: "lab")
    monkeypatch.setattr(pct.os, "geteuid", lambda: 0)
    (tmp_path / "vz/template/cache").mkdir(parents=True)
    (tmp_path / "vz/template/cache" / TEMPLATE.rpartition("/")[2]).write_bytes(b"")
    return tmp_path


def run(capsys, main, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_default_install_has_local_without_rootdir_and_local_lvm_with_it():
    ids = storage.parse_config(storage.DEFAULT_CFG)
    assert ids["local"] == {"type": "dir", "path": "/var/lib/vz", "content": {"iso", "vztmpl", "backup"}}
    assert ids["local-lvm"]["type"] == "lvmthin" and ids["local-lvm"]["content"] == {"rootdir", "images"}


def test_status_prints_pve_storages_columns(node, capsys):
    code, out, err = run(capsys, storage.main, "status")
    assert code == 0, err
    lines = out.splitlines()
    # pvesm.pm $print_status: "%-${maxlen}s %10s %10s %15s %15s %15s %8s" (maxlen: longest name + 1)
    assert lines[0] == "Name             Type     Status     Total (KiB)      Used (KiB) Available (KiB)        %"
    assert [line.split()[:3] for line in lines[1:]] == [["local", "dir", "active"], ["local-lvm", "lvmthin", "active"]]
    total, used, avail = (int(n) for n in lines[2].split()[3:6])
    assert total > 0 and 0 < avail <= total and used <= total
    assert re.fullmatch(r" *[0-9]+\.[0-9]{2}%", lines[2][-8:])  # "% 7.2f%%": e.g. " 42.17%"


def test_status_with_content_rootdir_lists_only_local_lvm(node, capsys):
    code, out, _ = run(capsys, storage.main, "status", "--content", "rootdir")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["local-lvm"]
    code, out, _ = run(capsys, storage.main, "status", "--content", "vztmpl,rootdir")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["local", "local-lvm"]


@pytest.mark.parametrize("args", [("--storage", "local-zfs"), ("--storage", "local", "--content", "rootdir")])
def test_status_of_a_storage_not_listed_says_no_such_storage(node, capsys, args):
    code, out, err = run(capsys, storage.main, "status", *args)
    assert code == 2 and out == ""
    assert err == "400 Parameter verification failed.\nstorage: No such storage.\n"


def test_a_disabled_storage_is_listed_as_disabled(node, capsys):
    (node / "storage.cfg").write_text(
        storage.DEFAULT_CFG.replace("\tcontent rootdir,images\n", "\tcontent rootdir,images\n\tdisable\n")
    )
    _, out, _ = run(capsys, storage.main, "status")
    assert out.splitlines()[2].split() == ["local-lvm", "lvmthin", "disabled", "0", "0", "0", "N/A"]
    _, out, _ = run(capsys, storage.main, "status", "--content", "rootdir")
    assert out.splitlines()[1:] == []


def test_path_of_a_template_and_of_a_thin_volume(node, capsys):
    assert run(capsys, storage.main, "path", TEMPLATE)[1].strip().endswith("/vz/template/cache/" + TEMPLATE[13:])
    assert run(capsys, storage.main, "path", "local-lvm:vm-200-disk-0")[1] == "/dev/pve/vm-200-disk-0\n"
    code, _, err = run(capsys, storage.main, "path", "local-zfs:vm-200-disk-0")
    assert code == 2 and err == "storage 'local-zfs' does not exist\n"


@pytest.mark.parametrize(
    ("rootfs", "message"),
    [
        ("local:4", "storage: storage 'local' does not support container directories"),
        ("local-zfs:4", "storage 'local-zfs' does not exist"),
    ],
)
def test_create_refuses_a_storage_without_rootdir_content(node, capsys, rootfs, message):
    code, _, err = run(capsys, pct.main, "create", "300", TEMPLATE, "--unprivileged", "0", "--rootfs", rootfs)
    assert code == 2 and message in err
    assert not (node / "pve/nodes/lab/lxc/300.conf").exists()
    assert not list((node / "vz").glob("images/*")) and not list(node.glob("lvm/*/*/*"))


def test_local_lvm_allocates_a_thin_volume_per_container(node):
    volid, path = storage.alloc_rootfs("local-lvm", 300)
    assert volid == "local-lvm:vm-300-disk-0" and path == node / "lvm/pve/data/vm-300-disk-0"
    path.mkdir()
    assert storage.alloc_rootfs("local-lvm", 300)[0] == "local-lvm:vm-300-disk-1"
    storage.free_rootfs(volid)
    assert not path.exists() and (node / "lvm/pve/data").is_dir()
