"""gpulxc.sglang.stack_profile: the shipped profile by name, a user's file by absolute path, and every schema
error naming sglang_stack_profile."""

import os

import pytest
import yaml
from ansible.errors import AnsibleLookupError
from ansible_collections.gpulxc.sglang.plugins.lookup import stack_profile
from conftest import REPO

SHIPPED = REPO / "profiles/sglang-0.5.12.yml"


def test_the_shipped_profile_by_name_from_the_collection_root():
    profile = stack_profile.LookupModule().run(["sglang-0.5.12"])[0]
    assert profile["name"] == "sglang-0.5.12" and profile["packages"]["torch"] == "2.11.0"
    assert profile["cuda"]["family"]["nvidia-cuda-nvcc"] == "13.2.78" and profile["cuda"]["runtime_override"] is True
    assert profile["attention_backends"]["12.0"][0] == "flashinfer"
    assert os.path.realpath(stack_profile.PROFILES) == str(REPO / "profiles")  # through .ansible/collections


def test_the_second_profile_its_pins_and_the_flags_it_spells_differently():
    profile = stack_profile.LookupModule().run(["sglang-0.5.23"])[0]
    assert profile["packages"] == {
        "sglang": "0.5.23",
        "torch": "2.14.1",
        "sglang-kernel": "0.4.10",
        "flashinfer-python": "0.7.2",
    }
    assert profile["flag_names"] == {"mamba-scheduler-strategy": "mamba-radix-cache-strategy"}
    assert stack_profile.LookupModule().run(["sglang-0.5.12"])[0]["flag_names"] == {}  # none: the reference's own
    flags = stack_profile.LookupModule().run(["sglang-0.5.23"], flags=True)[0]["flags"]
    assert all(f"--{name}" in flags for name in profile["flag_names"].values())
    assert not [f"--{name}" for name in profile["flag_names"] if f"--{name}" in flags]


def test_the_flag_table_only_when_asked_for():
    """The roles keep the profile as a fact, copied into every later task's variables: without the large table."""
    assert "flags" not in stack_profile.LookupModule().run(["sglang-0.5.12"])[0]
    flags = stack_profile.LookupModule().run(["sglang-0.5.12"], flags=True)[0]["flags"]
    assert "auto" in flags["--reasoning-parser"]["choices"]


def test_an_unknown_name_lists_the_shipped_profiles():
    with pytest.raises(
        AnsibleLookupError,
        match=r"sglang_stack_profile: there is no profile 'sglang-9.9'\. "
        r"This collection ships \['sglang-0.5.12', 'sglang-0.5.23'\]",
    ):
        stack_profile.LookupModule().run(["sglang-9.9"])


def test_a_users_own_file_by_absolute_path(tmp_path):
    profile = yaml.safe_load(SHIPPED.read_text())
    path = tmp_path / "mine.yml"
    path.write_text(yaml.safe_dump({**profile, "pythons": [3.12]}))
    assert stack_profile.LookupModule().run([str(path)])[0]["pythons"] == ["3.12"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"packages": None}, "packages must map names to exact versions"),
        ({"pythons": "3.11"}, "pythons must be a list of X.Y versions"),
        (
            {"cuda": {"family": {}, "runtime": "13.2.75", "runtime_override": "yes", "nvrtc": "13.0.88"}},
            "cuda.family must map the compiler wheels to exact versions; cuda.runtime_override must be true or false",
        ),
        ({"attention_backends": {"12.0": []}}, "attention_backends must map compute capabilities"),
        ({"fallback_attention_backend": None}, "fallback_attention_backend must be a backend name"),
        ({"flag_names": ["mamba-scheduler-strategy"]}, "flag_names must map the reference's flag names"),
        ({"flag_names": {"mamba-scheduler-strategy": None}}, "flag_names must map the reference's flag names"),
    ],
)
def test_a_profile_that_does_not_fit_the_schema_is_refused_naming_the_variable(tmp_path, change, message):
    path = tmp_path / "bad.yml"
    path.write_text(yaml.safe_dump({**yaml.safe_load(SHIPPED.read_text()), **change}))
    with pytest.raises(AnsibleLookupError) as info:
        stack_profile.LookupModule().run([str(path)])
    assert str(info.value).startswith(f"sglang_stack_profile: {path}: ") and message in str(info.value)
