"""gpulxc.sglang.cuda_toolkit_info: the pip CUDA toolkit's layout read in one call, from ldconfig -p and ldd output
in the forms glibc 2.36 (Debian 12) prints, and real directory trees for the CCCL comparisons."""

import shutil
from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpulxc.sglang.plugins.modules import cuda_toolkit_info
from conftest import ModuleExit as Exit

LDCONFIG = """547 libs found in cache `/etc/ld.so.cache'
\tlibz3.so.4 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz3.so.4
\tlibcuda.so.1 (libc6) => /lib/i386-linux-gnu/libcuda.so.1
\tlibcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1
\tlibcuda.so (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so
\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6
"""
LDD = """\tlinux-vdso.so.1 (0x00007ffd6c5f1000)
\tlibcudart.so.13 => {home}/lib/libcudart.so.13 (0x00007f0c8a200000)
\tlibcuda.so.1 => /lib/x86_64-linux-gnu/libcuda.so.1 (0x00007f0c88400000)
\tlibnvrtc.so.13 => not found
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0c88000000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f0c8a4f0000)
"""


@pytest.fixture
def venv(tmp_path, monkeypatch, module_exits):
    """A purelib with nvidia/cu13 (nvcc, the CCCL headers) and FlashInfer's bundled CCCL; recorded command output."""
    purelib = tmp_path / "site-packages"
    home = purelib / "nvidia/cu13"
    for path in ("bin/nvcc", "include/nv/target", "include/cccl/nv/target", "include/cccl/cuda/std/type_traits"):
        (home / path).parent.mkdir(parents=True, exist_ok=True)
        (home / path).write_text(path.removeprefix("include/"))
    bundled = purelib / "flashinfer/data/cccl/libcudacxx/include"
    for path in ("nv/target", "cuda/std/type_traits"):
        (bundled / path).parent.mkdir(parents=True, exist_ok=True)
        (bundled / path).write_text(path)
    state = {
        "purelib": (0, f"{purelib}\n", ""),
        "ldconfig": (0, LDCONFIG, ""),
        "ninja": (0, "", ""),
        "ldd": (0, LDD.format(home=home), ""),
        "python3": (0, "", ""),
        "calls": [],
    }

    def run_command(self, args, environ_update=None, **kwargs):
        state["calls"].append((args, environ_update))
        name = Path(args[0]).name
        return state["purelib" if name == "python" else name]

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    state.update(home=home, bundled=bundled, tmp=tmp_path)
    return state


def run(venv, **args):
    with patch_module_args({"venv": str(venv["tmp"] / "venv"), **args}), pytest.raises(Exit) as info:
        cuda_toolkit_info.main()
    return info.value.args[0]


def test_cuda_home_is_the_stacks_own_directory_not_the_venv_link(venv):
    """The venv a link to a stack (sglang_stack): CUDA_HOME names the stack, so a server started with it keeps its
    toolkit when the link is switched to another stack."""
    link = venv["tmp"] / "venv-link"
    link.symlink_to(venv["tmp"])
    venv["purelib"] = (0, f"{link}/site-packages\n", "")
    result = run(venv)
    assert result["cuda_home"] == str(venv["home"]) and result["purelib"] == str(venv["tmp"] / "site-packages")


def test_the_layout_and_the_drivers_libcuda_in_one_call(venv):
    result = run(venv)
    assert not result["changed"] and result["error"] == ""
    assert result["cuda_home"] == str(venv["home"]) and result["nvcc"]
    assert result["libcuda"] == {"cached": True, "driver": "/lib/x86_64-linux-gnu/libcuda.so.1"}
    assert result["cccl_missing"] == [] and result["flashinfer_cccl"] == {}
    assert [Path(args[0]).name for args, _ in venv["calls"]] == ["python", "ldconfig"]


def test_no_driver_library_and_missing_headers(venv):
    venv["ldconfig"] = (0, "\tlibcuda.so.1 (libc6) => /lib/i386-linux-gnu/libcuda.so.1\n", "")
    (venv["home"] / "include/cccl/nv/target").unlink()
    result = run(venv)
    assert result["libcuda"] == {"cached": True, "driver": ""}  # a 32-bit one is no driver for us
    assert result["cccl_missing"] == ["cccl/nv/target"]
    venv["ldconfig"] = (0, LDCONFIG.replace("libcuda", "libother"), "")
    assert run(venv)["libcuda"] == {"cached": False, "driver": ""}


def test_a_venv_whose_python_does_not_run(venv):
    venv["purelib"] = (127, "", "No such file or directory\n")
    result = run(venv)
    assert result["purelib"] == "" and result["cuda_home"] == "" and not result["nvcc"]
    assert result["error"] == "No such file or directory"


