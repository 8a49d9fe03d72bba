"""gpulxc.sglang.sglang_health against local HTTP servers that behave as SGLang's timeline says:
connection refused while loading, 503 while warming, 200 when ready; the smoke chat completion."""

import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpulxc.sglang.plugins.modules import sglang_health
from conftest import ModuleExit as Exit
from conftest import ModuleFail as Fail

pytestmark = pytest.mark.timed  # its waits and fakes time what they test (tests/unit/conftest.py)


class Fake:
    """One server: `state` is 'warming' (503), 'ready' (200); `chat` the reply body to send."""

    def __init__(self):
        self.state = "warming"
        self.chat = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "OK"}}]}
        self.keys = []
        self.bodies = []
        self.chat_seconds = 0.0
        self.first_sampled_seconds = 0.0  # the first top-k/top-p request builds the sampling kernel
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self.send_response(200 if fake.state == "ready" else 503)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self):
                fake.keys.append(self.headers.get("Authorization"))
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                sampled = body.get("top_k", -1) > 1 or body.get("top_p", 1.0) < 1.0
                time.sleep(fake.chat_seconds + (fake.first_sampled_seconds if sampled and not fake.bodies else 0))
                fake.bodies.append(body)
                data = json.dumps(fake.chat).encode()
                self.send_response(200)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def servers():
    made = []
    yield lambda n: [made.append(Fake()) or made[-1] for _ in range(n)]
    for fake in made:
        fake.httpd.shutdown()


HELD = []  # bound and never listening: connections are refused, and no other test (another worker) can take the port


def closed_port_url():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    HELD.append(sock)
    return f"http://127.0.0.1:{sock.getsockname()[1]}"  # nothing listens: connection refused


def run(module_exits, instances, **args):
    with patch_module_args({"instances": instances, "interval": 0.05, **args}), pytest.raises((Exit, Fail)) as info:
        sglang_health.main()
    return info.type is Exit, info.value.args[0]


def test_all_ready_after_warming_and_each_time_to_healthy(module_exits, servers):
    fakes = servers(3)
    fakes[0].state = "ready"
    threading.Timer(0.3, lambda: setattr(fakes[1], "state", "ready")).start()
    threading.Timer(0.6, lambda: setattr(fakes[2], "state", "ready")).start()
    instances = [{"name": f"sglang@{i}", "url": f.url} for i, f in enumerate(fakes)]
    ok, result = run(module_exits, instances, deadline=10)
    assert ok and result["healthy"] and not result["changed"]
    times = [r["seconds_to_healthy"] for r in result["instances"]]
    assert times[0] < 0.3 <= times[1] < 0.6 <= times[2] < 5


def test_failure_names_each_unhealthy_instance_its_state_unit_and_journal(module_exits, servers, monkeypatch):
    fakes = servers(2)
    fakes[0].state = "ready"
    calls = []

    def fake_run(argv, **kwargs):
        calls.append(argv)
        # between two automatic restarts (waited for); is-active for the report
        out = {"show": "ActiveState=activating\nNRestarts=0\n", "is-active": "failed\n"}.get(
            argv[1], "RuntimeError: crash at start\n"
        )
        return type("P", (), {"stdout": out, "returncode": 0})()

    monkeypatch.setattr(sglang_health, "command", lambda argv: fake_run(argv).stdout)
    instances = [
        {"name": "sglang@0", "url": fakes[0].url, "unit": "sglang@0.service"},
        {"name": "sglang@1", "url": fakes[1].url, "unit": "sglang@1.service"},
        {"name": "sglang@5", "url": closed_port_url(), "unit": "sglang@5.service"},
    ]
    ok, result = run(module_exits, instances, deadline=1)
    assert not ok
    msg = result["msg"]
    assert msg.startswith("2 of 3 SGLang servers not healthy after 1 s")
    assert "sglang@1 (" + fakes[1].url + "): warming" in msg
    assert "sglang@5 (" in msg and "): loading" in msg
    assert "unit sglang@5.service is failed; journal tail:\nRuntimeError: crash at start" in msg
    assert "sglang@0 (" not in msg
    assert ["journalctl", "-u", "sglang@5.service", "-n", "20", "--no-pager", "-o", "cat"] in calls


