"""roles/sglang_services/files/sglang-stage-model: copies once, skips an identical copy, refuses without
room before touching anything, never leaves a half copy under the model's name."""

import errno
import importlib.machinery
import importlib.util
import json
import os
from collections import namedtuple
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "roles/sglang_services/files/sglang-stage-model"
_loader = importlib.machinery.SourceFileLoader("sglang_stage_model", str(SCRIPT))
stage_model = importlib.util.module_from_spec(importlib.util.spec_from_loader("sglang_stage_model", _loader))
_loader.exec_module(stage_model)
StatVfs = namedtuple("StatVfs", "f_bavail f_frsize")


@pytest.fixture
def model(tmp_path):
    source = tmp_path / "persistent/model"
    (source / "sub").mkdir(parents=True)
    (source / "config.json").write_text('{"model_type": "x"}')
    (source / "sub/weights.bin").write_bytes(os.urandom(4096))
    (tmp_path / "shm").mkdir()
    return source, tmp_path / "shm/model"


def run(capsys, *argv):
    stage_model.main([str(a) for a in argv])
    return json.loads(capsys.readouterr().out)


def test_copies_then_skips_an_identical_copy(model, capsys):
    source, target = model
    first = run(capsys, "--source", source, "--target", target, "--reserve-mb", 0)
    assert first["changed"] is True and first["bytes"] == 4096 + 19
    assert (target / "sub/weights.bin").read_bytes() == (source / "sub/weights.bin").read_bytes()
    assert not Path(str(target) + ".partial").exists()
    assert run(capsys, "--source", source, "--target", target, "--reserve-mb", 0)["changed"] is False


def test_a_changed_or_removed_file_is_copied_again(model, capsys):
    source, target = model
    run(capsys, "--source", source, "--target", target, "--reserve-mb", 0)
    (target / "sub/weights.bin").unlink()
    assert run(capsys, "--source", source, "--target", target, "--reserve-mb", 0)["changed"] is True
    assert (target / "sub/weights.bin").exists()
    (target / "config.json").write_text("{}")
    assert run(capsys, "--source", source, "--target", target, "--reserve-mb", 0)["changed"] is True
    assert (target / "config.json").read_text() == '{"model_type": "x"}'


def test_dry_run_reports_and_changes_nothing(model, capsys):
    source, target = model
    result = run(capsys, "--source", source, "--target", target, "--reserve-mb", 0, "--dry-run")
    assert result["changed"] is True and result["reason"].startswith("would have copied")
    assert not target.exists()


def test_no_room_fails_before_touching_the_old_copy(model, capsys, monkeypatch):
    source, target = model
    run(capsys, "--source", source, "--target", target, "--reserve-mb", 0)
    (source / "sub/weights.bin").write_bytes(os.urandom(16384))  # a new model, bigger
    monkeypatch.setattr(stage_model.os, "statvfs", lambda path: StatVfs(f_bavail=1, f_frsize=4096))
    with pytest.raises(SystemExit) as exit_info:
        run(capsys, "--source", source, "--target", target, "--reserve-mb", 0)
    assert exit_info.value.code == 1
    assert "not enough room in" in capsys.readouterr().err
    assert len((target / "sub/weights.bin").read_bytes()) == 4096  # the old copy is untouched


def test_reserve_counts(model, capsys, monkeypatch):
    source, target = model
    monkeypatch.setattr(stage_model.os, "statvfs", lambda path: StatVfs(f_bavail=1024, f_frsize=4096))  # 4 MiB
    assert run(capsys, "--source", source, "--target", target, "--reserve-mb", 3)["changed"] is True
    with pytest.raises(SystemExit):
        run(capsys, "--source", source, "--target", str(target) + "-2", "--reserve-mb", 4)
    assert "plus a reserve of 4 MiB" in capsys.readouterr().err


def test_missing_source_names_the_variable(tmp_path, capsys):
    with pytest.raises(SystemExit):
        run(capsys, "--source", tmp_path / "nothing", "--target", tmp_path / "shm")
    assert "sglang_services_model_source" in capsys.readouterr().err


def copy_then(action, after=1):
    """shutil.copy2 that runs action() once `after` files are copied (what happens while the copy runs)."""
    real, count = stage_model.shutil.copy2, [0]

    def copy2(src, dst, **kwargs):
        if count[0] == after:
            action(src, dst)
        count[0] += 1
        return real(src, dst, **kwargs)

    return copy2


def staged_again(model, capsys, monkeypatch, action, free_blocks=None):
    """A first copy, then a new model staged while action() happens during its copy: (exit code, stderr)."""
    source, target = model
    run(capsys, "--source", source, "--target", target, "--reserve-mb", 0)
    (source / "sub/weights.bin").write_bytes(os.urandom(8192))
    os.utime(source / "sub/weights.bin", (1, 1))
    if free_blocks is not None:
        monkeypatch.setattr(stage_model.os, "statvfs", lambda path: StatVfs(f_bavail=free_blocks, f_frsize=4096))
    monkeypatch.setattr(stage_model.shutil, "copy2", copy_then(action))
    with pytest.raises(SystemExit) as exit_info:
        run(capsys, "--source", source, "--target", target, "--reserve-mb", 0)
    return exit_info.value.code, capsys.readouterr().err


