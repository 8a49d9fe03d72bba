"""roles/sglang_services/files/sglang-stage-model: copies once, skips an identical copy, refuses without
room before touching anything, never leaves a half copy under the model's name."""

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


def test_a_failed_copy_leaves_no_partial_copy(model, capsys, monkeypatch):
    source, target = model

    def broken_copy(src, dst, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(stage_model.shutil, "copytree", broken_copy)
    with pytest.raises(SystemExit):
        run(capsys, "--source", source, "--target", target, "--reserve-mb", 0)
    assert "No space left on device" in capsys.readouterr().err
    assert not target.exists() and not Path(str(target) + ".partial").exists()
