"""The checks of roles jit_toolchain, uv_venv and cuda_surgery as filters (issue 50): each case the inputs and the
messages (or the plan) the role then asserts on, word for word as the roles said them in YAML before."""

import pytest
from ansible_collections.gpulxc.sglang.plugins.filter import cuda_surgery, jit_toolchain, uv_venv

PACKAGE_CASES = [
    (["ninja-build", "g++", "python3-dev", "libc6:amd64"], []),
    (
        ["ninja-build", "G++"],
        ["jit_toolchain: jit_toolchain_packages must name Debian packages (now ['ninja-build', 'G++'])."],
    ),
    (["n"], ["jit_toolchain: jit_toolchain_packages must name Debian packages (now ['n'])."]),
]


@pytest.mark.parametrize(("packages", "errors"), PACKAGE_CASES)
def test_jit_toolchain_packages_are_debian_names(packages, errors):
    assert jit_toolchain.jit_toolchain_errors(packages) == errors


def test_jit_toolchain_installs_what_dpkg_does_not_have_installed():
    states = {"ninja-build": "installed", "g++": "not-installed", "python3-dev": "config-files"}
    assert jit_toolchain.jit_toolchain_missing(states) == ["g++", "python3-dev"]


APT_CASES = [
    (
        "/mnt/wheelhouse",
        "jit_toolchain: apt could not install ninja-build, g++ in the container (E: Unable). The"
        " container is air-gapped (uv_venv_wheelhouse): apt reaches only the sources its template configures. Point"
        " them"
        " at a mirror the container reaches, or use a template that has these packages.",
    ),
    (
        "",
        "jit_toolchain: apt could not install ninja-build, g++ in the container (E: Unable). Check the container"
        " reaches its Debian mirror (apt sources, uv_venv_proxy does not apply to apt), or use a template that has"
        " these"
        " packages.",
    ),
]


@pytest.mark.parametrize(("wheelhouse", "message"), APT_CASES)
def test_jit_toolchain_says_where_the_packages_must_come_from(wheelhouse, message):
    assert jit_toolchain.jit_toolchain_apt_error(["ninja-build", "g++"], " E: Unable\n", wheelhouse) == message


REPAIR_CASES = [
    ([], {"broken": [], "tools": [], "reinstall": [], "errors": []}),
    (
        ["g++|/usr/bin/g++|g++ g++-12 ", "ninja|/usr/bin/ninja|ninja-build g++ "],
        {
            "broken": [
                {"tool": "g++", "path": "/usr/bin/g++", "packages": ["g++", "g++-12"]},
                {"tool": "ninja", "path": "/usr/bin/ninja", "packages": ["ninja-build", "g++"]},
            ],
            "tools": ["g++", "ninja"],
            "reinstall": ["g++", "g++-12", "ninja-build"],
            "errors": [],
        },
    ),
    (
        ["ninja|/usr/bin/ninja|", "g++|/usr/bin/g++|g++ ", "the Python headers|/usr/include/python3.11/Python.h|"],
        {
            "broken": [
                {"tool": "ninja", "path": "/usr/bin/ninja", "packages": []},
                {"tool": "g++", "path": "/usr/bin/g++", "packages": ["g++"]},
                {"tool": "the Python headers", "path": "/usr/include/python3.11/Python.h", "packages": []},
            ],
            "tools": ["ninja", "g++", "the Python headers"],
            "reinstall": ["g++"],
            "errors": [
                "jit_toolchain: ninja, the Python headers (/usr/bin/ninja, /usr/include/python3.11/Python.h) does not"
                " run and no Debian package owns it, so reinstalling cannot bring it back: restore it by hand or"
                " remove what replaced it, then run again."
            ],
        },
    ),
]


@pytest.mark.parametrize(("lines", "plan"), REPAIR_CASES)
def test_jit_toolchain_reads_the_tools_that_do_not_run(lines, plan):
    assert jit_toolchain.jit_toolchain_repair(lines) == plan


VERIFY_CASES = [
    ({"rc": 0, "stderr": ""}, []),
    (
        {"rc": 1, "stderr": "ninja (/usr/bin/ninja) does not run\n"},
        [
            "jit_toolchain: the toolchain still does not run after installing its packages (ninja (/usr/bin/ninja)"
            " does not"
            " run): check the container's Debian packages (dpkg --verify ninja-build g++) and run again."
        ],
    ),
    (
        {"rc": 2, "stderr": " "},
        [
            "jit_toolchain: the toolchain still does not run after installing its packages (a check exited 2): check"
            " the"
            " container's Debian packages (dpkg --verify ninja-build g++) and run again."
        ],
    ),
]


@pytest.mark.parametrize(("result", "errors"), VERIFY_CASES)
def test_jit_toolchain_final_check_names_what_does_not_run(result, errors):
    assert jit_toolchain.jit_toolchain_verify_errors(result, ["ninja-build", "g++"]) == errors