def test_a_missing_venv_is_an_answer_not_a_failure(tmp_path, module_exits):
    """Check mode on a fresh container reads before uv_venv made the venv: commands that are not there."""
    args = {
        "venv": str(tmp_path / "no-venv"),
        "ninja_dir": str(tmp_path),
        "env_file": str(tmp_path / "none.env"),
        "binary": str(tmp_path / "validate"),
    }
    with patch_module_args(args), pytest.raises(Exit) as info:
        cuda_toolkit_info.main()
    result = info.value.args[0]
    assert result["purelib"] == "" and "No such file or directory" in result["error"]
    assert not result["ninja_up_to_date"]


def test_flashinfers_cccl_trees_that_differ_or_are_missing(venv):
    result = run(venv, flashinfer_cccl=True)
    assert result["flashinfer_cccl"] == {"path": str(venv["bundled"]), "missing": [], "differs": ["cuda"]}
    shutil.copytree(venv["bundled"] / "cuda", venv["home"] / "include/cuda")
    assert run(venv, flashinfer_cccl=True)["flashinfer_cccl"]["differs"] == []
    (venv["home"] / "include/cuda/std/type_traits").write_text("changed")
    assert run(venv, flashinfer_cccl=True)["flashinfer_cccl"]["differs"] == ["cuda"]
    shutil.rmtree(venv["bundled"] / "nv")
    assert run(venv, flashinfer_cccl=True)["flashinfer_cccl"]["missing"] == ["nv"]


def test_ninja_and_ldd_run_in_the_environment_files_environment(venv):
    env_file = venv["tmp"] / "cuda.env"
    env_file.write_text("# comment\nPATH=/opt/sglang/venv/bin:/usr/bin\nLD_LIBRARY_PATH=/x/lib\n")
    venv["ninja"] = (0, "ninja: Entering directory `/v'\nninja: no work to do.\n", "")
    result = run(venv, env_file=str(env_file), ninja_dir="/v", binary="/v/validate")
    assert result["ninja_up_to_date"] and result["nvrtc_loads"] and result["ldd_error"] == ""
    assert result["libraries"] == {
        "libcudart.so.13": f"{venv['home']}/lib/libcudart.so.13",
        "libcuda.so.1": "/lib/x86_64-linux-gnu/libcuda.so.1",
        "libnvrtc.so.13": "",
        "libc.so.6": "/lib/x86_64-linux-gnu/libc.so.6",
    }
    envs = {Path(args[0]).name: env for args, env in venv["calls"]}
    assert envs["ninja"] == envs["ldd"] == {"PATH": "/opt/sglang/venv/bin:/usr/bin", "LD_LIBRARY_PATH": "/x/lib"}
    venv["ninja"] = (0, "[1/2] nvcc ...\n", "")
    venv["ldd"] = (1, "", "ldd: /v/validate: No such file or directory\n")
    venv["python3"] = (1, "", "OSError: libnvrtc.so.13: cannot open shared object file\n")
    result = run(venv, env_file=str(env_file), ninja_dir="/v", binary="/v/validate")
    assert not result["ninja_up_to_date"] and not result["nvrtc_loads"]
    assert result["libraries"] == {} and result["ldd_error"] == "ldd: /v/validate: No such file or directory"


RECORDED = Path(__file__).resolve().parents[2] / "fixtures/container"


def test_the_installed_cuda_wheels_and_nvccs_release(venv):
    purelib = venv["home"].parents[1]
    for name, version in (("nvidia_cuda_nvcc", "13.2.78"), ("nvidia_cuda_cccl", "13.2.75"), ("torch", "2.11.0")):
        info = purelib / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n")
    venv["nvcc"] = (0, (RECORDED / "nvcc-version-13.2.txt").read_text(), "")
    result = run(venv, packages=["nvidia-cuda-nvcc", "NVIDIA_CUDA_CCCL", "nvidia-cuda-runtime"], nvcc_release=True)
    assert result["versions"] == {"nvidia-cuda-nvcc": "13.2.78", "nvidia-cuda-cccl": "13.2.75"}
    assert result["nvcc_release"] == "13.2"
    assert [args for args, _env in venv["calls"] if Path(args[0]).name == "nvcc"] == [
        [str(venv["home"] / "bin/nvcc"), "--version"]
    ]


def test_no_release_when_nvcc_fails_or_is_not_asked(venv):
    venv["nvcc"] = (1, "", "nvcc: error while loading shared libraries")
    assert run(venv, nvcc_release=True)["nvcc_release"] == ""
    assert cuda_toolkit_info.parse_nvcc_release("nvcc: NVIDIA (R) Cuda compiler driver\n") == ""
    venv["calls"].clear()
    result = run(venv)
    assert result["nvcc_release"] == "" and result["versions"] == {}
    assert not [args for args, _env in venv["calls"] if Path(args[0]).name == "nvcc"]