def test_smoke_chat_checks_the_reply_and_sends_the_key(module_exits, servers):
    fakes = servers(2)
    for fake in fakes:
        fake.state = "ready"
    instances = [{"name": f"sglang@{i}", "url": f.url} for i, f in enumerate(fakes)]
    ok, result = run(module_exits, instances, chat="model", api_key="s3cret")
    assert ok and [r["chat"] for r in result["instances"]] == ["ok", "ok"]
    assert fakes[0].keys == ["Bearer s3cret"]
    fakes[1].chat = {"error": "model not found"}
    ok, result = run(module_exits, instances, chat="model", api_key="s3cret")
    assert not ok and result["msg"].startswith("smoke test failed: sglang@1: chat completion without an assistant")
    assert "s3cret" not in json.dumps(result)


def test_each_server_gets_its_chat_as_soon_as_it_is_healthy_all_at_once(module_exits, servers):
    """Eight replies of 0.4 s each take about 0.4 s in all, not 3.2 s one after another."""
    fakes = servers(8)
    for fake in fakes:
        fake.state, fake.chat_seconds = "ready", 0.4
    instances = [{"name": f"sglang@{i}", "url": f.url} for i, f in enumerate(fakes)]
    started = time.monotonic()
    ok, result = run(module_exits, instances, chat="model")
    took = time.monotonic() - started
    assert ok and [r["chat"] for r in result["instances"]] == ["ok"] * 8
    assert took < 1.6, took


def test_an_instance_systemd_gave_up_on_is_not_waited_for(module_exits, servers, monkeypatch):
    """A unit that is failed (start limit hit) or stopped will not answer: the module fails once the others
    are healthy, long before the deadline, and says so."""
    fakes = servers(1)
    fakes[0].state = "ready"
    states = {"sglang@0.service": "active", "sglang@3.service": "failed", "sglang@4.service": "inactive"}

    def fake_run(argv, **kwargs):
        out = f"ActiveState={states[argv[-1]]}\nNRestarts=0\n" if argv[:2] == ["systemctl", "show"] else "journal\n"
        return type("P", (), {"stdout": out, "returncode": 0})()

    monkeypatch.setattr(sglang_health, "command", lambda argv: fake_run(argv).stdout)
    instances = [
        {"name": "sglang@0", "url": fakes[0].url, "unit": "sglang@0.service"},
        {"name": "sglang@3", "url": closed_port_url(), "unit": "sglang@3.service"},
        {"name": "sglang@4", "url": closed_port_url(), "unit": "sglang@4.service"},
    ]
    started = time.monotonic()
    ok, result = run(module_exits, instances, deadline=60)
    assert time.monotonic() - started < 5
    assert not ok
    assert result["msg"].startswith(
        "2 of 3 SGLang servers not healthy (systemd gave up on them or they crash at every start; not waited for): "
    )
    assert "sglang@3 (" in result["msg"] and "loading, and its unit is failed" in result["msg"]
    assert "loading, and its unit is inactive: systemd will not start it again" in result["msg"]
    assert result["instances"][0]["state"] == "ready"


@pytest.mark.parametrize(("system", "shutting_down"), [("stopping", True), ("running", False), ("degraded", False)])
def test_servers_stopped_by_a_shutdown_are_named_as_such_not_as_crashed(
    module_exits, servers, monkeypatch, system, shutting_down
):
    fakes = servers(1)
    fakes[0].state = "ready"

    def fake_run(argv, **kwargs):
        out = {"show": "ActiveState=inactive\nNRestarts=0\n", "is-system-running": system + "\n"}.get(argv[1], "x\n")
        return type("P", (), {"stdout": out, "returncode": 0})()

    monkeypatch.setattr(sglang_health, "command", lambda argv: fake_run(argv).stdout)
    instances = [
        {"name": "sglang@0", "url": fakes[0].url, "unit": "sglang@0.service"},
        {"name": "sglang@3", "url": closed_port_url(), "unit": "sglang@3.service"},
    ]
    ok, result = run(module_exits, instances, deadline=60)
    assert not ok
    assert result["msg"].startswith("the container is shutting down") is shutting_down, result["msg"]
    if shutting_down:
        assert "which stopped sglang@3 while waited for; not a crash: run the play again" in result["msg"]


