"""gpulxc.sglang.server_config_errors: an instance's --config settings checked against sglang 0.5.12's flag table
(profiles/sglang-0.5.12.yml `flags:`, from the real parser) by the rules of its config merger and parser. Classes
of bad input, several values each, each message naming the variable to fix; and agreement with the merger: every
accepted configuration becomes, through the lab's port of ConfigArgumentMerger (config_arguments), arguments a
parser built from the same table takes - and every refusal the parser or merger would make itself is one the
parser or merger does make."""

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.gpulxc.sglang.plugins.filter.server_config import server_config_errors

REPO = Path(__file__).resolve().parents[4]
FLAGS = yaml.safe_load((REPO / "profiles/sglang-0.5.12.yml").read_text())["flags"]
SOURCES = {
    "model-path": "sglang_services_model_path",
    "served-model-name": "sglang_services_served_model_name",
    "host": "sglang_services_host",
    "port": "sglang_services_port_base",
    "nccl-port": "sglang_services_nccl_port_base",
    "attention-backend": "sglang_services_attention_backend",
    "reasoning-parser": "sglang_services_reasoning_parser",
    "mem-fraction-static": "sglang_services_mem_fraction_static",
    "max-running-requests": "sglang_services_max_running_requests",
    "context-length": "sglang_services_context_length",
    "chunked-prefill-size": "sglang_services_chunked_prefill_size",
    "mamba-scheduler-strategy": "sglang_services_mamba_scheduler_strategy",
    "mamba-ssm-dtype": "sglang_services_mamba_ssm_dtype",
    "trust-remote-code": "sglang_services_trust_remote_code",
    "enable-metrics": "sglang_services_enable_metrics",
    "api-key": "sglang_services_api_key",
}
# the role's defaults as it writes them (the attention backend: the stack's first for SM 12.0)
DEFAULTS = {
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
}
INSTANCE = {"port": 30000, "nccl-port": 31000, "mem-fraction-static": 0.88}


def sglang_takes(standin, config):
    """Whether sglang (the merger, then the parser) takes the configuration."""
    try:
        standin.build_parser().parse_args(standin.config_arguments(config))
    except (ValueError, SystemExit):
        return False
    return True


GOOD_EXTRA = [
    {},
    {"cuda-graph-max-bs": 16},  # tests/gpu/inventory.yml h200-sglang
    {"cuda-graph-bs": [1, 2, 4, 8]},  # nargs +
    {"cuda-graph-bs": 16},  # one value for nargs +
    {"cuda-graph-bs": [1, -2, "-3"]},  # negative numbers are values
    {"uvicorn-access-log-exclude-prefixes": []},  # an empty list: left out
    {"watchdog-timeout": -1, "swa-full-tokens-ratio": 1},  # an int for a float
    {"max-total-tokens": "8k", "log-requests-level": 2, "max-lora-chunk-size": 32},  # int choices
    {"json-model-override-args": '{"a": 1}', "extra-metric-labels": '{"team": "x"}'},
    {"disable-cuda-graph": False, "enable-torch-compile": True, "skip-server-warmup": True},
    {"chat-template": "", "tokenizer-mode": "slow", "quantization-param-path": "none"},
    {"tokenizer-path": "/models/tok", "revision": "main"},
]


@pytest.mark.parametrize("extra", GOOD_EXTRA)
def test_the_defaults_and_good_extra_flags_pass_and_sglang_takes_them(standin, extra):
    assert server_config_errors(DEFAULTS, FLAGS, SOURCES, extra) == []
    assert sglang_takes(standin, {**DEFAULTS, **INSTANCE, **extra})


def test_the_h200_inventorys_settings_pass_and_sglang_takes_them(standin):
    inventory = yaml.safe_load((REPO / "tests/gpu/inventory.yml").read_text())
    (host,) = [h for g in inventory.values() for n, h in (g.get("hosts") or {}).items() if n == "h200-sglang"]
    settings = {
        **DEFAULTS,
        **{
            k.replace("sglang_services_", "").replace("_", "-"): v
            for k, v in host.items()
            if k.replace("sglang_services_", "").replace("_", "-") in DEFAULTS
        },
    }
    assert settings["context-length"] == 4096 and settings["model-path"].endswith("qwen3next-tiny")
    extra = host["sglang_services_extra_flags"]
    assert server_config_errors(settings, FLAGS, SOURCES, extra) == []
    assert sglang_takes(standin, {**settings, **INSTANCE, "mem-fraction-static": 0.3, **extra})


def test_a_core_setting_left_empty_is_not_checked():
    assert server_config_errors({**DEFAULTS, "context-length": None, "reasoning-parser": None}, FLAGS, SOURCES) == []


