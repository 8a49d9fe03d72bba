"""The ansible-core versions the collection claims (meta/runtime.yml) are the ones it is tested on: tools/test runs
sanity and unit on each minor in pct_ssh's PRELOAD_CORE_VERSIONS, and the channel preloads modules only there."""

from pathlib import Path

import yaml
from ansible.module_utils.compat.version import LooseVersion
from ansible.release import __version__ as core_version
from ansible_collections.gpulxc.sglang.plugins.connection import pct_ssh

REPO = Path(__file__).resolve().parents[2]
TESTED = pct_ssh.PRELOAD_CORE_VERSIONS


def test_requires_ansible_is_bounded_by_the_tested_minors():
    oldest, newest = TESTED[0], TESTED[-1]
    following = "%s.%d" % (newest.split(".")[0], int(newest.split(".")[1]) + 1)
    runtime = yaml.safe_load((REPO / "meta/runtime.yml").read_text())
    assert runtime["requires_ansible"] == ">=%s.0,<%s.0" % (oldest, following)


def test_every_tested_minor_has_its_leg_and_this_core_is_one_of_them():
    legs = {path.stem.removeprefix("core-") for path in (REPO / "tools/venvs").glob("core-*.txt")}
    assert legs == set(TESTED[1:]), "tools/venvs/core-<minor>.txt for every tested minor but the project venv's"
    assert ".".join(core_version.split(".")[:2]) in TESTED, "ansible-core %s is not a tested one" % core_version
    assert LooseVersion(core_version) >= LooseVersion(TESTED[0])
