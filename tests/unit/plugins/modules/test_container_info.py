"""gpulxc.sglang.container_info: the container facts uv_venv checks - glibc, the venv's Python, the cache mount,
the wheelhouse's uv wheel and target - read from fake files and a recorded Python probe."""

import os
from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpulxc.sglang.plugins.modules import container_info
from conftest import ModuleExit as Exit

UV_WHEEL = "uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
TARGET = "# wheelhouse target: Python 3.11, x86_64-manylinux_2_36\n# index: https://pypi.org/simple\n"


@pytest.fixture
def container(monkeypatch, module_exits):
    state = {
        "python": (0, "3.11\n", ""),
        "glibc": "glibc 2.36",
        "mounts": set(),
        "arch": "x86_64",
        "pythons": {"/usr/bin/python3"},
    }
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, args, **kw: state["python"])
    monkeypatch.setattr(container_info.os, "confstr", lambda name: state["glibc"])
    monkeypatch.setattr(container_info.os.path, "ismount", lambda path: path in state["mounts"])
    monkeypatch.setattr(container_info, "MOUNTINFO", "/nonexistent/mountinfo")  # os.path.ismount, as recorded
    monkeypatch.setattr(container_info.platform, "machine", lambda: state["arch"])
    monkeypatch.setattr(container_info.os, "access", lambda path, mode: path in state["pythons"])
    return state


def run(**args):
    with patch_module_args({"python": "/usr/bin/python3", **args}), pytest.raises(Exit) as info:
        container_info.main()
    return info.value.args[0]


def test_reads_glibc_arch_and_the_python_version(container):
    result = run()
    assert (result["glibc"], result["arch"], result["python"]["version"]) == ("2.36", "x86_64", "3.11")
    assert result["changed"] is False and result["cache_mounted"] is None and result["wheelhouse"] is None


def test_an_old_glibc_and_a_python_that_does_not_run(container):
    container["glibc"] = "glibc 2.31"
    container["python"] = (1, "", "Fatal Python error: init_fs_encoding")
    result = run()
    assert result["glibc"] == "2.31"
    assert result["python"] == {
        "path": "/usr/bin/python3",
        "version": "",
        "error": "Fatal Python error: init_fs_encoding",
    }


def test_a_python_that_is_not_there(container):
    result = run(python="/usr/bin/python3.99")
    assert result["python"] == {
        "path": "/usr/bin/python3.99",
        "version": "",
        "error": "/usr/bin/python3.99: no such executable",
    }


def test_the_cache_must_be_a_mount_point(container):
    assert run(cache_dir="/var/cache/uv")["cache_mounted"] is False
    container["mounts"].add("/var/cache/uv")
    assert run(cache_dir="/var/cache/uv")["cache_mounted"] is True


# /proc/self/mountinfo in a lab CT whose /var/cache/uv-shared is an mpN bind mount of a node directory on the
# node's own file system: os.path.ismount says False there (same device), mountpoint(1) says it is one
MOUNTINFO = """\
1351 1209 253:0 /var/lib/vz/images/950/rootfs / rw,relatime master:1 - ext4 /dev/vda rw
1352 1351 253:0 /var/lib/gpulxc-lab/uv-cache /var/cache/uv-shared rw,relatime master:1 - ext4 /dev/vda rw
1353 1351 253:0 /srv/models /srv/my\\040models ro,relatime master:1 - ext4 /dev/vda rw
"""


def test_a_bind_mount_from_the_same_file_system_is_a_mount_point(container, monkeypatch, tmp_path):
    (tmp_path / "mountinfo").write_text(MOUNTINFO)
    monkeypatch.setattr(container_info, "MOUNTINFO", str(tmp_path / "mountinfo"))
    assert run(cache_dir="/var/cache/uv-shared")["cache_mounted"] is True  # os.path.ismount: False here
    assert run(cache_dir="/srv/my models")["cache_mounted"] is True
    assert run(cache_dir="/var/cache/uv")["cache_mounted"] is False


