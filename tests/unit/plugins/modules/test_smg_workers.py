"""gpulxc.sglang.smg_workers against a local stand-in of smg 1.13.0's worker API (as the real one answered in
the lab: DELETE marks a worker `draining` for a settle time, then it leaves the registry; POST registers it
`pending`, then `ready`; each worker's `load` is the router's count of requests in flight to it) and SGLang
servers' /metrics. The lab test (tests/lab/test_router.py) runs the module against the real smg."""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpulxc.sglang.plugins.module_utils import _smg
from ansible_collections.gpulxc.sglang.plugins.modules import smg_workers
from conftest import ModuleExit as Exit
from conftest import ModuleFail as Fail

pytestmark = pytest.mark.timed  # its waits and fakes time what they test (tests/unit/conftest.py)

KEY = "admin-key-for-the-test"


class FakeSmg:
    """Workers {url: {id, status, load, is_healthy}}; `settle` s of draining, `detect` s of pending."""

    def __init__(self, urls, settle=0.3, detect=0.3):
        self.workers = {
            url: {"id": f"id-{n}", "url": url, "status": "ready", "load": 0, "is_healthy": True}
            for n, url in enumerate(urls)
        }
        self.settle, self.detect, self.calls, self.lock = settle, detect, [], threading.Lock()
        self.posted = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def handle_call(self):
                fake.calls.append((self.command, self.path, self.headers.get("Authorization")))
                if self.headers.get("Authorization") != f"Bearer {KEY}":
                    return self.answer(401, {"error": "unauthorized"})
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                with fake.lock:
                    return self.answer(*fake.api(self.command, self.path, body))

            do_GET = do_POST = do_DELETE = handle_call

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = self.server.server_address[1]

    def later(self, seconds, change):
        def run():
            time.sleep(seconds)
            with self.lock:
                change()

        threading.Thread(target=run, daemon=True).start()

    def api(self, method, path, body):
        if method == "GET" and path == "/workers":
            return 200, {"workers": list(self.workers.values())}
        if method == "DELETE" and path.startswith("/workers/"):
            url = next(u for u, w in self.workers.items() if w["id"] == path.split("/")[-1])
            self.workers[url]["status"] = "draining"
            self.later(self.settle, lambda: self.workers.pop(url, None))
            return 202, {"status": "accepted"}
        if method == "POST" and path == "/workers":
            if body["url"] in self.workers:
                return 409, {"code": "WORKER_ALREADY_EXISTS"}
            worker = {"id": "id-new", "url": body["url"], "status": "pending", "load": 0, "is_healthy": False}
            self.posted.append(body)
            self.workers[body["url"]] = worker
            self.later(self.detect, lambda: worker.update(status="ready", is_healthy=True))
            return 202, {"status": "accepted"}
        return 404, {"error": "not found"}

    def write_dir(self, directory, host="127.0.0.1"):
        (directory / "router-args.json").write_text(json.dumps(["--host", host, "--port", str(self.port)]))
        (directory / "control-plane-key").write_text(KEY + "\n")
        return str(directory)


@pytest.fixture
def smg():
    fake = FakeSmg(["http://127.0.0.1:1/", "http://127.0.0.1:2/"])
    yield fake
    fake.server.shutdown()


def run(module_exits, **args):
    with patch_module_args({"interval": 0.05, **args}), pytest.raises((Exit, Fail)) as info:
        smg_workers.main()
    return info.type is Exit, info.value.args[0]


def test_no_router_configured_is_nothing_to_do(module_exits, tmp_path):
    ok, result = run(module_exits, urls=["http://127.0.0.1:30003"], state="drained", router_dir=str(tmp_path))
    assert ok and result["changed"] is False and result["router"] is None
    assert "no router configured" in result["msg"]