# (settings over the defaults, extra flags, the message's start, the message's rest, whether sglang itself refuses)
BAD = [
    # underscore spellings: the merger writes --mem_fraction_static, the parser does not know it
    (
        {},
        {"cuda_graph_max_bs": 16},
        "sglang_services_extra_flags['cuda_graph_max_bs']: ",
        "writes the key as it is (--cuda_graph_max_bs), which its parser does not know: write it cuda-graph-max-bs.",
        True,
    ),
    (
        {},
        {"enable_torch_compile": True},
        "sglang_services_extra_flags['enable_torch_compile']",
        "write it enable-torch-compile.",
        True,
    ),
    # unknown names, with the close ones; a unique prefix argparse would take but the role does not
    (
        {},
        {"cuda-graph-max-bz": 16},
        "sglang_services_extra_flags['cuda-graph-max-bz']: cuda-graph-max-bz is not a",
        "(did you mean cuda-graph-max-bs",
        True,
    ),
    (
        {},
        {"enable-flashinfer-mla": True},
        "sglang_services_extra_flags['enable-flashinfer-mla']",
        "is not a flag",
        True,
    ),
    (
        {},
        {"watchdog-time": 30},
        "sglang_services_extra_flags['watchdog-time']: watchdog-time is only the start of a",
        "write it in full, watchdog-timeout.",
        True,
    ),
    ({}, {"config": "/x.yaml"}, "sglang_services_extra_flags['config']", "cannot name another one", False),
    # actions a config file cannot set: BooleanOptionalAction (the --no- flags) and the deprecated switches
    (
        {},
        {"lora-strict-loading": True},
        "sglang_services_extra_flags['lora-strict-loading']: --lora-strict-loading",
        "(BooleanOptionalAction) cannot be set from a config file",
        True,
    ),
    (
        {},
        {"no-record-nolora-graph": True},
        "sglang_services_extra_flags['no-record-nolora-graph']",
        "(BooleanOptionalAction) cannot be set",
        True,
    ),
    ({}, {"experts-shared-outer-loras": False}, "['experts-shared-outer-loras']", "BooleanOptionalAction", True),
    ({}, {"stream-output": True}, "['stream-output']", "(DeprecatedStoreTrueAction) cannot be set", True),
    ({}, {"hybrid-kvcache-ratio": 0.5}, "['hybrid-kvcache-ratio']", "(DeprecatedAction) cannot be set", True),
    # values starting with '-' for str, int and list flags: the parser takes them for a flag
    (
        {},
        {"chat-template": "-x"},
        "sglang_services_extra_flags['chat-template']: --chat-template: a value starting",
        "would take it for a flag",
        True,
    ),
    ({"api-key": "-abc"}, {}, "sglang_services_api_key: --api-key: a value starting with '-'", "for a flag", True),
    ({}, {"watchdog-timeout": "--5"}, "['watchdog-timeout']", "starting with '-'", True),
    ({}, {"watchdog-timeout": "-1e3"}, "['watchdog-timeout']", "starting with '-'", True),
    (
        {},
        {"cuda-graph-bs": [1, "-x"]},
        "['cuda-graph-bs']: --cuda-graph-bs: an item of the list: a value starting",
        "for a flag",
        True,
    ),
    ({"served-model-name": "-m"}, {}, "sglang_services_served_model_name: --served-model-name", "for a flag", True),
    # wrong types: a bool is no int, a float no int, a switch takes only true/false, a list only for nargs
    (
        {"context-length": "8x"},
        {},
        "sglang_services_context_length: --context-length: '8x' is not an integer",
        "such as 8k",
        True,
    ),
    (
        {"max-running-requests": True},
        {},
        "sglang_services_max_running_requests: --max-running-requests: true/false",
        "is not an integer.",
        True,
    ),
    ({"chunked-prefill-size": 4096.0}, {}, "sglang_services_chunked_prefill_size", "4096.0 is not an integer", True),
    ({"context-length": "many"}, {}, "sglang_services_context_length", "'many' is not an integer", True),
    ({}, {"watchdog-timeout": "soon"}, "['watchdog-timeout']", "'soon' is not a number", True),
    (
        {},
        {"enable-torch-compile": "true"},
        "['enable-torch-compile']: --enable-torch-compile is a switch",
        "give true or false, not 'true'.",
        True,
    ),
    ({}, {"disable-cuda-graph": 1}, "['disable-cuda-graph']", "is a switch", True),
    ({}, {"cuda-graph-max-bs": [16, 32]}, "['cuda-graph-max-bs']", "takes one value, not a list.", True),
    ({}, {"cuda-graph-bs": [1, True]}, "['cuda-graph-bs']", "an item of the list: true/false", True),
    ({}, {"json-model-override-args": {"a": 1}}, "['json-model-override-args']", "a mapping is not a string", False),
    ({}, {"extra-metric-labels": "{team"}, "['extra-metric-labels']", "is not JSON", True),
    ({}, {"tokenizer-path": True}, "['tokenizer-path']", "true/false is not a string (quote it", False),
    ({}, {"tokenizer-path": None}, "['tokenizer-path']", "null is not a string", False),
    # outside the choices
    (
        {"reasoning-parser": "qwen4"},
        {},
        "sglang_services_reasoning_parser: --reasoning-parser: 'qwen4' is not one",
        "(auto, deepseek-r1",
        True,
    ),
    ({"mamba-ssm-dtype": "fp8"}, {}, "sglang_services_mamba_ssm_dtype", "(float32, bfloat16, float16).", True),
    ({}, {"log-requests-level": 5}, "['log-requests-level']", "'5' is not one of its choices (0, 1, 2, 3).", True),
    ({"attention-backend": "flashinfer2"}, {}, "sglang_services_attention_backend", "is not one of", True),
    # a flag the role writes itself, repeated in the extra flags (also as an alias or underscore spelling)
    (
        {},
        {"context-length": 4096},
        "sglang_services_extra_flags['context-length']: sets --context-length, which the",
        "role writes itself from sglang_services_context_length: set that instead.",
        False,
    ),
    (
        {},
        {"model": "/m"},
        "sglang_services_extra_flags['model']: sets --model-path",
        "sglang_services_model_path",
        False,
    ),
    (
        {},
        {"mem_fraction_static": 0.3},
        "['mem_fraction_static']: sets --mem-fraction-static",
        "from sglang_services_mem_fraction_static",
        False,
    ),
    ({}, {"port": 40000}, "['port']: sets --port", "sglang_services_port_base", False),
    ({}, {"api-key": "k"}, "['api-key']: sets --api-key", "sglang_services_api_key", False),
]


