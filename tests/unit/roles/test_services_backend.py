"""sglang_services' attention backend (gpulxc.sglang.services_plan), from the stack profile's
per-SM lists: the default is what the release runs by default on the GPUs' SM; a backend an SM of the served GPUs
cannot run is refused naming that SM, its GPUs and what it runs; with GPUs of several SMs only a backend every
one of them runs is chosen or accepted."""

from pathlib import Path

import pytest
import yaml
from services import decided, errors

PROFILE = yaml.safe_load((Path(__file__).resolve().parents[3] / "profiles/sglang-0.5.12.yml").read_text())
STACK = {
    "profile": PROFILE["name"],
    "attention_backends": PROFILE["attention_backends"],
    "fallback_attention_backend": PROFILE["fallback_attention_backend"],
}


def gpus(*sms):
    """gpu_preflight's GPU inventory (gpulxc_gpus) for GPUs 0.. of these SMs."""
    listed = [{"index": n, "compute_capability": sm} for n, sm in enumerate(sms)]
    found = {"indexes": list(range(len(sms))), "capabilities": sorted(set(sms)), "gpus": listed}
    return {"gpulxc_gpus": found, "ansible_local": {"gpulxc_stack": STACK}}


@pytest.mark.parametrize(
    ("sm", "default"), [("12.0", "flashinfer"), ("9.0", "fa3"), ("10.0", "flashinfer"), ("7.5", "triton")]
)
def test_the_default_is_the_sms_own(sm, default):
    assert decided(**gpus(sm, sm))["_sglang_services_plan"]["backend"] == default
    assert errors(**gpus(sm, sm)) == []


@pytest.mark.parametrize(
    ("sm", "backend"), [("12.0", "fa3"), ("12.0", "trtllm_mha"), ("9.0", "trtllm_mha"), ("7.5", "flashinfer")]
)
def test_a_backend_the_sm_cannot_run_is_refused_naming_the_sm(sm, backend):
    found = errors(sglang_services_attention_backend=backend, **gpus(sm, sm))
    runs = STACK["attention_backends"].get(sm, ["triton"])
    runs = ", ".join(runs)
    expected = (
        f"sglang_services_attention_backend {backend} does not run on SM {sm} (GPUs 0, 1), which runs {runs}"
        f" with the stack profile sglang-0.5.12: pick one of {runs}"
    )
    assert expected in " ".join(found), found


@pytest.mark.parametrize("backend", ["fa5", "no_such_backend", "FlashInfer", " flashinfer"])
def test_a_name_the_parser_does_not_know_is_refused_by_its_choices_alone(backend):
    found = errors(sglang_services_attention_backend=backend, **gpus("12.0", "12.0"))
    assert len(found) == 1, found
    assert found[0].startswith(
        f"sglang_services_attention_backend: --attention-backend: {backend!r} is not one of its"
        " choices (triton, torch_native"
    ), found


def test_with_two_sms_only_what_both_run_is_chosen_or_accepted():
    mixed = gpus("9.0", "9.0", "12.0", "12.0")
    assert decided(**mixed)["_sglang_services_plan"]["backend"] == "flashinfer"
    assert errors(**mixed) == []
    found = " ".join(errors(sglang_services_attention_backend="fa3", **mixed))
    assert "does not run on SM 12.0 (GPUs 2, 3), which runs flashinfer" in found
    assert "SM 9.0" not in found
    # the Hopper GPUs alone may run fa3
    assert errors(sglang_services_attention_backend="fa3", sglang_services_gpus=[0, 1], **mixed) == []
    assert decided(sglang_services_gpus=[2, 3], **mixed)["_sglang_services_plan"]["backend"] == "flashinfer"


def test_sms_with_nothing_in_common_are_refused():
    stack = {**STACK, "attention_backends": {"9.0": ["fa3"], "12.0": ["flashinfer"]}}
    mixed = {**gpus("9.0", "12.0"), "ansible_local": {"gpulxc_stack": stack}}
    found = " ".join(errors(**mixed))
    assert "has no attention backend that runs on all of SM 9.0, SM 12.0" in found, found
