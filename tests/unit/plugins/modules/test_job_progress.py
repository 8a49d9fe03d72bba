"""gpulxc.sglang.job_progress: a slice of the wait for an async job - finished as async_status decides, the watched
sizes of their totals, the slice kept, a failed job's message - and the async protocol of the ansible-core the
suite runs on (a real `async`/`poll: 0` job: its results file reads as running, then as finished)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpulxc.sglang.plugins.modules import job_progress
from conftest import ModuleExit as Exit
from conftest import ModuleFail as Fail

pytestmark = pytest.mark.timed  # its waits and fakes time what they test (tests/unit/conftest.py)


def run(module_exits, **args):
    with patch_module_args(args), pytest.raises((Exit, Fail)) as info:
        job_progress.main()
    return info.type is Exit, info.value.args[0]


@pytest.mark.parametrize(
    ("content", "result"),
    [
        (None, None),  # not written yet
        ("", None),
        ('{"started": 1, "fini', None),  # being written
        ('{"started": 1, "finished": 0, "ansible_job_id": "j1"}', None),  # async_wrapper's placeholder
        ('{"changed": true, "rc": 0}', {"changed": True, "rc": 0}),
        ('["not", "a", "result"]', None),
    ],
)
def test_a_job_is_finished_as_async_status_reads_its_file(tmp_path, content, result):
    path = tmp_path / "j1"
    if content is not None:
        path.write_text(content)
    assert job_progress.finished(str(path)) == result


def test_a_running_job_gives_a_line_of_its_sizes_after_the_slice(module_exits, tmp_path):
    (tmp_path / "j1").write_text('{"started": 1, "finished": 0}')
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a").write_bytes(b"x" * 3 * 1024 * 1024)
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "a").write_bytes(b"x" * 1024 * 1024)
    os.symlink("/usr", tmp_path / "dst" / "link")  # not followed
    begun = time.monotonic()
    ok, result = run(
        module_exits,
        results_file=str(tmp_path / "j1"),
        what="staging",
        slice=0.5,
        watch=[
            {"path": str(tmp_path / "dst"), "name": "copied", "total": str(tmp_path / "src")},
            {"path": str(tmp_path / "missing"), "name": "cache"},
        ],
        resume={"started": time.time() - 75},
    )
    assert ok and not result["done"] and not result["job_failed"] and not result["changed"]
    assert 0.5 <= time.monotonic() - begun < 3
    assert result["progress"] == "staging: copied 1.0 MiB of 3.0 MiB, cache 0 B after 1m15s"


def test_a_failed_commands_message_carries_what_it_wrote(module_exits, tmp_path):
    results = tmp_path / "j1"
    said = "sglang-stage-model: the model source /srv/m vanished during the copy"
    failed = {"failed": True, "msg": "non-zero return code", "rc": 1, "stdout": "", "stderr": said + "\n"}
    results.write_text(json.dumps(failed))
    ok, result = run(module_exits, results_file=str(results), what="staging", slice=1)
    assert ok and result["done"] and result["job_failed"]
    assert result["job_msg"] == f"non-zero return code: {said}"


def test_a_job_that_ends_during_the_slice_returns_at_once_with_its_failure(module_exits, tmp_path):
    results = tmp_path / "j1"
    results.write_text('{"started": 1, "finished": 0}')
    subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import time; time.sleep(0.5); open({str(results)!r}, 'w').write("
            '\'{"failed": 1, "msg": "Timeout exceeded"}\')',
        ]
    )
    begun = time.monotonic()
    ok, result = run(module_exits, results_file=str(results), what="installing", slice=20)
    assert ok and result["done"] and time.monotonic() - begun < 5
    assert result["job_failed"] and result["job_msg"] == "Timeout exceeded"
    assert result["progress"].startswith("installing: after ") and result["progress"].endswith(" (ended)")


@pytest.mark.parametrize("bad", [-1.5, -0.5])
def test_a_negative_slice_is_refused_naming_it(module_exits, tmp_path, bad):
    ok, result = run(module_exits, results_file=str(tmp_path / "j1"), what="x", slice=bad)
    assert not ok and result["msg"].startswith(f"slice is {bad}: give 0")


def test_the_async_protocol_of_this_ansible_core(tmp_path):
    """The one thing read from ansible-core that is not its public API: async_wrapper's results file. A real job on
    this core: its file reads as running while it sleeps and as its result once done (fails on the first core
    that changes it)."""
    async_dir = tmp_path / "async"
    # minimal: a callback of ansible-core itself (the 2.20 and 2.21 venvs hold only ansible-core)
    env = {
        **os.environ,
        "ANSIBLE_ASYNC_DIR": str(async_dir),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.minimal",
        "ANSIBLE_CONFIG": str(tmp_path / "empty.cfg"),
    }
    (tmp_path / "empty.cfg").write_text("")
    ansible = Path(sys.executable).parent / "ansible"
    python = f"ansible_python_interpreter={sys.executable}"
    proc = subprocess.run(
        [
            str(ansible),
            "localhost",
            "-c",
            "local",
            "-e",
            python,
            "-m",
            "ansible.builtin.command",
            "-a",
            "sleep 2",
            "-B",
            "30",
            "-P",
            "0",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    started = json.loads(proc.stdout.split(" => ", 1)[1])  # "localhost | CHANGED => {...}"
    results_file = started["results_file"]
    assert Path(results_file).parent == async_dir and started["ansible_job_id"]
    assert job_progress.finished(results_file) is None  # sleeping
    end = time.monotonic() + 20
    while job_progress.finished(results_file) is None and time.monotonic() < end:
        time.sleep(0.2)
    assert job_progress.finished(results_file)["rc"] == 0
