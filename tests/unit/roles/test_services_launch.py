"""sglang_services' launcher (files/sglang-launch): SGLang runs as `python -m sglang.launch_server` does, with its
arguments, while no log record shows a key (SGLang 0.5.12 logs every argument at start, engine.py:773, 0.5.23 as a
dict, engine.py:311; the stand-in does too: tests/unit/lab/test_standin_server.py)."""

import importlib.machinery
import importlib.util
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "roles/sglang_services/files/sglang-launch"
loader = importlib.machinery.SourceFileLoader("sglang_launch", str(SCRIPT))
launch = importlib.util.module_from_spec(importlib.util.spec_from_loader("sglang_launch", loader))
loader.exec_module(launch)

# keys of every shape a repr() writes: plain, with a quote (then double-quoted), a backslash, a leading "-"
KEYS = ["gpulxc-plain-key", "it's-a-key", "both'\"quotes", "back\\slash", "-dash-first"]
FAKE_SERVER = """
import logging, sys
logging.basicConfig(level=logging.INFO, format="%(message)s", force=True)  # as configure_logger does
log = logging.getLogger("sglang.srt.entrypoints.engine")
keys = sys.argv[1:]
log.info(f"server_args=ServerArgs(model_path='/dev/shm/m', api_key={keys[0]!r}, admin_api_key={keys[1]!r}, port=1)")
log.info("%s=%r then more", "api_key", keys[0])
log.info(f"server_args={ {'model_path': '/dev/shm/m', 'api_key': keys[0], 'admin_api_key': keys[1]} }")  # 0.5.23
log.info("nothing secret: %d", 7)
print("main", __name__, sys.argv[1:] == keys, flush=True)
"""


@pytest.fixture
def fake_sglang(tmp_path):
    (tmp_path / "sglang").mkdir()
    (tmp_path / "sglang/__init__.py").write_text("")
    (tmp_path / "sglang/launch_server.py").write_text(FAKE_SERVER)
    return tmp_path


@pytest.mark.parametrize("key", KEYS)
def test_the_server_runs_with_its_arguments_and_logs_no_key(fake_sglang, key):
    admin = "admin-" + key
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), key, admin],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(fake_sglang)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "main __main__ True\n"  # run as `python -m`, its arguments untouched
    lines = proc.stderr.splitlines()
    assert (
        lines[0] == "server_args=ServerArgs(model_path='/dev/shm/m', api_key='<redacted>', "
        "admin_api_key='<redacted>', port=1)"
    )
    as_dict = "server_args={'model_path': '/dev/shm/m', 'api_key': '<redacted>', 'admin_api_key': '<redacted>'}"
    assert lines[1:] == ["api_key='<redacted>' then more", as_dict, "nothing secret: 7"]
    assert key not in proc.stderr and admin not in proc.stderr


def test_a_record_that_cannot_be_formatted_is_left_for_logging_to_report():
    record = launch.redacted_record("x", logging.INFO, __file__, 1, "api_key=%d", ("not a number",), None)
    assert record.msg == "api_key=%d" and record.args == ("not a number",)


SPAWNING_SERVER = """
import multiprocessing as mp


def scheduler(queue):  # SGLang starts its scheduler and detokenizer so, with the spawn start method
    queue.put(__name__)


if __name__ == "__main__":
    context = mp.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=scheduler, args=(queue,))
    child.start()
    print("child ran as", queue.get(timeout=60), flush=True)
    child.join()
"""


def test_spawned_subprocesses_import_the_server_as_under_python_m(fake_sglang):
    (fake_sglang / "sglang/launch_server.py").write_text(SPAWNING_SERVER)
    proc = subprocess.run(
        [sys.executable, str(SCRIPT)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(fake_sglang)},
    )
    assert (proc.returncode, proc.stdout) == (0, "child ran as __mp_main__\n"), proc.stderr
