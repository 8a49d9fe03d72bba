"""sglang_services' ExecStartPre (files/sglang-gpu-turn): an instance waits for each instance before it on its GPU
until that one listens (its memory pool allocated) or runs no server, and refuses a malformed list."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timed  # its waits and fakes time what they test (tests/unit/conftest.py)

SCRIPT = Path(__file__).resolve().parents[3] / "roles/sglang_services/files/sglang-gpu-turn"


@pytest.fixture
def port():
    """A port held for the test's length by a bound, never listening socket (SO_REUSEADDR, so a predecessor that
    sets it too may listen there): no other test's server can take it. A port from bind-and-close is free only
    until someone binds it, and one that did made the one-before look listening (flaky under xdist)."""
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", 0))
        yield holder.getsockname()[1]


def turn(before, timeout=20):
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(SCRIPT)],
        env={**os.environ, "GPULXC_GPU_BEFORE": before},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return proc, time.monotonic() - started


@pytest.fixture
def predecessor(tmp_path):
    """A process started like instance 0 (`... --config CONFIG`), which listens on `port` after `listen_after`
    seconds (never: None) and ends after `end_after`."""
    procs = []

    def start(port, listen_after=None, end_after=30):
        config = tmp_path / "instance-0.yaml"
        code = f"import time; time.sleep({end_after})"
        if listen_after is not None:
            code = (
                f"import socket, time; time.sleep({listen_after}); s = socket.socket()\n"
                f"s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', {port})); s.listen()\n"
                f"time.sleep({end_after})"
            )
        procs.append(subprocess.Popen([sys.executable, "-c", code, "--config", str(config)], start_new_session=True))
        time.sleep(0.2)
        return f"http://127.0.0.1:{port},{config}"

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def test_no_instance_before_it_or_none_running_starts_at_once(tmp_path, port):
    assert turn("")[0].returncode == 0
    proc, took = turn(f"http://127.0.0.1:{port},{tmp_path}/instance-0.yaml")
    assert proc.returncode == 0 and 3 <= took < 5 and "waiting" not in proc.stdout  # 3 s for it to appear


def test_it_waits_until_the_one_before_listens(predecessor, port):
    before = predecessor(port, listen_after=3)
    proc, took = turn(before)
    assert proc.returncode == 0 and took >= 2.5, (took, proc.stdout)
    assert "waiting for" in proc.stdout and "listens (or stopped): starting" in proc.stdout


def test_it_stops_waiting_when_the_one_before_ends(predecessor, port):
    before = predecessor(port, listen_after=None, end_after=3)
    proc, took = turn(before)
    assert proc.returncode == 0 and 2.5 <= took < 10, (took, proc.stdout, proc.stderr)


@pytest.mark.parametrize(
    "bad", ["http://127.0.0.1:30000", "127.0.0.1,/etc/sglang/instance-0.yaml", "http://127.0.0.1:30000,instance-0.yaml"]
)
def test_a_malformed_list_is_refused_naming_the_variable(bad):
    proc, _ = turn(bad)
    assert proc.returncode != 0 and "GPULXC_GPU_BEFORE" in proc.stderr and "is not URL,CONFIG" in proc.stderr


def test_one_started_at_the_same_moment_is_waited_for(tmp_path, port):
    """As at boot: both units start together and the one before has not exec'd its server yet."""
    config = tmp_path / "instance-0.yaml"
    server = (
        "import socket, time; time.sleep(2); s = socket.socket();"
        f" s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', {port})); s.listen();"
        " time.sleep(5)"
    )
    # its command line has the --config pair only once it execs, a second later
    later = subprocess.Popen(
        ["sh", "-c", f'sleep 1; exec "{sys.executable}" -c "{server}" --config "{config}"'], start_new_session=True
    )
    try:
        proc, took = turn(f"http://127.0.0.1:{port},{config}")
    finally:
        later.kill()
    assert proc.returncode == 0 and took >= 2.5 and "waiting for" in proc.stdout, (took, proc.stdout, proc.stderr)