def test_a_server_is_ready_only_once_a_sampled_chat_is_fast(module_exits, servers):
    """The first top-k/top-p chat on a cold JIT cache stalls while the sampling kernel builds (88 s on the H200):
    it is sent again until one answers within chat_fast; a greedy chat would not have built it."""
    (fake,) = servers(1)
    fake.state, fake.first_sampled_seconds = "ready", 1.0
    ok, result = run(module_exits, [{"name": "sglang@0", "url": fake.url}], chat="model", chat_fast=0.5)
    assert ok, result
    *slow, fast = result["instances"][0]["chat_seconds"]  # more than one slow chat where the machine is loaded
    assert slow and slow[0] >= 1.0 and min(slow) >= 0.5 and fast < 0.5, (slow, fast)
    assert all(b["top_k"] == 20 and b["top_p"] == 0.9 and b["temperature"] == 0.7 for b in fake.bodies)


def test_no_fast_sampled_chat_before_the_deadline_fails_naming_the_times(module_exits, servers):
    (fake,) = servers(1)
    fake.state, fake.chat_seconds = "ready", 0.6
    ok, result = run(module_exits, [{"name": "sglang@0", "url": fake.url}], chat="model", chat_fast=0.5, deadline=1)
    assert not ok
    took = r"sglang@0: no sampled chat completion within 0\.5 s before the deadline \(took \[0\.[6-9]"
    assert re.search(took, result["msg"]), result["msg"]


def test_an_instance_that_crashes_at_every_start_is_named_without_waiting_for_the_deadline(
    module_exits, servers, monkeypatch
):
    """sglang 0.5.12 ends a crash with SIGKILL (kill_process_tree), a clean exit for the unit (SuccessExitStatus),
    so Restart=always starts it again, each time through its whole load: the start limit may never be hit before
    the deadline. Two automatic restarts while waited for (NRestarts) name it; 0 waits as before."""
    (fake,) = servers(1)
    fake.state = "ready"
    restarts = {"sglang@3.service": 0}

    def fake_run(argv, **kwargs):
        if argv[:2] == ["systemctl", "show"]:
            restarts["sglang@3.service"] += 1 if argv[-1] == "sglang@3.service" else 0
            count = restarts.get(argv[-1], 0) // 3  # a restart every third poll
            return type("P", (), {"stdout": f"ActiveState=activating\nNRestarts={count}\n", "returncode": 0})()
        return type("P", (), {"stdout": "Scheduler hit an exception\n", "returncode": 0})()

    monkeypatch.setattr(sglang_health, "command", lambda argv: fake_run(argv).stdout)
    instances = [
        {"name": "sglang@0", "url": fake.url, "unit": "sglang@0.service"},
        {"name": "sglang@3", "url": closed_port_url(), "unit": "sglang@3.service"},
    ]
    started = time.monotonic()
    ok, result = run(module_exits, instances, deadline=60, interval=0.05)
    assert time.monotonic() - started < 5
    assert not ok and "crash at every start; not waited for): sglang@3 (" in result["msg"]
    assert "its unit restarted 2 times while waited for (NRestarts 2): it crashes at every start" in result["msg"]
    assert "Scheduler hit an exception" in result["msg"]  # the journal tail
    restarts["sglang@3.service"] = 0
    ok, result = run(module_exits, instances, deadline=1, interval=0.05, crash_restarts=0)
    assert not ok and result["msg"].startswith("1 of 2 SGLang servers not healthy after 1 s")


@pytest.mark.parametrize("bad", [-1, -5])
def test_a_negative_crash_restarts_is_refused_naming_it(module_exits, bad):
    ok, result = run(module_exits, [{"name": "sglang@0", "url": closed_port_url()}], deadline=60, crash_restarts=bad)
    assert not ok and result["msg"].startswith(f"crash_restarts is {bad}: give 0")


