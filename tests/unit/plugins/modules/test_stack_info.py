"""gpulxc.sglang.stack_info on fake virtual environments (dist-info trees), instance configurations and router
directories under tmp_path."""

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpulxc.sglang.plugins.modules import stack_info
from conftest import ModuleExit as Exit

REPO = Path(__file__).resolve().parents[4]


def dist(venv, name, version, python="python3.11"):
    info = venv / "lib" / python / "site-packages" / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


@pytest.fixture
def container(tmp_path):
    """A converged container: both venvs, instance configurations 0 and 1, a keyed router on loopback."""
    venv, router_venv, config, router = (tmp_path / p for p in ("venv", "smg-venv", "sglang", "smg"))
    installed = [
        ("sglang", "0.5.12"),
        ("torch", "2.11.0"),
        ("flashinfer_python", "0.6.11.post1"),
        ("sglang-kernel", "0.4.2.post2"),
        ("nvidia-cuda-nvcc", "13.2.78"),
        ("numpy", "2.3.0"),
    ]
    for name, version in installed:
        dist(venv, name, version)
    dist(router_venv, "smg", "1.13.0")
    config.mkdir()
    (config / "instance-0.yaml").write_text(
        '# Ansible managed\nmodel-path: "/dev/shm/Qwen3.6-27B"\nserved-model-name: "Qwen3.6-27B"\nport: 30000\n'
    )
    (config / "instance-1.yaml").write_text(
        'model-path: "/dev/shm/Qwen3.6-27B"\nserved-model-name: "other"\nhost: "0.0.0.0"\nport: 30001\n'
        'api-key: "never-shown"\n'
    )
    router.mkdir()
    (router / "router-args.json").write_text(json.dumps(["--host", "127.0.0.1", "--port", "8990", "--policy", "x"]))
    (router / "tenant-api-keys").write_text("# tenant:key, one a line (gpulxc.sglang.sglang_router)\nlab:secret\n")
    return {"venv": str(venv), "router_venv": str(router_venv), "config_dir": str(config), "router_dir": str(router)}


def run(args, monkeypatch, hostname="10.0.0.5 fd00::5\n"):
    calls = []

    def run_command(self, argv, **kwargs):
        calls.append(argv)
        return 0, hostname, ""

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, **kw: "/usr/bin/" + name)
    with patch_module_args({"_ansible_check_mode": True, **args}), pytest.raises(Exit) as info:
        stack_info.main()
    return info.value.args[0], calls


def test_a_converged_container(container, module_exits, monkeypatch):
    result, calls = run(container, monkeypatch)
    assert result["changed"] is False
    assert result["versions"] == {
        "sglang": "0.5.12",
        "torch": "2.11.0",
        "flashinfer-python": "0.6.11.post1",
        "sglang-kernel": "0.4.2.post2",
        "nvidia-cuda-nvcc": "13.2.78",
        "smg": "1.13.0",
    }
    assert result["stack"] == (
        "sglang 0.5.12, torch 2.11.0, flashinfer-python 0.6.11.post1, sglang-kernel 0.4.2.post2,"
        " nvidia-cuda-nvcc 13.2.78, smg 1.13.0"
    )
    assert result["model"] == "Qwen3.6-27B"  # instance 0's, not instance 1's
    assert result["config"] == container["config_dir"] + "/instance-0.yaml"
    assert result["router"] == {
        "url": "http://127.0.0.1:8990",
        "keyed": True,
        "host": "127.0.0.1",
        "metrics": None,
        "tls": None,
    }
    # instance 0 names no host: sglang's default; instance 1 binds every address with a key, which is never returned
    assert result["servers"] == [
        {"instance": 0, "host": "127.0.0.1", "port": 30000, "keyed": False},
        {"instance": 1, "host": "0.0.0.0", "port": 30001, "keyed": True},
    ]
    assert "never-shown" not in json.dumps(result)
    assert calls == []  # a router on loopback needs no address lookup


def test_the_last_occurrence_of_a_key_wins_as_in_yaml_safe_load(container, module_exits, monkeypatch):
    text = (
        'served-model-name: "first"\nmodel-path: /dev/shm/m\n'
        "# served-model-name: commented\nserved-model-name: 'it''s the last'\n"
    )
    Path(container["config_dir"], "instance-0.yaml").write_text(text)
    assert yaml.safe_load(text)["served-model-name"] == "it's the last"  # what SGLang's parser reads
    result, _ = run(container, monkeypatch)
    assert result["model"] == "it's the last"


