"""gpulxc.sglang.renamed_variables: an old name the play sets gets a deprecation warning naming the new one, through
ansible-playbook's own display (on the ansible-core of the leg that runs it)."""

import subprocess
import sys
from pathlib import Path

from ansible_collections.gpulxc.sglang.plugins.action.renamed_variables import renamed_in_use

REPO = Path(__file__).resolve().parents[4]
RENAMED = {
    "cuda_wheels_family": "sglang_stack_cuda_family",
    "cuda_wheels_nvrtc_version": "sglang_stack_cuda_nvrtc_version",
}


def test_only_the_old_names_set_are_reported():
    used, deprecations = renamed_in_use(RENAMED, {"cuda_wheels_nvrtc_version": "13.0.88", "other": 1}, "0.4.0")
    assert used == {"cuda_wheels_nvrtc_version": "sglang_stack_cuda_nvrtc_version"}
    assert deprecations == [
        {
            "msg": "cuda_wheels_nvrtc_version is renamed sglang_stack_cuda_nvrtc_version: set"
            " sglang_stack_cuda_nvrtc_version instead (cuda_wheels_nvrtc_version is read in its place until then).",
            "version": "0.4.0",
            "collection_name": "gpulxc.sglang",
        }
    ]
    assert renamed_in_use(RENAMED, {}, "0.4.0") == ({}, [])


def test_ansible_playbook_shows_the_deprecation(tmp_path):
    (tmp_path / "play.yml").write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - gpulxc.sglang.renamed_variables:\n"
        "        renamed: {cuda_wheels_family: sglang_stack_cuda_family}\n"
        "        version: 0.4.0\n"
    )
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local"]
    env = {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_DEPRECATION_WARNINGS": "true", "PATH": "/usr/bin:/bin"}
    run = {"capture_output": True, "text": True, "cwd": REPO, "env": env}
    quiet = subprocess.run([*command, str(tmp_path / "play.yml")], check=False, **run)
    assert quiet.returncode == 0 and "DEPRECATION" not in quiet.stdout + quiet.stderr, quiet.stdout + quiet.stderr
    proc = subprocess.run(
        [*command, str(tmp_path / "play.yml"), "-e", '{"cuda_wheels_family": {}}'], check=False, **run
    )
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 0, out
    assert "[DEPRECATION WARNING]: cuda_wheels_family is renamed sglang_stack_cuda_family" in out, out
    assert "0.4.0" in out, out
