"""gpulxc.sglang.jit_cache on real ninja builds: a finished one, one killed half-way by SIGKILL (ninja and
its link step die, a truncated library is left and not logged), one whose lock another process holds."""

import fcntl
import subprocess

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpulxc.sglang.plugins.modules import jit_cache
from conftest import ModuleExit as Exit
from conftest import ModuleFail as Fail

# the link step writes a partial library, then kills ninja (its parent) and itself: a build killed half-way
LINK_KILLED = "head -c 100 /bin/sh > $out && kill -9 $$PPID $$$$"


def ninja_op(root, name, link="cp $in $out"):
    """A FlashInfer-style op: cached_ops/<name>/build.ninja compiles <name>.o then links <name>.so."""
    op = root / "0.6.11.post1/120a/cached_ops" / name
    op.mkdir(parents=True)
    (op / f"{name}.cu").write_text("__global__ void k() {}\n")
    (op / "build.ninja").write_text(
        f"rule compile\n  command = cp $in $out\nrule link\n  command = {link}\n"
        f"build {name}.o: compile {name}.cu\nbuild {name}.so: link {name}.o\n"
    )
    subprocess.run(["ninja", "-C", str(op)], capture_output=True, check=False)
    return op


def run(module_exits, check_mode=False, diff=False, **args):
    with (
        patch_module_args({"_ansible_check_mode": check_mode, "_ansible_diff": diff, **args}),
        pytest.raises((Exit, Fail)) as info,
    ):
        jit_cache.main()
    return info.type is Exit, info.value.args[0]


def test_a_missing_cache_is_cold_and_unchanged(module_exits, tmp_path):
    ok, result = run(module_exits, path=str(tmp_path / "nothing"))
    assert ok and result["changed"] is False and result["warm"] is False and result["removed"] == []


def test_a_finished_build_makes_the_cache_warm_and_stays(module_exits, tmp_path):
    op = ninja_op(tmp_path, "batch_decode")
    ok, result = run(module_exits, path=str(tmp_path))
    assert ok and result["changed"] is False and result["warm"] is True
    assert result["finished"] == [str(op)] and (op / "batch_decode.so").exists()


def test_a_build_killed_half_way_is_removed_and_the_rest_kept(module_exits, tmp_path):
    done = ninja_op(tmp_path, "batch_decode")
    killed = ninja_op(tmp_path, "batch_prefill", link=LINK_KILLED)
    assert (killed / "batch_prefill.so").stat().st_size == 100  # the truncated library a loader would take
    assert "batch_prefill.so" not in (killed / ".ninja_log").read_text()
    ok, result = run(module_exits, path=str(tmp_path))
    assert ok and result["changed"] is True and result["warm"] is True
    assert result["removed"] == [str(killed)] and not killed.exists()
    assert result["finished"] == [str(done)] and (done / "batch_decode.so").exists()
    ok, result = run(module_exits, path=str(tmp_path))
    assert ok and result["changed"] is False


def test_a_build_whose_lock_is_held_is_left_alone(module_exits, tmp_path):
    op = tmp_path / "cached_ops/batch_decode"
    op.mkdir(parents=True)
    (op / "build.ninja").write_text("rule link\n  command = cp $in $out\nbuild batch_decode.so: link x.o\n")
    (tmp_path / "cached_ops/tmp").mkdir()
    with (tmp_path / "cached_ops/tmp/batch_decode.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a starting server is building it now
        ok, result = run(module_exits, path=str(tmp_path))
        assert ok and result["changed"] is False and result["building"] == [str(op)] and op.exists()
    ok, result = run(module_exits, path=str(tmp_path))  # its builder died: the lock is free again
    assert ok and result["removed"] == [str(op)] and not op.exists()


def test_check_mode_reports_and_removes_nothing_with_a_diff(module_exits, tmp_path):
    killed = ninja_op(tmp_path, "sampling", link=LINK_KILLED)
    ok, result = run(module_exits, check_mode=True, diff=True, path=str(tmp_path))
    assert ok and result["changed"] is True and result["removed"] == [str(killed)] and killed.exists()
    assert result["diff"] == {"before": f"{killed}/ (unfinished build)\n", "after": ""}
    assert result["warm"] is False


def test_ninja_escapes_in_outputs(tmp_path):
    (tmp_path / "build.ninja").write_text(
        "build a$ b.o | implicit.o: cc a.cu\nbuild c$:d.so e.so: link a$ b.o\n  pool = x\nbuilddir = y\n"
    )
    assert jit_cache.ninja_outputs(tmp_path / "build.ninja") == ["a b.o", "c:d.so", "e.so"]
