"""gpulxc.sglang.uv_stack with stacks_dir: a new lock is built in its own directory beside the running stack and
the venv link switched to it in one rename; a plain venv at the lock is moved as it is; a rollback switches back
without installing; a failed build leaves the running stack; older stacks pruned unless a process runs from them.

uv is replaced by a recorder holding what each venv has installed (by its --python)."""

import os
from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpulxc.sglang.plugins.module_utils import _uv_stack
from ansible_collections.gpulxc.sglang.plugins.modules import uv_stack
from conftest import ModuleExit as Exit
from conftest import ModuleFail as Fail

_exists = uv_stack.os.path.exists


@pytest.fixture
def uv(tmp_path, monkeypatch, module_exits):
    venv = tmp_path / "opt/venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin/python").touch()
    fake = {"installed": {}, "calls": [], "sync_fails": "", "during_sync": []}

    def venv_of(args):
        return str(Path(args[args.index("--python") + 1]).parent.parent)

    def run_command(self, args, **kwargs):
        verb = args[1] if args[1] == "venv" else args[2]
        fake["calls"].append((verb, args))
        if verb == "compile":
            requirements = args[args.index("--override") - 1]  # in a temporary directory, as uv_stack writes it
            pins = _uv_stack.pins(Path(requirements).read_text())
            # as uv 0.13.9 writes it: the pin, its hashes, then where it comes from (the input file's own path)
            lines = "".join(f"{n}=={v} \\\n    --hash=sha256:{'ab' * 32}\n    # via -r {requirements}\n"
                            for n, v in pins.items())  # fmt: skip
            Path(args[args.index("-o") + 1]).write_text(lines)
            return 0, "", ""
        if verb == "venv":
            (Path(args[-1]) / "bin").mkdir(parents=True)
            (Path(args[-1]) / "bin/python").touch()
            return 0, "", ""
        if verb == "freeze":
            installed = fake["installed"].get(os.path.realpath(venv_of(args)), {})
            return 0, "".join(f"{n}=={v}\n" for n, v in installed.items()), ""
        if verb == "sync":
            fake["during_sync"].append((venv_of(args), os.path.realpath(venv)))
            if fake["sync_fails"]:
                return 2, "", fake["sync_fails"]
            fake["installed"][os.path.realpath(venv_of(args))] = dict(_uv_stack.pins(Path(args[-1]).read_text()))
            return 0, "", ""
        if verb == "check":
            return 0, "", ""
        raise AssertionError(args)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(uv_stack.os.path, "exists", lambda p: True if p == "/usr/local/bin/uv" else _exists(p))
    monkeypatch.setattr(uv_stack.Stack, "in_use", lambda self, path: path in fake.get("in_use", ()))
    return {"venv": venv, "dir": tmp_path / "etc/stack", "stacks": tmp_path / "opt/stacks", "fake": fake}


def run(uv, version="0.5.12", check=False, diff=False):
    args = {"venv": str(uv["venv"]), "dir": str(uv["dir"]), "stacks_dir": str(uv["stacks"]),
            "requirements": [f"sglang=={version}"], "_ansible_check_mode": check, "_ansible_diff": diff}  # fmt: skip
    with patch_module_args(args), pytest.raises((Exit, Fail)) as info:
        uv_stack.main()
    return info.type is Exit, info.value.args[0]


def verbs(uv):
    return [verb for verb, _ in uv["fake"]["calls"]]


def test_a_fresh_venv_becomes_a_link_to_the_locks_own_stack(uv):
    ok, result = run(uv)
    assert ok and result["changed"] and result["switched"], result
    stack = Path(result["stack"])
    assert stack.parent == uv["stacks"] and len(stack.name) == 16
    assert os.path.islink(uv["venv"]) and os.path.realpath(uv["venv"]) == str(stack)
    assert (stack / ".gpulxc-stack-complete").exists() and result["previous"] is None  # the empty venv: removed
    assert uv["fake"]["installed"][str(stack)] == {"sglang": "0.5.12"}
    ok, again = run(uv)
    assert ok and not again["changed"] and not again["switched"], again


