"""gpulxc.sglang.file_set on a temporary tree: creates, corrects and leaves alone; check and diff mode; secrets
never in a diff; a link never replaces a directory; a bad mode or user is named."""

import os
import stat

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpulxc.sglang.plugins.modules import file_set
from conftest import ModuleExit as Exit
from conftest import ModuleFail as Fail


def run(module_exits, check_mode=False, diff=False, **args):
    with (
        patch_module_args({"_ansible_check_mode": check_mode, "_ansible_diff": diff, **args}),
        pytest.raises((Exit, Fail)) as info,
    ):
        file_set.main()
    return info.type is Exit, info.value.args[0]


def tree(tmp_path, content="a = 1\n", mode="0640"):
    return {
        "directories": [{"path": str(tmp_path / "etc/sglang"), "mode": "0750"}],
        "files": [
            {"path": str(tmp_path / "etc/sglang/instance-0.yaml"), "content": content, "mode": mode},
            {"path": str(tmp_path / "etc/sglang/key"), "content": "s3cret-key", "mode": "0600", "secret": True},
        ],
        "links": [{"path": str(tmp_path / "lib64"), "src": "lib"}],
    }


def test_creates_everything_then_changes_nothing(module_exits, tmp_path):
    ok, result = run(module_exits, **tree(tmp_path))
    assert ok and result["changed"] is True
    paths = ("etc/sglang", "etc/sglang/instance-0.yaml", "etc/sglang/key", "lib64")
    assert result["changed_paths"] == [str(tmp_path / p) for p in paths]
    assert (tmp_path / "etc/sglang/instance-0.yaml").read_text() == "a = 1\n"
    assert stat.S_IMODE((tmp_path / "etc/sglang").stat().st_mode) == 0o750
    assert stat.S_IMODE((tmp_path / "etc/sglang/key").stat().st_mode) == 0o600
    assert os.readlink(tmp_path / "lib64") == "lib"
    assert not [p for p in (tmp_path / "etc/sglang").iterdir() if p.name.startswith(".")]
    ok, result = run(module_exits, **tree(tmp_path))
    assert ok and result["changed"] is False and result["changed_paths"] == []


def test_each_drift_is_repaired_and_named(module_exits, tmp_path):
    run(module_exits, **tree(tmp_path))
    (tmp_path / "etc/sglang/instance-0.yaml").write_text("a = 2\n")  # content
    os.chmod(tmp_path / "etc/sglang/key", 0o644)  # mode
    (tmp_path / "lib64").unlink()
    (tmp_path / "lib64").symlink_to("elsewhere")  # link target
    ok, result = run(module_exits, diff=True, **tree(tmp_path))
    assert ok and result["changed_paths"] == [
        str(tmp_path / p) for p in ("etc/sglang/instance-0.yaml", "etc/sglang/key", "lib64")
    ]
    assert (tmp_path / "etc/sglang/instance-0.yaml").read_text() == "a = 1\n"
    assert stat.S_IMODE((tmp_path / "etc/sglang/key").stat().st_mode) == 0o600
    assert os.readlink(tmp_path / "lib64") == "lib"
    config, key, lib64 = result["diff"]
    assert config["before"].endswith("a = 2\n") and config["after"].endswith("a = 1\n")
    assert "0644" in key["before"] and "0600" in key["after"]
    assert lib64 == {
        "before_header": str(tmp_path / "lib64"),
        "after_header": str(tmp_path / "lib64"),
        "before": "link -> elsewhere\n",
        "after": "link -> lib\n",
    }


def test_a_secret_is_never_in_the_diff(module_exits, tmp_path):
    ok, result = run(module_exits, diff=True, **tree(tmp_path))
    run(module_exits, **{**tree(tmp_path), "files": [{**tree(tmp_path)["files"][1], "content": "new-key"}]})
    text = repr(result["diff"])
    assert "s3cret-key" not in text and "(secret content changed)" in text
    ok, result = run(module_exits, diff=True, **tree(tmp_path))  # new-key -> s3cret-key again
    assert ok and "new-key" not in repr(result["diff"]) and "s3cret-key" not in repr(result["diff"])


