"""sglang_services' --config files (templates/instance.yaml.j2) and their check before anything changes
(gpulxc.sglang.services_plan, with gpulxc.sglang.server_config_errors): the file holds what the check saw (one place,
the plan's config), a core setting left empty is not written so sglang's default applies, and a setting
sglang's config merger or parser would refuse fails the preflight naming its variable."""

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from conftest import load_standin
from services import ROLE, STACK, decided, errors, render

REPO = ROLE.parents[1]
FLAGS = yaml.safe_load((REPO / "profiles/sglang-0.5.12.yml").read_text())["flags"]
OPTIONAL = {
    "sglang_services_reasoning_parser": "reasoning-parser",
    "sglang_services_max_running_requests": "max-running-requests",
    "sglang_services_context_length": "context-length",
    "sglang_services_chunked_prefill_size": "chunked-prefill-size",
    "sglang_services_mamba_scheduler_strategy": "mamba-scheduler-strategy",
    "sglang_services_mamba_ssm_dtype": "mamba-ssm-dtype",
}


def config(**extra):
    facts = decided(**extra)
    return yaml.safe_load(render("instance.yaml.j2", facts, facts["_sglang_services_plan"]["servers"][0]))


def test_the_default_config_is_the_reference_flags_and_sglang_takes_it(standin):
    facts = decided()
    written = yaml.safe_load(render("instance.yaml.j2", facts, facts["_sglang_services_plan"]["servers"][0]))
    # what the check saw, and each instance's own port, NCCL port and memory fraction
    per_instance = ("port", "nccl-port", "mem-fraction-static", "extra-metric-labels")
    assert {k: v for k, v in written.items() if k not in per_instance} == facts["_sglang_services_plan"]["config"]
    assert written == {
        "model-path": "/dev/shm/Qwen3.6-27B",
        "served-model-name": "Qwen3.6-27B",
        "host": "127.0.0.1",
        "attention-backend": "flashinfer",
        "reasoning-parser": "qwen3",
        "max-running-requests": 64,
        "context-length": 8192,
        "chunked-prefill-size": 4096,
        "mamba-scheduler-strategy": "extra_buffer",
        "mamba-ssm-dtype": "bfloat16",
        "trust-remote-code": True,
        "enable-metrics": True,
        "port": 30000,
        "nccl-port": 31000,
        "mem-fraction-static": 0.88,
        "extra-metric-labels": '{"container": "ct200", "node": "pve1", "gpu": "0"}',
    }
    standin.build_parser().parse_args(standin.config_arguments(written))
    assert errors() == []


@pytest.mark.parametrize("empty", ["", None])
@pytest.mark.parametrize("variable", sorted(OPTIONAL))
def test_a_core_setting_left_empty_is_not_written_so_sglangs_default_applies(standin, variable, empty):
    written = config(**{variable: empty})
    assert OPTIONAL[variable] not in written
    assert written["model-path"] == "/dev/shm/Qwen3.6-27B" and written["port"] == 30000
    standin.build_parser().parse_args(standin.config_arguments(written))
    assert errors(**{variable: empty}) == []


def test_the_role_accepts_an_empty_or_null_integer_setting():
    options = yaml.safe_load((ROLE / "meta/argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    for variable in OPTIONAL:
        for empty in ("", None):
            result = ArgumentSpecValidator({variable: options[variable]}).validate({variable: empty})
            assert result.error_messages == [], (variable, empty)


def test_the_file_holds_the_values_as_given_extra_flags_and_the_key_included(standin):
    extra = {
        "chat-template": "0.5",
        "tokenizer-mode": "slow",
        "cuda-graph-bs": [1, 2],
        "enable-torch-compile": True,
        "json-model-override-args": '{"a": "b: c"}',
        "revision": "yes",
    }
    facts = decided(
        sglang_services_extra_flags=extra,
        sglang_services_api_key="k: #x",
        sglang_services_api_key_allow_plain_text=True,
        sglang_services_context_length="8k",
    )
    written = yaml.safe_load(render("instance.yaml.j2", facts, facts["_sglang_services_plan"]["servers"][0]))
    assert {key: written[key] for key in extra} == extra
    assert (written["api-key"], written["context-length"]) == ("k: #x", "8k")
    args = standin.build_parser().parse_args(standin.config_arguments(written))
    assert (args.chat_template, args.cuda_graph_bs, args.context_length, args.api_key) == ("0.5", [1, 2], 8000, "k: #x")
    assert "api-key" not in facts["_sglang_services_plan"]["config"]  # the key stays out of the facts


# the settings sglang would refuse: test_services_errors.yaml


def test_the_h200_inventorys_settings_pass(standin):
    (host,) = [
        h
        for g in yaml.safe_load((REPO / "tests/gpu/inventory.yml").read_text()).values()
        for n, h in (g.get("hosts") or {}).items()
        if n == "h200-sglang"
    ]
    settings = {k: v for k, v in host.items() if k.startswith("sglang_services_")}
    assert errors(gpus=1, **settings) == []
    facts = decided(gpus=1, **settings)
    written = yaml.safe_load(render("instance.yaml.j2", facts, facts["_sglang_services_plan"]["servers"][1]))
    assert facts["_sglang_services_plan"]["config"]["context-length"] == 4096
    assert (written["cuda-graph-max-bs"], written["mem-fraction-static"]) == (16, 0.3)
    standin.build_parser().parse_args(standin.config_arguments(written))


def test_under_the_second_profile_a_renamed_flag_is_written_as_that_release_spells_it(tmp_path):
    """sglang 0.5.23 calls --mamba-scheduler-strategy --mamba-radix-cache-strategy (profiles/sglang-0.5.23.yml,
    flag_names): the config holds the new name, the check passes against 0.5.23's table, and 0.5.23's parser takes
    the file, where the reference's name is refused."""
    # the stack object of that profile (sglang_stack's), which sglang_services reads the profile from
    profile = {"gpulxc_stack": {**STACK, "profile": "sglang-0.5.23", "profile_source": "sglang-0.5.23"}}
    facts = decided(**profile)
    written = yaml.safe_load(render("instance.yaml.j2", facts, facts["_sglang_services_plan"]["servers"][0]))
    assert written["mamba-radix-cache-strategy"] == "extra_buffer" and "mamba-scheduler-strategy" not in written
    assert errors(**profile) == []
    assert any(
        "mamba-scheduler-strategy is not a flag" in error
        for error in errors(**profile, sglang_services_extra_flags={"mamba-scheduler-strategy": "auto"})
    )
    release = load_standin(tmp_path, "sglang-0.5.23")
    args = release.build_parser().parse_args(release.config_arguments(written))
    assert args.mamba_radix_cache_strategy == "extra_buffer"
    with pytest.raises(SystemExit):
        release.build_parser().parse_args(release.config_arguments({**written, "mamba-scheduler-strategy": "auto"}))