def test_a_plain_venv_at_the_lock_is_moved_into_its_stack_as_it_is(uv):
    uv["fake"]["installed"][str(uv["venv"])] = {"sglang": "0.5.12"}
    (uv["venv"] / "marker").write_text("these files")
    ok, result = run(uv)
    assert ok and result["switched"] and "sync" not in verbs(uv), verbs(uv)
    assert (Path(result["stack"]) / "marker").read_text() == "these files"
    assert os.path.realpath(uv["venv"]) == result["stack"]


def test_a_new_lock_is_built_beside_the_running_stack_then_switched_to_and_the_old_one_stays(uv):
    first = run(uv)[1]["stack"]
    uv["fake"]["during_sync"].clear()
    ok, result = run(uv, "0.5.13", diff=True)
    assert ok and result["switched"] and result["stack"] != first and result["previous"] == first
    # while the new stack was installed, the venv still was the old one
    assert uv["fake"]["during_sync"] == [(result["stack"], first)]
    assert os.path.realpath(uv["venv"]) == result["stack"] and Path(first).is_dir()
    assert result["drift"] == {"sglang": {"installed": "0.5.12", "locked": "0.5.13"}}
    assert f"-> {result['stack']} (built beside it, then switched to)" in result["diff"]["after"]


def test_a_rollback_switches_back_without_installing(uv):
    first = run(uv)[1]["stack"]
    second = run(uv, "0.5.13")[1]["stack"]
    uv["fake"]["calls"].clear()
    ok, result = run(uv, "0.5.12")
    assert ok and result["switched"] and result["stack"] == first and result["previous"] == second
    assert "sync" not in verbs(uv) and "venv" not in verbs(uv), verbs(uv)


def test_older_stacks_are_pruned_unless_a_process_runs_from_them(uv):
    first = run(uv)[1]["stack"]
    second = run(uv, "0.5.13")[1]["stack"]
    uv["fake"]["in_use"] = [first]
    ok, result = run(uv, "0.5.14")
    assert ok and result["pruned"] == [] and Path(first).is_dir()  # a server still runs from it
    uv["fake"]["in_use"] = []
    ok, result = run(uv, "0.5.15")
    assert sorted(result["pruned"]) == sorted([first, second]), result["pruned"]
    assert sorted(os.listdir(uv["stacks"])) == sorted(Path(p).name for p in (result["stack"], result["previous"]))


def test_a_failed_build_leaves_the_running_stack_and_a_rerun_builds_it_again(uv):
    first = run(uv)[1]["stack"]
    uv["fake"]["sync_fails"] = "Hash mismatch for `sglang==0.5.13`"
    ok, result = run(uv, "0.5.13")
    assert not ok and "Hash mismatch" in result["msg"], result
    assert os.path.realpath(uv["venv"]) == first  # the servers' stack untouched
    new = [p for p in os.listdir(uv["stacks"]) if str(uv["stacks"] / p) != first]
    assert not (uv["stacks"] / new[0] / ".gpulxc-stack-complete").exists()  # never taken for a whole stack
    uv["fake"]["sync_fails"] = ""
    ok, result = run(uv, "0.5.13")
    assert ok and result["switched"] and os.path.realpath(uv["venv"]) == result["stack"] != first


def test_a_drift_of_the_current_stack_is_repaired_in_place(uv):
    stack = run(uv)[1]["stack"]
    uv["fake"]["installed"][stack] = {"sglang": "0.5.11"}
    uv["fake"]["during_sync"].clear()
    ok, result = run(uv)
    assert ok and result["synced"] and not result["switched"], result
    assert uv["fake"]["during_sync"] == [(stack, stack)]


def test_check_mode_reports_the_switch_and_changes_nothing(uv):
    first = run(uv)[1]["stack"]
    before = sorted(os.listdir(uv["stacks"]))
    ok, result = run(uv, "0.5.13", check=True)
    assert ok and result["changed"] and result["switched"] and result["stack"] != first
    assert os.path.realpath(uv["venv"]) == first and sorted(os.listdir(uv["stacks"])) == before
