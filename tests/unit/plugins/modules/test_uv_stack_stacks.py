"""gpulxc.sglang.uv_stack with stacks_dir: a new lock is built in its own directory beside the running stack and
the venv link switched to it in one rename; a plain venv at the lock is moved as it is; a rollback switches back
without installing; a failed build leaves the running stack; older stacks pruned unless a process runs from them.

uv is replaced by a recorder holding what each venv has installed (by its --python)."""

import os
import shutil
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

    def run_command(self, args, **kwargs):  # noqa: PLR0911 - one answer per uv command
        verb = args[1] if args[1] == "venv" else args[2]
        fake["calls"].append((verb, args))
        if verb == "compile":
            requirements = args[args.index("--override") - 1]  # in a temporary directory, as uv_stack writes it
            pins = _uv_stack.pins(Path(requirements).read_text())
            # as uv 0.13.9 writes it: the pin, its hashes, then where it comes from (the input file's own path)
            lines = "".join(
                f"{n}=={v} \\\n    --hash=sha256:{'ab' * 32}\n    # via -r {requirements}\n" for n, v in pins.items()
            )
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
            if fake.get("check_fails"):
                return 1, "", "The package `sglang` requires `torch==2.11.0`, but `2.10.0` is installed"
            return 0, "", ""
        raise AssertionError(args)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(uv_stack.os.path, "exists", lambda p: True if p == "/usr/local/bin/uv" else _exists(p))
    real_in_use = uv_stack.Stack.in_use
    monkeypatch.setattr(uv_stack.Stack, "in_use", lambda self, path: path in fake.get("in_use", ()))
    fake["real_in_use"] = real_in_use
    return {"venv": venv, "dir": tmp_path / "etc/stack", "stacks": tmp_path / "opt/stacks", "fake": fake}


def run(uv, version="0.5.12", *, check=False, diff=False, venv=None, stacks=None, keep=None):
    args = {
        "venv": venv or str(uv["venv"]),
        "dir": str(uv["dir"]),
        "stacks_dir": stacks or str(uv["stacks"]),
        "requirements": [f"sglang=={version}"],
        "_ansible_check_mode": check,
        "_ansible_diff": diff,
    }
    if keep is not None:
        args["keep_stacks"] = keep
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


def stacks_used_in_order(uv, versions):
    """One stack per version, switched to in this order, each marked used a minute after the one before."""
    made = []
    for minute, version in enumerate(versions):
        made.append(run(uv, version, keep=9)[1]["stack"])
        os.utime(Path(made[-1]) / ".gpulxc-stack-complete", (60.0 * minute, 60.0 * minute))
    return made


def test_keep_stacks_keeps_the_current_the_replaced_and_the_most_recently_used(uv):
    first, second, third = stacks_used_in_order(uv, ["0.5.12", "0.5.13", "0.5.14"])
    os.utime(Path(first) / ".gpulxc-stack-complete", (999999.0, 999999.0))  # first used after second
    ok, result = run(uv, "0.5.15", keep=3)
    assert ok and result["previous"] == third and result["pruned"] == [second], result
    assert sorted(os.listdir(uv["stacks"])) == sorted(Path(p).name for p in (first, third, result["stack"]))


def test_a_lowered_keep_stacks_prunes_without_a_switch_and_check_mode_only_says_so(uv):
    first, second = stacks_used_in_order(uv, ["0.5.12", "0.5.13"])
    ok, result = run(uv, "0.5.13", keep=1, check=True, diff=True)
    assert ok and result["changed"] and result["pruned"] == [first] and Path(first).is_dir(), result
    assert f"# {first}: removed (beyond keep_stacks 1)" in result["diff"]["after"]
    ok, result = run(uv, "0.5.13", keep=1)
    assert ok and result["changed"] and not result["switched"] and result["pruned"] == [first]
    assert os.listdir(uv["stacks"]) == [Path(second).name]
    assert run(uv, "0.5.13", keep=1)[1]["changed"] is False


def test_keep_stacks_1_still_keeps_a_stack_in_use_and_0_is_refused(uv):
    first = run(uv)[1]["stack"]
    uv["fake"]["in_use"] = [first]
    ok, result = run(uv, "0.5.13", keep=1)
    assert ok and result["pruned"] == [] and Path(first).is_dir()
    ok, result = run(uv, "0.5.13", keep=0)
    assert not ok and result["msg"].startswith("keep_stacks is 0: at least 1 (the current stack)"), result


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


def test_a_stack_deleted_by_hand_is_made_again_in_its_place(uv):
    stack = run(uv)[1]["stack"]
    shutil.rmtree(stack)
    uv["fake"]["installed"].pop(stack)
    ok, result = run(uv)
    assert ok and result["changed"] and result["stack"] == stack and result["previous"] is None, result
    assert uv["fake"]["installed"][stack] == {"sglang": "0.5.12"} and (Path(stack) / ".gpulxc-stack-complete").exists()
    ok, again = run(uv)
    assert ok and not again["changed"], again


