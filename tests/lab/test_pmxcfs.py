"""The lab's /etc/pve refuses chmod like pmxcfs, so Ansible's atomic move fails there as on a node,
and the collection's plain writes are what works."""

import errno
import os
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

CONF = Path("/etc/pve/lxc/939.conf")


@pytest.fixture
def conf(lab_ready):
    CONF.write_text("arch: amd64\n")
    yield CONF
    CONF.unlink(missing_ok=True)


def test_chmod_is_refused_but_plain_writes_work(conf):
    with pytest.raises(PermissionError) as info:
        os.chmod(conf, 0o600)
    assert info.value.errno == errno.EPERM
    with open(conf, "a") as handle:
        handle.write("cores: 2\n")
    assert conf.read_text() == "arch: amd64\ncores: 2\n"


def test_ansible_atomic_move_fails_there(conf):
    proc = subprocess.run(
        [
            str(REPO / ".venv/bin/ansible"),
            "lab-pve",
            "-i",
            "inventories/lab",
            "-m",
            "ansible.builtin.copy",
            "-a",
            f"content='arch: arm64\n' dest={conf} mode=0640",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env=dict(os.environ, ANSIBLE_CONFIG="ansible.cfg"),
    )
    assert proc.returncode != 0
    assert "Operation not permitted" in proc.stdout