CT = {
    "glibc": "2.36",
    "arch": "x86_64",
    "cache_mounted": True,
    "python": {"version": "3.11", "error": ""},
    "wheelhouse": {"has_uv": True, "fits": True, "target": None},
}
UV = {
    "python": "/usr/bin/python3",
    "min_glibc": "2.34",
    "uv_wheel_sha256": "0" * 64,
    "path": "/opt/sglang/venv",
    "cache_dir": "",
    "wheelhouse": "",
    "uv_wheel": "uv-0.13.9.whl",
    "host": "ct950",
}
UV_CASES = [
    ({}, {}, []),
    (
        {"glibc": "2.31"},
        {},
        [
            "uv_venv: the container has glibc 2.31; sglang >= 0.5.11 wheels need glibc >= 2.34 (Debian"
            " 12, Ubuntu 22.04 or newer): use a newer template (pct_container_ostemplate)."
        ],
    ),
    ({"glibc": "2.100"}, {}, []),  # compared as versions, not as text
    (
        {"python": {"version": "", "error": "gone"}},
        {"python": "/usr/bin/python3.99"},
        [
            "uv_venv_python /usr/bin/python3.99 does not run in the container (gone): name an installed python3 (uv"
            " never"
            " downloads one)."
        ],
    ),
    (
        {},
        {"uv_wheel_sha256": "ABC", "path": "opt/venv"},
        ["uv_venv_uv_wheel_sha256 must be a sha256 (64 hex digits).", "uv_venv_path must be an absolute path."],
    ),
    (
        {"cache_mounted": False},
        {"cache_dir": "/var/cache/uv"},
        [
            "uv_venv_cache_dir /var/cache/uv is not a mount point in the container: bind-mount the node directory the"
            " containers share there (pct_container_mounts, read-write), or leave it empty for a cache of its own."
        ],
    ),
    ({"cache_mounted": False}, {}, []),
    (
        {"wheelhouse": {"has_uv": False, "fits": False, "target": None}},
        {"wheelhouse": "/mnt/models"},
        [
            "uv_venv_wheelhouse /mnt/models has no uv-0.13.9.whl in the container: build the wheelhouse for this"
            " container"
            " on a connected machine (ansible-playbook gpulxc.sglang.wheelhouse -l ct950 -e wheelhouse_dest=<dir>),"
            " bind-mount that directory there (pct_container_mounts), or leave uv_venv_wheelhouse empty to install from"
            " the package index."
        ],
    ),
    (
        {
            "wheelhouse": {
                "has_uv": True,
                "fits": False,
                "target": {"python": "3.12", "platform": "x86_64-manylinux_2_39"},
            }
        },
        {"wheelhouse": "/mnt/wheelhouse"},
        [
            "uv_venv_wheelhouse /mnt/wheelhouse was built for Python 3.12, x86_64-manylinux_2_39; this container runs"
            " Python 3.11 (uv_venv_python) with glibc 2.36 on x86_64: build it again for it"
            " (wheelhouse_python_version=3.11, wheelhouse_platform=x86_64-manylinux_2_36)."
        ],
    ),
    (
        {"wheelhouse": {"has_uv": True, "fits": False, "target": None}},
        {"wheelhouse": "/mnt/wheelhouse"},
        [
            "uv_venv_wheelhouse /mnt/wheelhouse was built for an unknown target (no stack.in); this container runs"
            " Python 3.11 (uv_venv_python) with glibc 2.36 on x86_64: build it again for it"
            " (wheelhouse_python_version=3.11, wheelhouse_platform=x86_64-manylinux_2_36)."
        ],
    ),
]


@pytest.mark.parametrize(("container", "settings", "errors"), UV_CASES)
def test_uv_venv_checks_the_container_and_the_settings(container, settings, errors):
    assert uv_venv.uv_venv_errors({**CT, **container}, **{**UV, **settings}) == errors


INSTALLED_CASES = [
    ({"uv_version": "0.13.9", "python": {"version": "3.11", "error": ""}}, False, []),
    (
        {"uv_version": "", "python": {"version": "", "error": "No such file"}},
        False,
        [
            "uv_venv: /usr/local/bin/uv reports version nothing (it does not run), not 0.13.9 (uv_venv_uv_version):"
            " remove"
            " /opt/gpulxc/uv/0.13.9 and run the role again.",
            "uv_venv: the virtual environment /opt/sglang/venv does not run (No such file): remove it and run the role"
            " again.",
        ],
    ),
    ({"uv_version": "0.13.9", "python": {"version": "", "error": "No such file"}}, True, []),  # the stack's to check
]


@pytest.mark.parametrize(("installed", "link", "errors"), INSTALLED_CASES)
def test_uv_venv_final_check(installed, link, errors):
    found = uv_venv.uv_venv_installed_errors(installed, uv_version="0.13.9", path="/opt/sglang/venv", venv_link=link)
    assert found == errors


SURGERY_CASES = [
    ("/opt/sglang/venv", ["90", "120"], []),
    ("/opt/sglang/venv", ["90a", "100f", 120], []),
    (
        "venv",
        [],
        [
            "cuda_surgery: cuda_surgery_venv must be an absolute path (now venv).",
            'cuda_surgery: cuda_surgery_validate_archs must list SM numbers such as "90" or "120" (now []).',
        ],
    ),
    (
        "/v",
        ["sm_90"],
        ['cuda_surgery: cuda_surgery_validate_archs must list SM numbers such as "90" or "120" (now [\'sm_90\']).'],
    ),
]