def test_check_mode_reports_and_changes_nothing(module_exits, tmp_path):
    ok, result = run(module_exits, check_mode=True, diff=True, **tree(tmp_path))
    assert ok and result["changed"] is True and len(result["changed_paths"]) == 4 and len(result["diff"]) == 4
    assert list(tmp_path.iterdir()) == []


def test_a_link_never_replaces_a_directory(module_exits, tmp_path):
    (tmp_path / "lib64").mkdir()
    ok, result = run(module_exits, links=[{"path": str(tmp_path / "lib64"), "src": "lib"}])
    assert not ok and "is a directory" in result["msg"] and (tmp_path / "lib64").is_dir()


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"mode": "rw-r--r--"}, "is not an octal number"),
        ({"owner": "no-such-user-gpulxc"}, "no such user or group"),
    ],
)
def test_bad_entries_are_named_and_nothing_written(module_exits, tmp_path, entry, message):
    path = tmp_path / "f"
    ok, result = run(module_exits, files=[{"path": str(path), "content": "x", **entry}])
    assert not ok and str(path) in result["msg"] and message in result["msg"] and not path.exists()


def test_an_owner_left_out_is_left_as_it_is(module_exits, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    os.chown(cache, 1234, 1234)  # another role gives it to the service user
    ok, result = run(module_exits, directories=[{"path": str(cache)}])
    assert ok and result["changed"] is False and (cache.stat().st_uid, cache.stat().st_gid) == (1234, 1234)
    ok, result = run(module_exits, directories=[{"path": str(cache), "owner": "root", "group": "root"}])
    assert ok and result["changed"] is True and cache.stat().st_uid == 0


def test_a_file_in_a_missing_directory_is_named(module_exits, tmp_path):
    path = tmp_path / "no-such-dir/f"
    ok, result = run(module_exits, files=[{"path": str(path), "content": "x"}])
    assert not ok and str(path) in result["msg"] and "make its directory first" in result["msg"]


def test_a_directory_or_link_that_cannot_be_made_is_named(module_exits, tmp_path):
    (tmp_path / "file").write_text("")
    ok, result = run(module_exits, directories=[{"path": str(tmp_path / "file/sub")}])
    assert not ok and "cannot make the directory" in result["msg"]
    ok, result = run(module_exits, links=[{"path": str(tmp_path / "missing/link"), "src": "x"}])
    assert not ok and "cannot link it to x" in result["msg"]


def test_a_directory_reached_through_a_link_is_kept_and_its_target_set(module_exits, tmp_path):
    (tmp_path / "volume").mkdir(mode=0o700)
    (tmp_path / "cache").symlink_to("volume")
    ok, result = run(module_exits, directories=[{"path": str(tmp_path / "cache"), "mode": "0755"}])
    assert ok and result["changed"] is True and (tmp_path / "cache").is_symlink()
    assert stat.S_IMODE((tmp_path / "volume").stat().st_mode) == 0o755


def test_check_mode_with_a_user_not_made_yet_reports_a_change(module_exits, tmp_path):
    entry = {"path": str(tmp_path / "f"), "content": "x", "owner": "no-such-user-gpulxc"}
    ok, result = run(module_exits, check_mode=True, files=[entry])
    assert ok and result["changed_paths"] == [entry["path"]] and not (tmp_path / "f").exists()


def test_a_file_replacing_a_dangling_link_gets_its_mode(module_exits, tmp_path):
    """atomic_move gives a path it finds missing the umask's mode: the declared one is set after it."""
    (tmp_path / "f").symlink_to("nowhere")
    ok, result = run(module_exits, files=[{"path": str(tmp_path / "f"), "content": "x", "mode": "0640"}])
    assert ok and result["changed"] is True and not (tmp_path / "f").is_symlink()
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o640 and (tmp_path / "f").read_text() == "x"