def test_drained_removes_the_worker_and_waits_for_its_requests(module_exits, smg, tmp_path):
    url = "http://127.0.0.1:1/"
    smg.workers[url]["load"] = 2  # two requests in flight through the router
    smg.later(0.4, lambda: smg.workers[url].update(load=0))
    smg.settle = 1.0  # still listed (draining) when its requests finish
    started = time.monotonic()
    ok, result = run(module_exits, urls=[url], state="drained", router_dir=smg.write_dir(tmp_path))
    assert ok and result["changed"] is True, result
    assert time.monotonic() - started >= 0.4  # not before the requests were done
    assert result["in_flight"] == {url: 0} and result["workers"][url] == "draining"
    assert ("DELETE", "/workers/id-0", f"Bearer {KEY}") in smg.calls
    assert smg.workers["http://127.0.0.1:2/"]["status"] == "ready"  # the other one untouched


def test_drained_gives_up_after_its_timeout_with_a_warning(module_exits, smg, tmp_path):
    url = "http://127.0.0.1:1/"
    smg.workers[url]["load"] = 1
    smg.settle = 5
    ok, result = run(module_exits, urls=[url], state="drained", router_dir=smg.write_dir(tmp_path), timeout=0)
    assert ok and result["in_flight"] == {url: 1}
    assert result["msg"].startswith("requests still in flight after 0s, going on: http://127.0.0.1:1/: 1")


def test_drained_in_check_mode_only_reports(module_exits, smg, tmp_path):
    url = "http://127.0.0.1:1/"
    ok, result = run(
        module_exits,
        urls=[url],
        state="drained",
        router_dir=smg.write_dir(tmp_path),
        _ansible_check_mode=True,
        _ansible_diff=True,
    )
    assert ok and result["changed"] is True
    assert [call[0] for call in smg.calls] == ["GET"] and smg.workers[url]["status"] == "ready"
    assert result["diff"]["before"] == f"{url} ready\n" and result["diff"]["after"] == f"{url} draining\n"


def test_admitted_registers_a_missing_worker_and_waits_until_ready(module_exits, smg, tmp_path):
    url = "http://127.0.0.1:1/"
    del smg.workers[url]
    ok, result = run(
        module_exits, urls=[url, "http://127.0.0.1:2/"], state="admitted", router_dir=smg.write_dir(tmp_path)
    )
    assert ok and result["changed"] is True
    assert result["workers"] == {url: "ready", "http://127.0.0.1:2/": "ready"}
    assert [call[:2] for call in smg.calls].count(("POST", "/workers")) == 1
    assert smg.posted == [{"url": url}]  # no gateway-key file: no key to hand on


def test_admitted_hands_the_gateway_key_to_a_worker_it_adds(module_exits, smg, tmp_path):
    # smg sends a worker added by POST /workers no key unless the request names one (smg worker/service.rs:271)
    url = "http://127.0.0.1:1/"
    del smg.workers[url]
    (tmp_path / "gateway-key").write_text("-servers-key\n")
    ok, result = run(module_exits, urls=[url], state="admitted", router_dir=smg.write_dir(tmp_path))
    assert ok and result["changed"] is True
    assert smg.posted == [{"url": url, "api_key": "-servers-key"}]


def test_admitted_hands_the_key_the_servers_role_passes_before_the_router_knows_it(module_exits, smg, tmp_path):
    # the servers restart with a new key before the router's role writes it: their role's key wins
    url = "http://127.0.0.1:1/"
    del smg.workers[url]
    (tmp_path / "gateway-key").write_text("the-old-key\n")
    ok, result = run(
        module_exits, urls=[url], state="admitted", router_dir=smg.write_dir(tmp_path), worker_key="new-servers-key"
    )
    assert ok and result["changed"] is True
    assert smg.posted == [{"url": url, "api_key": "new-servers-key"}]
    assert "new-servers-key" not in json.dumps(result)


def test_admitted_waits_for_a_draining_worker_to_leave_first(module_exits, smg, tmp_path):
    url = "http://127.0.0.1:1/"
    smg.workers[url]["status"] = "draining"
    smg.later(0.3, lambda: smg.workers.pop(url))
    ok, result = run(module_exits, urls=[url], state="admitted", router_dir=smg.write_dir(tmp_path))
    assert ok and result["changed"] is True and result["workers"] == {url: "ready"}


def test_admitted_is_a_no_op_when_every_worker_is_ready(module_exits, smg, tmp_path):
    ok, result = run(module_exits, urls=list(smg.workers), state="admitted", router_dir=smg.write_dir(tmp_path))
    assert ok and result["changed"] is False
    assert {call[0] for call in smg.calls} == {"GET"}