@pytest.mark.parametrize(("venv", "archs", "errors"), SURGERY_CASES)
def test_cuda_surgery_settings(venv, archs, errors):
    assert cuda_surgery.cuda_surgery_errors(venv, archs) == errors


HOME = "/opt/sglang/venv/nvidia/cu13"
TOOLKIT_CASES = [
    ({"nvcc": True, "cuda_home": HOME, "error": ""}, []),
    (
        {"nvcc": False, "cuda_home": HOME, "error": ""},
        [f"cuda_surgery: no nvcc at {HOME}/bin/nvcc: run gpulxc.sglang.sglang_stack first (cuda_surgery_venv = /v)."],
    ),
    (
        {"nvcc": False, "cuda_home": "", "error": "No such file"},
        [
            "cuda_surgery: the venv's Python does not run (No such file): run gpulxc.sglang.sglang_stack first"
            " (cuda_surgery_venv = /v)."
        ],
    ),
]


@pytest.mark.parametrize(("toolkit", "errors"), TOOLKIT_CASES)
def test_cuda_surgery_needs_the_stacks_nvcc(toolkit, errors):
    assert cuda_surgery.cuda_surgery_toolkit_errors(toolkit, "/v") == errors


ROOT = {"owner": "root", "group": "root"}
LINKS = [
    {"path": f"{HOME}/lib64", "src": "lib"},
    {"path": f"{HOME}/lib/libcudart.so", "src": "libcudart.so.13"},
    {"path": f"{HOME}/lib/libnvrtc.so", "src": "libnvrtc.so.13"},
]
LAYOUT_CASES = [  # a stub already there: nothing for its generator
    (
        {"cached": True, "driver": ""},
        {"directories": [{"path": f"{HOME}/lib/stubs", **ROOT, "mode": "0755"}], "files": [], "links": LINKS},
    ),
    (
        {"cached": False, "driver": "/usr/lib/x86_64-linux-gnu/libcuda.so.1"},
        {
            "directories": [
                {"path": f"{HOME}/lib/stubs", **ROOT, "mode": "0755"},
                {"path": "/bin", **ROOT, "mode": "0755"},
            ],
            "files": [{"path": "/bin/make_libcuda_stub.py", **ROOT, "mode": "0644", "content": "GEN"}],
            "links": [
                *LINKS,
                {"path": f"{HOME}/lib/stubs/libcuda.so", "src": "/usr/lib/x86_64-linux-gnu/libcuda.so.1"},
            ],
        },
    ),
]


@pytest.mark.parametrize(("libcuda", "layout"), LAYOUT_CASES)
def test_cuda_surgery_layout(libcuda, layout):
    assert cuda_surgery.cuda_surgery_layout({"cuda_home": HOME, "libcuda": libcuda}, "/bin", "GEN") == layout


GOOD = {
    "ldd_error": "",
    "nvrtc_loads": True,
    "libraries": {"libcudart.so.13": f"{HOME}/lib/libcudart.so.13", "libcuda.so.1": "/usr/lib/libcuda.so.1"},
}
LINK_CASES = [
    ({"skipped": True}, GOOD, []),
    (GOOD, {"skipped": True}, []),
    (
        {"skipped": True},
        {"ldd_error": "not a dynamic executable", "nvrtc_loads": False, "libraries": {}},
        [
            "cuda_surgery: ldd /val/validate failed: not a dynamic executable",
            f"cuda_surgery: the validation program links libcudart.so.13 from nowhere, not from {HOME}/lib: check"
            " LD_LIBRARY_PATH in /etc/sglang/cuda.env.",
            "cuda_surgery: libnvrtc.so.13 does not load in the environment of /etc/sglang/cuda.env.",
        ],
    ),
    (
        {
            **GOOD,
            "libraries": {
                "libcudart.so.13": "/usr/lib/libcudart.so.13",
                "libcuda.so.1": f"{HOME}/lib/stubs/libcuda.so",
            },
        },
        GOOD,  # the rebuilt program's read wins over the up-to-date check's
        [
            "cuda_surgery: the validation program links libcudart.so.13 from /usr/lib/libcudart.so.13, not from"
            f" {HOME}/lib:"
            " check LD_LIBRARY_PATH in /etc/sglang/cuda.env.",
            "cuda_surgery: the validation program loads libcuda.so.1 from the stubs directory"
            f" ({HOME}/lib/stubs/libcuda.so):"
            " the stubs must never be on the loader path.",
        ],
    ),
]


@pytest.mark.parametrize(("rebuilt", "built", "errors"), LINK_CASES)
def test_cuda_surgery_validation_links(rebuilt, built, errors):
    found = cuda_surgery.cuda_surgery_link_errors(
        rebuilt, built, cuda_home=HOME, validate_dir="/val", env_file="/etc/sglang/cuda.env"
    )
    assert found == errors