@pytest.mark.parametrize(
    ("settings", "extra", "message", "sglang_refuses"),
    [(settings, extra, (start, rest), refuses) for settings, extra, start, rest, refuses in BAD],
)
def test_bad_settings_are_refused_naming_the_variable_and_the_fix(standin, settings, extra, message, sglang_refuses):
    start, rest = message
    found = server_config_errors({**DEFAULTS, **settings}, FLAGS, SOURCES, extra)
    assert len(found) == 1, found
    assert start in found[0] and rest in found[0], found
    if sglang_refuses:  # a refusal of sglang's own, not only the role's: the merger or the parser makes it too
        assert not sglang_takes(standin, {**DEFAULTS, **INSTANCE, **settings, **extra})


def test_a_secret_is_never_shown():
    for value in ("-hunter2", True, ["hunter2"]):
        (message,) = server_config_errors({"api-key": value}, FLAGS, SOURCES)
        assert "hunter2" not in message and "True" not in message, message
    (message,) = server_config_errors({}, FLAGS, {}, {"admin-api-key": "-hunter2", "ssl-keyfile-password": "p"})
    assert "hunter2" not in message


def test_every_problem_is_reported_at_once():
    found = server_config_errors({**DEFAULTS, "context-length": "8x"}, FLAGS, SOURCES, {"a_b": 1, "port": 1})
    assert [m.split(":")[0] for m in found] == [
        "sglang_services_context_length",
        "sglang_services_extra_flags['a_b']",
        "sglang_services_extra_flags['port']",
    ]


def test_bad_arguments_and_a_table_without_flags():
    with pytest.raises(AnsibleFilterError, match="extra must be a mapping"):
        server_config_errors({}, FLAGS, SOURCES, ["x"])
    assert server_config_errors(DEFAULTS, {}, SOURCES) == [
        "the stack profile has no flag table (flags): the servers' settings cannot be checked."
    ]


def test_every_flag_the_config_file_can_set_is_accepted_with_a_value_of_its_kind(standin):
    """Across the whole table: a plausible value per flag passes exactly when sglang takes it."""
    samples = {"int": 3, "float": 0.5, "human_readable_int": "2k", "loads": "{}", "json_list_type": "[]"}
    for flag, entry in FLAGS.items():
        key = flag[2:]
        if entry["action"] == "store_true":
            value = True
        elif "choices" in entry:
            value = entry["choices"][0]
        else:
            value = samples.get(entry.get("type"), "x")
        if str(entry.get("nargs")) in ("+", "*"):
            value = [value]
        accepted = server_config_errors({key: value}, FLAGS) == []
        assert accepted == (entry["action"] in ("store", "store_true") and flag != "--config"), flag
        if accepted:
            assert sglang_takes(standin, {key: value}), flag