def no_partial_copy(target):
    return not Path(str(target) + ".partial").exists() and not Path(str(target) + ".previous").exists()


def fill_up(error):
    def action(src, dst):
        Path(dst).parents[2].joinpath("filler").write_bytes(b"x" * 100)
        raise OSError(error, os.strerror(error), dst)

    return action


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EDQUOT])
def test_dev_shm_filling_up_during_the_copy_is_named_with_what_fills_it_and_the_previous_copy_stays(
    model, capsys, monkeypatch, error
):
    code, err = staged_again(model, capsys, monkeypatch, fill_up(error))
    _, target = model
    assert code == 1
    assert "filled up during the copy of the model, after 1 of 2 files" in err, err
    assert f"the largest entries now: {target.parent}/model (" in err and f"{target.parent}/filler (" in err, err
    assert f"Nothing was staged ({target} still holds the previous copy)" in err, err
    assert len((target / "sub/weights.bin").read_bytes()) == 4096 and no_partial_copy(target)


def vanish_directory(src, dst):
    source = Path(src).parents[1]
    source.rename(source.with_name("model.unmounted"))


def vanish_files(src, dst):
    for path in sorted(Path(src).parents[1].rglob("*.bin")):
        path.unlink()


@pytest.mark.parametrize("vanish", [vanish_directory, vanish_files])
def test_the_source_vanishing_during_the_copy_is_named_and_the_previous_copy_stays(model, capsys, monkeypatch, vanish):
    code, err = staged_again(model, capsys, monkeypatch, vanish)
    source, target = model
    assert code == 1
    assert f"the model source {source} vanished during the copy, after 1 of 2 files" in err, err
    assert "is its storage still mounted in the container (pct_container_mounts)?" in err, err
    assert f"{target} still holds the previous copy" in err, err
    assert len((target / "sub/weights.bin").read_bytes()) == 4096 and no_partial_copy(target)


def test_without_room_for_two_copies_the_previous_goes_first_and_a_failure_says_so(model, capsys, monkeypatch):
    # 1 block: room for the new 8 KiB model with the old one's room, not for both
    code, err = staged_again(model, capsys, monkeypatch, vanish_directory, free_blocks=1)
    _, target = model
    assert code == 1 and f"{target} holds no model now" in err, err
    assert not target.exists() and no_partial_copy(target)


def test_a_source_rewritten_during_the_copy_stages_nothing(model, capsys, monkeypatch):
    def rewrite(src, dst):
        os.utime(Path(src).parents[1] / "config.json", (2, 2))  # already copied, now another file

    code, err = staged_again(model, capsys, monkeypatch, rewrite)
    source, target = model
    assert code == 1 and f"the model source {source} changed during the copy (config.json, for one)" in err, err
    assert len((target / "sub/weights.bin").read_bytes()) == 4096 and no_partial_copy(target)


def test_any_other_copy_error_is_reported_with_its_progress(model, capsys, monkeypatch):
    def broken(src, dst):
        raise OSError(errno.EIO, "Input/output error", src)

    code, err = staged_again(model, capsys, monkeypatch, broken)
    assert code == 1 and "failed after 1 of 2 files" in err and "Input/output error" in err, err


def test_what_a_cut_off_copy_left_is_replaced_and_counted_as_room(model, capsys, monkeypatch):
    source, target = model
    for leftover in (".partial", ".previous"):
        Path(str(target) + leftover).mkdir(parents=True)
        Path(str(target) + leftover, "w").write_bytes(b"x" * 8192)
    # 1 block free: only the leftovers' 16 KiB make room for the 4 KiB model
    monkeypatch.setattr(stage_model.os, "statvfs", lambda path: StatVfs(f_bavail=1, f_frsize=4096))
    assert run(capsys, "--source", source, "--target", target, "--reserve-mb", 0)["changed"] is True
    assert (target / "config.json").exists() and no_partial_copy(target)


def test_a_swap_failing_half_way_puts_the_previous_copy_back(model, capsys, monkeypatch):
    source, target = model
    run(capsys, "--source", source, "--target", target, "--reserve-mb", 0)
    (source / "sub/weights.bin").write_bytes(os.urandom(8192))
    real_rename = stage_model.os.rename

    def rename(src, dst):
        if str(src).endswith(".partial"):
            raise OSError(errno.EIO, "Input/output error", src)
        return real_rename(src, dst)

    monkeypatch.setattr(stage_model.os, "rename", rename)
    with pytest.raises(SystemExit):
        run(capsys, "--source", source, "--target", target, "--reserve-mb", 0)
    assert f"{target} still holds the previous copy" in capsys.readouterr().err
    assert len((target / "sub/weights.bin").read_bytes()) == 4096 and no_partial_copy(target)
