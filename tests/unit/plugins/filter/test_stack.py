"""gpulxc.sglang stack filters: a profile -> the one resolve's inputs (the container's and the wheelhouse's),
the CUDA settings over the profile's, and the ansible_local.gpulxc_stack fact."""

from pathlib import Path

import pytest
import yaml
from ansible_collections.gpulxc.sglang.plugins.filter import stack
from ansible_collections.gpulxc.sglang.plugins.lookup import stack_profile

PROFILE = stack_profile.load("sglang-0.5.12")
CUDA = [
    "nvidia-cuda-nvcc==13.2.78",
    "nvidia-nvvm==13.2.78",
    "nvidia-cuda-crt==13.2.78",
    "nvidia-cuda-cccl==13.2.75",
    "nvidia-cuda-runtime==13.2.75",
    "nvidia-cuda-nvrtc==13.0.88",
]
PINS = [
    "sglang==0.5.12",
    "torch==2.11.0",
    "sglang-kernel==0.4.2.post2",
    "flashinfer-python==0.6.11.post1",
    "flashinfer-cubin==0.6.11.post1",
]


def test_to_requirements_pins_in_order():
    assert stack.to_requirements({"smg": "1.13.0", "b": 2}) == ["smg==1.13.0", "b==2"]


def test_the_profiles_pins_the_extras_then_the_cuda_wheels_and_the_runtime_override():
    """The order the container's requirements.in had before the profile (no re-resolve on an old CT)."""
    inputs = stack.stack_requirements(PROFILE, extra_packages=["six==1.17.0"], overrides=["x==1"])
    assert inputs == {
        "requirements": [*PINS, "six==1.17.0", *CUDA],
        "overrides": ["x==1", "nvidia-cuda-runtime==13.2.75"],
    }


def test_the_cuda_settings_replace_the_profiles_where_set():
    assert stack.stack_cuda(PROFILE) == PROFILE["cuda"]
    cuda = stack.stack_cuda(PROFILE, family={}, runtime="13.0.96", runtime_override="false", nvrtc="")
    assert cuda["runtime"] == "13.0.96" and cuda["runtime_override"] is False and cuda["nvrtc"] == "13.0.88"
    assert stack.stack_requirements(PROFILE, cuda=cuda)["overrides"] == []


def test_the_stack_fact_holds_the_locked_versions_of_the_profiles_packages():
    fact = stack.stack_fact(PROFILE, {"sglang": "0.5.12", "torch": "2.11.0", "filelock": "3.20.0"}, "/opt/sglang/venv")
    assert fact["profile"] == "sglang-0.5.12" and fact["venv"] == fact["stack"] == "/opt/sglang/venv"
    stacked = stack.stack_fact(PROFILE, {}, "/opt/sglang/venv", stack="/opt/sglang/stacks/0123456789abcdef")
    assert stacked["stack"] == "/opt/sglang/stacks/0123456789abcdef"
    assert fact["packages"] == {
        "sglang": "0.5.12",
        "torch": "2.11.0",
        "sglang-kernel": None,
        "flashinfer-python": None,
        "flashinfer-cubin": None,
    }
    assert (
        fact["attention_backends"]["12.0"] == PROFILE["attention_backends"]["12.0"]
        and fact["attention_backends"]["12.0"][0] == "flashinfer"
        and fact["fallback_attention_backend"] == "triton"
    )


def test_the_stack_object_carries_the_cuda_wheels_the_flag_names_and_the_backends():
    fact = stack.stack_fact(PROFILE, {}, "/opt/sglang/venv")
    assert fact["cuda"] == PROFILE["cuda"] and fact["flag_names"] == PROFILE["flag_names"]
    assert fact["attention_backends"] == PROFILE["attention_backends"]


ERROR_CASES = yaml.safe_load((Path(__file__).parent / "test_stack_errors.yaml").read_text())


@pytest.mark.parametrize("case", ERROR_CASES, ids=[case["id"] for case in ERROR_CASES])
def test_stack_errors(case):
    profile = {**PROFILE, "cuda": {**PROFILE["cuda"], **case.get("cuda", {})}}
    errors = stack.stack_errors(
        profile,
        case.get("python", "3.11"),
        "interpreter (uv_venv_python)",
        keep_stacks=case.get("keep_stacks", 2),
        install_timeout=case.get("install_timeout", 3600),
        progress_interval=case.get("progress_interval", "20"),
    )
    assert errors == case["errors"]


FACT = stack.stack_fact(PROFILE, {}, "/opt/sglang/venv")
INSTALLED = {name: version for name, version in stack.cuda_pins(PROFILE["cuda"]).items()}


@pytest.mark.parametrize(
    ("versions", "nvcc", "errors"),
    [
        (INSTALLED, "13.2", []),
        (
            {**INSTALLED, "nvidia-nvvm": "13.2.51"},
            "13.2",
            ["sglang_stack: the virtual environment lacks ['nvidia-nvvm==13.2.78'] after the stack was installed."],
        ),
        (
            {k: v for k, v in INSTALLED.items() if k != "nvidia-cuda-nvrtc"},
            None,
            [
                "sglang_stack: the virtual environment lacks ['nvidia-cuda-nvrtc==13.0.88'] after the stack was"
                " installed.",
                "sglang_stack: nvcc in /opt/sglang/venv reports release nothing (it does not run), not the family's"
                " 13.2.",
            ],
        ),
        (INSTALLED, "13.0", ["sglang_stack: nvcc in /opt/sglang/venv reports release 13.0, not the family's 13.2."]),
    ],
    ids=["as pinned", "one downgraded", "one gone and nvcc dead", "another nvcc"],
)
def test_the_installed_cuda_wheels_against_the_stack(versions, nvcc, errors):
    assert stack.stack_installed_errors(FACT, versions, nvcc) == errors


def test_what_a_sync_repaired_one_item_each():
    result = {
        "drift": {"torch": {"installed": "2.10.0", "locked": "2.11.0"}, "six": {"installed": "1.17.0", "locked": None}},
        "damaged": {"sglang": {"files": 3, "paths": ["sglang/srt/server_args.py"]}},
        "locked": {"sglang": "0.5.12"},
    }
    assert stack.stack_repairs(result) == [
        "torch 2.10.0 -> 2.11.0",
        "six 1.17.0 -> removed",
        "sglang 0.5.12 reinstalled (3 of its files gone or changed, such as sglang/srt/server_args.py)",
    ]