def test_only_the_stacks_it_made_are_pruned(uv):
    uv["stacks"].mkdir(parents=True)
    (uv["stacks"] / "operators-notes").mkdir()
    (uv["stacks"] / "0123456789abcdef").symlink_to(uv["stacks"] / "operators-notes")
    run(uv)
    run(uv, "0.5.13")
    ok, result = run(uv, "0.5.14")
    assert ok and len(result["pruned"]) == 1, result["pruned"]  # the first stack only
    assert (uv["stacks"] / "operators-notes").is_dir() and (uv["stacks"] / "0123456789abcdef").is_symlink()


def test_a_stack_a_process_runs_from_or_a_unit_names_is_in_use(uv, tmp_path, monkeypatch):
    stack = tmp_path / "stacks/0123456789abcdef"
    proc, units = tmp_path / "proc", tmp_path / "systemd"
    (proc / "42").mkdir(parents=True)
    (proc / "self").mkdir()
    (units / "sglang@.service.d").mkdir(parents=True)
    monkeypatch.setattr(uv_stack, "PROC", str(proc))
    monkeypatch.setattr(uv_stack, "UNIT_DIR", str(units))
    in_use = uv["fake"]["real_in_use"]
    (proc / "42/cmdline").write_bytes(f"{stack}-other/bin/python\0-m\0x".encode())  # another stack's name
    assert not in_use(None, str(stack))
    (proc / "42/cmdline").write_bytes(f"{stack}/bin/python\0/usr/local/lib/sglang-launch.py\0".encode())
    assert in_use(None, str(stack))
    (proc / "42/cmdline").write_bytes(b"sleep\x00")
    (units / "sglang@.service").write_text(f"[Service]\nExecStart={stack}/bin/python launch\n")
    assert in_use(None, str(stack))  # its servers stopped, the unit still starts them from it


def test_links_and_slashes_in_the_paths_change_nothing_on_a_rerun(uv, tmp_path):
    (tmp_path / "real-stacks").mkdir()
    (tmp_path / "opt/linked").symlink_to(tmp_path / "real-stacks")
    venv, stacks = str(uv["venv"]) + "/", str(tmp_path / "opt/linked") + "/"
    ok, first = run(uv, venv=venv, stacks=stacks)
    assert ok and first["switched"] and first["stack"].startswith(str(tmp_path / "real-stacks") + "/"), first
    ok, again = run(uv, venv=venv, stacks=stacks)
    assert ok and not again["changed"], again


def test_stacks_inside_the_venv_are_refused(uv):
    ok, result = run(uv, stacks=str(uv["venv"] / "stacks"))
    assert not ok and "is inside the venv" in result["msg"], result


@pytest.mark.parametrize("stacks", ["stacks", "opt/stacks", "./stacks"])
def test_a_relative_stacks_dir_is_refused_before_anything_changes(uv, stacks):
    ok, result = run(uv, stacks=stacks)
    assert not ok and f"stacks_dir {stacks} is not an absolute path (sglang_stack_stacks_dir" in result["msg"], result
    assert not uv["dir"].exists() and not uv["venv"].is_symlink() and uv["fake"]["calls"] == []


def test_a_lost_marker_of_the_current_stack_is_written_again_after_a_check_never_rebuilt(uv):
    stack = run(uv)[1]["stack"]
    (Path(stack) / "kept").write_text("the servers' files")
    (Path(stack) / ".gpulxc-stack-complete").unlink()
    uv["fake"]["calls"].clear()
    ok, result = run(uv)
    assert ok and result["changed"] and not result["switched"], result
    assert verbs(uv)[-1] == "check" and "venv" not in verbs(uv) and "sync" not in verbs(uv), verbs(uv)
    assert (Path(stack) / "kept").exists() and (Path(stack) / ".gpulxc-stack-complete").exists()


def test_a_new_stack_failing_its_dependency_check_is_never_switched_to(uv):
    first = run(uv)[1]["stack"]
    uv["fake"]["check_fails"] = True
    ok, result = run(uv, "0.5.13")
    assert not ok and "uv pip check" in result["msg"], result
    assert os.path.realpath(uv["venv"]) == first
    assert not any(
        (uv["stacks"] / name / ".gpulxc-stack-complete").exists()
        for name in os.listdir(uv["stacks"])
        if str(uv["stacks"] / name) != first
    )


def test_the_link_is_replaced_in_one_rename_never_removed_first(uv, monkeypatch):
    run(uv)
    venv, removed, real_unlink = str(uv["venv"]), [], os.unlink

    def unlink(path, *args, **kwargs):
        removed.append(str(path))
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(uv_stack.os, "unlink", unlink)
    monkeypatch.setattr(uv_stack.os, "remove", unlink)
    ok, result = run(uv, "0.5.13")
    assert ok and result["switched"] and venv not in removed, removed


def test_a_plain_venv_is_checked_and_marked_before_it_is_moved(uv):
    uv["fake"]["installed"][str(uv["venv"])] = {"sglang": "0.5.12"}
    uv["fake"]["check_fails"] = True
    ok, result = run(uv)
    assert not ok and "uv pip check" in result["msg"], result
    assert uv["venv"].is_dir() and not uv["venv"].is_symlink()  # refused where it is, not moved