def test_model_path_without_a_served_name_and_the_lowest_instance(container, module_exits, monkeypatch):
    Path(container["config_dir"], "instance-0.yaml").unlink()
    Path(container["config_dir"], "instance-10.yaml").write_text("served-model-name: ten\n")
    Path(container["config_dir"], "instance-1.yaml").write_text('model-path: "/dev/shm/Qwen3.6-27B"\n')
    result, _ = run(container, monkeypatch)
    assert result["model"] == "/dev/shm/Qwen3.6-27B"
    assert result["config"].endswith("/instance-1.yaml")


def test_no_router_and_no_configuration(container, module_exits, monkeypatch, tmp_path):
    result, calls = run(
        {**container, "router_dir": str(tmp_path / "absent"), "config_dir": str(tmp_path / "no")}, monkeypatch
    )
    assert result["router"] is None and calls == []
    assert result["model"] is None and result["config"] is None
    assert result["stack"].endswith("smg 1.13.0")  # the router's venv is read all the same


def test_a_router_on_every_address_is_reported_at_the_first_one_without_a_key(container, module_exits, monkeypatch):
    router = Path(container["router_dir"])
    args = ["--host", "0.0.0.0", "--port", "8000", "--prometheus-host", "0.0.0.0", "--prometheus-port", "29000"]
    (router / "router-args.json").write_text(json.dumps(args))
    (router / "tenant-api-keys").write_text("# tenant:key, one a line (gpulxc.sglang.sglang_router)\n")
    result, calls = run(container, monkeypatch)
    assert result["router"] == {
        "url": "http://10.0.0.5:8000",
        "keyed": False,
        "host": "0.0.0.0",
        "metrics": {"host": "0.0.0.0", "port": 29000},
        "tls": None,
    }
    assert calls == [["/usr/bin/hostname", "-I"]]


def test_a_router_behind_its_front_is_reported_at_the_front_with_its_certificate(container, module_exits, monkeypatch):
    router = Path(container["router_dir"])
    args = ["--host", "127.0.0.1", "--port", "18000", "--prometheus-host", "127.0.0.1", "--prometheus-port", "29000"]
    (router / "router-args.json").write_text(json.dumps(args))
    (router / "front").mkdir()
    (router / "front/front.json").write_text(json.dumps({"host": "::", "port": 8000, "tls": True}))
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=t",
            "-keyout",
            str(router / "front/tls.key"),
            "-out",
            str(router / "front/tls.crt"),
        ],
        check=True,
        capture_output=True,
    )
    printed = subprocess.run(
        ["openssl", "x509", "-in", str(router / "front/tls.crt"), "-noout", "-fingerprint", "-sha256"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result, calls = run(container, monkeypatch)
    assert result["router"] == {
        "url": "https://10.0.0.5:8000",
        "keyed": True,
        "host": "::",
        "metrics": {"host": "127.0.0.1", "port": 29000},
        "tls": {"certificate": str(router / "front/tls.crt"), "sha256": printed.strip().split("=", 1)[1]},
    }
    assert calls == [["/usr/bin/hostname", "-I"]]


def test_empty_venvs(module_exits, monkeypatch, tmp_path):
    result, _ = run(
        {
            "venv": str(tmp_path / "a"),
            "router_venv": str(tmp_path / "b"),
            "config_dir": str(tmp_path),
            "router_dir": str(tmp_path),
        },
        monkeypatch,
    )
    assert result["versions"] == {} and result["stack"] == ""


def test_the_defaults_are_the_shared_layout():
    """The play passes the paths the roles published; without those facts the defaults are roles/gpulxc's."""
    layout = yaml.safe_load((REPO / "roles/gpulxc/defaults/main.yml").read_text())
    options = yaml.safe_load(stack_info.DOCUMENTATION)["options"]
    assert options["venv"]["default"] == layout["gpulxc_venv"]
    assert options["router_venv"]["default"] == layout["gpulxc_router_venv"]
    assert options["router_dir"]["default"] == layout["gpulxc_router_dir"]
    assert options["config_dir"]["default"] == layout["gpulxc_config_dir"]