def test_admitted_fails_naming_a_worker_the_router_does_not_route_to(module_exits, smg, tmp_path):
    url = "http://127.0.0.1:1/"
    smg.workers[url].update(is_healthy=False, status="not_ready")
    ok, result = run(module_exits, urls=[url], state="admitted", router_dir=smg.write_dir(tmp_path), timeout=0)
    assert not ok
    assert "does not route to http://127.0.0.1:1/ after 0s: http://127.0.0.1:1/ is not_ready" in result["msg"]


def test_a_router_that_does_not_answer_changes_nothing(module_exits, smg, tmp_path):
    directory = smg.write_dir(tmp_path)
    port = smg.server.server_address[1]
    smg.server.shutdown()
    smg.server.server_close()
    with socket.socket() as hold:  # bound, not listening: refused, and no other test's server takes the port
        hold.bind(("127.0.0.1", port))
        ok, result = run(module_exits, urls=["http://127.0.0.1:1/"], state="drained", router_dir=directory)
    assert ok and result["changed"] is False
    assert "does not answer" in result["msg"] and result["router"] is None


def test_the_router_address_and_key_from_the_role_files(tmp_path):
    (tmp_path / "control-plane-key").write_text("# a comment\n\nsecret\n")
    for args, url in [
        (["--host", "0.0.0.0", "--port", "8000"], "http://127.0.0.1:8000"),
        (["--host=::", "--port=8001"], "http://[::1]:8001"),
        (["--host", "10.0.0.5"], "http://10.0.0.5:30000"),
    ]:
        (tmp_path / "router-args.json").write_text(json.dumps(args))
        router = _smg.Router.from_dir(str(tmp_path))
        assert (router.url, router.key) == (url, "secret")
    (tmp_path / "control-plane-key").unlink()
    assert _smg.Router.from_dir(str(tmp_path)) is None


def test_in_flight_counts_running_and_queued_from_metrics(monkeypatch):
    class Metrics(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            text = b'sglang:num_running_reqs{model_name="m"} 3.0\nsglang:num_queue_reqs{model_name="m"} 2.0\n'
            self.send_response(200 if self.path == "/metrics" else 404)
            self.end_headers()
            self.wfile.write(text)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert _smg.in_flight(f"http://127.0.0.1:{server.server_address[1]}") == 5
        assert _smg.in_flight("http://127.0.0.1:1") is None  # nothing there
    finally:
        server.shutdown()


@pytest.mark.parametrize(("loads_status", "expected"), [(200, 0), (401, 1), (404, 1), (500, None)])
def test_in_flight_reads_the_live_v1_loads_before_the_lagging_metrics(loads_status, expected):
    """sglang 0.5.12: /v1/loads asks the scheduler (v1_loads.py:135-187); /metrics keeps the last busy value for
    up to 30 s once idle - on the H200 a drain waited 30.8 s for an idle server (evidence/gpu/runs/2026-12-02-b).
    A server that wants a key for /v1/loads (401) or lacks it (404) is read from /metrics; any other error
    says nothing."""
    loads = {
        "timestamp": "2026-12-02T01:10:00+00:00",
        "version": "0.5.12",
        "dp_rank_count": 1,
        "loads": [{"num_running_reqs": 0, "num_waiting_reqs": 0, "num_total_reqs": 0}],
        "aggregate": {"total_running_reqs": 0, "total_waiting_reqs": 0, "total_reqs": 0},
    }

    class Server(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            if self.path.startswith("/v1/loads"):
                self.send_response(loads_status)
                self.end_headers()
                self.wfile.write(json.dumps(loads).encode() if loads_status == 200 else b'{"error": "x"}')
                return
            self.send_response(200)
            self.end_headers()
            self.wfile.write(
                b'sglang:num_running_reqs{model_name="m"} 1.0\nsglang:num_queue_reqs{model_name="m"} 0.0\n'
            )

    server = ThreadingHTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert _smg.in_flight(f"http://127.0.0.1:{server.server_address[1]}") == expected
    finally:
        server.shutdown()
