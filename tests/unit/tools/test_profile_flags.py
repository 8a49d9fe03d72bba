"""tools/profile_flags.py and the `flags:` table it wrote into profiles/sglang-0.5.12.yml: the table
is the real parser's (auto among the reasoning parsers, the --no- forms, the choices), and the
generator's dump and YAML are faithful (checked on a small parser, without the sglang wheel)."""

import argparse
import importlib.util
import re
from pathlib import Path

import yaml
from yamllint import linter
from yamllint.config import YamlLintConfig

REPO = Path(__file__).resolve().parents[3]
PROFILE = REPO / "profiles/sglang-0.5.12.yml"
spec = importlib.util.spec_from_file_location("profile_flags", REPO / "tools/profile_flags.py")
profile_flags = importlib.util.module_from_spec(spec)
spec.loader.exec_module(profile_flags)
FLAGS = yaml.safe_load(PROFILE.read_text())["flags"]


def test_the_table_has_reasoning_parser_auto_and_the_real_choices():
    reasoning = FLAGS["--reasoning-parser"]
    assert reasoning["choices"][0] == "auto" and "qwen3" in reasoning["choices"]
    assert "flashinfer" in FLAGS["--attention-backend"]["choices"]
    assert FLAGS["--sampling-backend"]["choices"] == ["ascend", "flashinfer", "pytorch"]  # a set, sorted
    assert FLAGS["--log-requests-level"]["choices"] == [0, 1, 2, 3]  # ints stay ints
    assert not [flag for flag, entry in FLAGS.items() if entry.get("choices") == "<computed>"]
    assert len(FLAGS) > 380 and FLAGS["--model-path"]["names"] == ["--model-path", "--model"]


def test_the_second_profiles_table_is_its_own_release_s():
    """sglang 0.5.23 renamed --mamba-scheduler-strategy (the profile's flag_names) and retired other flags."""
    flags = yaml.safe_load((REPO / "profiles/sglang-0.5.23.yml").read_text())["flags"]
    assert flags["--mamba-radix-cache-strategy"]["choices"] == [
        "auto",
        "no_buffer",
        "extra_buffer",
        "extra_buffer_lazy",
    ]
    assert "--mamba-scheduler-strategy" not in flags and "--cuda-graph-max-bs" not in flags
    assert flags["--tp-size"]["names"] == ["--tp-size", "--tensor-parallel-size"]
    assert flags["--disable-cuda-graph"]["action"] == "DeprecatedStoreTrueAction"
    assert not [flag for flag, entry in flags.items() if entry.get("choices") == "<computed>"]
    assert "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl" in (REPO / "profiles/sglang-0.5.23.yml").read_text()


def test_every_boolean_optional_flag_has_its_no_forms():
    boolean = {flag: entry["names"] for flag, entry in FLAGS.items() if entry["action"] == "BooleanOptionalAction"}
    assert {"--lora-strict-loading", "--experts-shared-outer-loras", "--record-nolora-graph"} <= set(boolean)
    for names in boolean.values():
        positive = [name for name in names if not name.startswith("--no-")]
        assert positive and all("--no-" + name[2:] in names for name in positive)


def test_the_header_names_the_generator_the_wheel_and_its_sha256():
    text = PROFILE.read_text()
    header = text[text.index(profile_flags.MARKER) : text.index("\nflags:")]
    assert "python tools/profile_flags.py sglang-0.5.12-cp311-cp311-manylinux_2_34_x86_64.whl" in header
    assert re.search(r"sha256 [0-9a-f]{64}\.", header)
    assert list(yaml.safe_load(text))[-1] == "flags"  # the generated section ends the file


def test_the_dump_keeps_every_action_and_marks_stubbed_choices():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-path", "--model", type=str)
    parser.add_argument("--strict", action=argparse.BooleanOptionalAction)
    parser.add_argument("--level", type=int, choices=[0, 1])
    parser.add_argument("--backend", choices={"b", "a"})
    parser.add_argument("--checksum", nargs="?", const="")
    parser.add_argument("--stubbed", choices=profile_flags._stub("torch.backends"))
    parser.add_argument("--on", action="store_true")
    table, stubbed = profile_flags.entries(parser)
    assert table["--strict"] == {"names": ["--strict", "--no-strict"], "action": "BooleanOptionalAction"}
    assert table["--level"] == {"names": ["--level"], "action": "store", "type": "int", "choices": [0, 1]}
    assert table["--backend"]["choices"] == ["a", "b"]
    assert table["--checksum"] == {"names": ["--checksum"], "action": "store", "nargs": "?", "const": ""}
    assert table["--on"] == {"names": ["--on"], "action": "store_true"}
    assert table["--stubbed"]["choices"] == "<computed>" and stubbed == ["--stubbed"]
    assert "-h" not in table


def test_the_yaml_reads_back_as_the_table_within_the_line_length():
    table = {
        "--a": {"names": ["--a"], "action": "store", "type": "str", "choices": [f"choice{n}" for n in range(40)]},
        "--" + "x" * 80: {"names": ["--" + "x" * 80], "action": "store", "type": "int"},
        "--" + "y" * 80: {"names": ["--" + "y" * 80], "action": "store", "type": "str", "choices": ["a", "b"]},
        "--null": {"names": ["--null"], "action": "store", "choices": ["none", "true", "1", 1, "a: b"]},
    }
    text = "---\n" + profile_flags.render(table, [": header", "second"])
    assert yaml.safe_load(text)["flags"] == table
    problems = list(linter.run(text, YamlLintConfig(file=str(REPO / ".yamllint"))))
    assert not problems and max(len(line) for line in text.splitlines()) <= 120