def test_a_slice_ends_with_a_progress_line_and_the_next_resumes_without_chatting_again(module_exits, servers):
    """With slice, the wait returns (done false) after the slice with one line of how far it got; the next call,
    given the slice's resume, polls only the servers not ready yet and chats only with those."""
    fakes = servers(2)
    fakes[0].state = "ready"
    instances = [
        {"name": "sglang@0", "url": fakes[0].url},
        {"name": "sglang@1", "url": fakes[1].url},
        {"name": "sglang@2", "url": closed_port_url()},
    ]
    started = time.monotonic()
    ok, first = run(module_exits, instances, deadline=60, slice=0.5, chat="m")
    assert ok and not first["done"] and not first["healthy"]
    waited = time.monotonic() - started
    assert 0.5 <= waited < 5
    line = r"1/3 healthy, 1 loading, 1 warming after (\d)s of 1m00s \(waiting for sglang@1, sglang@2\)"
    said = re.fullmatch(line, first["progress"])
    assert said and int(said.group(1)) <= waited, first["progress"]  # whole seconds: 0 unless the slice ran late
    assert [r["name"] for r in first["resume"]["finished"]] == ["sglang@0"] and len(fakes[0].bodies) == 1
    fakes[1].state = "ready"
    ok, second = run(module_exits, instances[:2], deadline=60, slice=0.5, chat="m", resume=first["resume"])
    assert ok and second["done"] and second["healthy"] and second["progress"].startswith("2/2 healthy after")
    assert (len(fakes[0].bodies), len(fakes[1].bodies)) == (1, 1)
    assert [r["chat"] for r in second["instances"]] == ["ok", "ok"]


def test_a_slice_names_the_jit_builds_the_servers_not_ready_run_and_how_long(module_exits, servers, monkeypatch):
    """The first instance's cold start: its unit runs FlashInfer's ninja (a JIT build) while its /health waits;
    the progress line says which build and for how long, for the servers not ready only."""
    fakes = servers(1)
    fakes[0].state = "ready"
    builds = {"sglang@1.service": [("gpulxc_standin_decode", 130.4)], "sglang@0.service": [("done_op", 5.0)]}
    monkeypatch.setattr(sglang_health, "running_builds", lambda: builds)
    monkeypatch.setattr(sglang_health, "command", lambda argv: "ActiveState=active\nNRestarts=0\n")
    instances = [
        {"name": "sglang@0", "url": fakes[0].url, "unit": "sglang@0.service"},
        {"name": "sglang@1", "url": closed_port_url(), "unit": "sglang@1.service"},
    ]
    ok, result = run(module_exits, instances, deadline=60, slice=0.3)
    assert ok and not result["done"], result
    assert result["progress"].endswith("(waiting for sglang@1; sglang@1: JIT build gpulxc_standin_decode 2m10s)")
    assert "done_op" not in result["progress"]
    ok, result = run(module_exits, instances, deadline=1, interval=0.05)
    assert (
        not ok
        and "(last seen: 1/2 healthy" in result["msg"]
        and "JIT build gpulxc_standin_decode 2m10s" in result["msg"]
    )


def test_the_deadline_counts_from_the_first_slice(module_exits, servers):
    (fake,) = servers(1)
    resume = {"started": time.time() - 59.5, "baseline": {}, "finished": []}
    started = time.monotonic()
    ok, result = run(module_exits, [{"name": "sglang@0", "url": fake.url}], deadline=60, slice=20, resume=resume)
    assert not ok and result["done"] and time.monotonic() - started < 5
    last_seen = "(last seen: 0/1 healthy, 1 warming after 1m00s of 1m00s (waiting for sglang@0)): sglang@0"
    assert result["msg"].startswith(f"1 of 1 SGLang servers not healthy after 60 s {last_seen}")
    assert "warming" in result["msg"]


def test_restarts_are_counted_from_the_first_slice(module_exits, servers, monkeypatch):
    """A unit that restarted twice since the wait began crashes at every start, though each slice saw one."""
    monkeypatch.setattr(sglang_health, "command", lambda argv: "ActiveState=activating\nNRestarts=2\n")
    resume = {"started": time.time(), "baseline": {"sglang@0.service": 0}, "finished": []}
    ok, result = run(
        module_exits,
        [{"name": "sglang@0", "url": closed_port_url(), "unit": "sglang@0.service"}],
        deadline=60,
        slice=20,
        resume=resume,
    )
    assert not ok and "restarted 2 times while waited for" in result["msg"]


@pytest.mark.parametrize("bad", [-1, -0.5])
def test_a_negative_slice_is_refused_naming_it(module_exits, bad):
    ok, result = run(module_exits, [{"name": "sglang@0", "url": closed_port_url()}], slice=bad)
    assert not ok and result["msg"].startswith(f"slice is {bad}")