def test_a_wheelhouse_for_this_container_fits(container, tmp_path):
    (tmp_path / UV_WHEEL).touch()
    (tmp_path / "stack.in").write_text(TARGET)
    wheelhouse = run(wheelhouse=str(tmp_path), uv_wheel=UV_WHEEL)["wheelhouse"]
    assert wheelhouse == {
        "has_uv": True,
        "fits": True,
        "target": {"python": "3.11", "platform": "x86_64-manylinux_2_36", "arch": "x86_64", "glibc": "2.36"},
    }


@pytest.mark.parametrize(
    ("stack_in", "fits"),
    [
        ("# wheelhouse target: Python 3.12, x86_64-manylinux_2_36\n", False),  # another Python
        ("# wheelhouse target: Python 3.11, x86_64-manylinux_2_39\n", False),  # a newer glibc
        ("# wheelhouse target: Python 3.11, aarch64-manylinux_2_36\n", False),  # another arch
        ("# wheelhouse target: Python 3.11, x86_64-manylinux_2_28\n", True),  # an older glibc installs
        ("# wheelhouse target: Python 3.11, x86_64-manylinux2014\n", True),  # 2014 is glibc 2.17
        (None, False),  # no stack.in: an unknown target
    ],
)
def test_a_wheelhouse_for_another_target_does_not_fit(container, tmp_path, stack_in, fits):
    (tmp_path / UV_WHEEL).touch()
    if stack_in:
        (tmp_path / "stack.in").write_text(stack_in)
    wheelhouse = run(wheelhouse=str(tmp_path), uv_wheel=UV_WHEEL)["wheelhouse"]
    assert wheelhouse["fits"] is fits and (wheelhouse["target"] is None) == (stack_in is None)


def test_a_wheelhouse_without_the_uv_wheel(container, tmp_path):
    assert run(wheelhouse=str(tmp_path), uv_wheel=UV_WHEEL)["wheelhouse"]["has_uv"] is False
    assert os.listdir(tmp_path) == []


RECORDED = Path(__file__).resolve().parents[2] / "fixtures/container"


def test_debian_packages_from_the_recorded_status_file(container, monkeypatch):
    monkeypatch.setattr(container_info, "DPKG_STATUS", str(RECORDED / "dpkg-status.txt"))
    result = run(python="", debian_packages=["ninja-build", "g++", "python3-dev", "libc6", "gcc-13"])
    assert result["debian_packages"] == {
        "ninja-build": "installed",
        "g++": "installed",
        "python3-dev": "installed",
        "libc6": "installed",
        "gcc-13": "not-installed",
    }
    assert result["python"] == {"path": "", "version": "", "error": ""}  # no python asked: none probed


def test_a_removed_package_keeps_its_state_and_a_missing_status_file_knows_none(container, monkeypatch, tmp_path):
    # `dpkg -r` of a package with conffiles leaves its stanza as "deinstall ok config-files" (dpkg(1), Status field)
    text = (RECORDED / "dpkg-status.txt").read_text()
    removed = text.replace(
        "Package: ninja-build\nStatus: install ok installed", "Package: ninja-build\nStatus: deinstall ok config-files"
    )
    (tmp_path / "status").write_text(removed)
    monkeypatch.setattr(container_info, "DPKG_STATUS", str(tmp_path / "status"))
    assert run(debian_packages=["ninja-build", "g++"])["debian_packages"] == {
        "ninja-build": "config-files",
        "g++": "installed",
    }
    monkeypatch.setattr(container_info, "DPKG_STATUS", str(tmp_path / "absent"))
    assert run(debian_packages=["g++"])["debian_packages"] == {"g++": "not-installed"}


def test_the_uv_version_from_its_recorded_output(container, monkeypatch):
    container["pythons"].add("/usr/local/bin/uv")
    container["python"] = (0, (RECORDED / "uv-version.txt").read_text(), "")
    assert run(uv="/usr/local/bin/uv")["uv_version"] == "0.13.9"
    assert container_info.parse_uv_version("uv 0.9.5") == "0.9.5"
    assert container_info.parse_uv_version("bash: uv: command not found") == ""
    assert run(uv="/usr/local/bin/uv-missing")["uv_version"] == ""  # not there: empty, not a failed module
    assert run()["uv_version"] == ""
