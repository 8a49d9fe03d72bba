"""sglang_router through site.yml on a lab CT (ct980): the real SGLang model gateway (smg, from the lab
index's real wheels) in front of 8 stand-in servers (ports 34000 + i, the router on 8980: lab CTs share the
host's network). Requests through it land on every instance; a stopped instance is routed around, reported
unhealthy, and back after a re-run; a rolling restart drains each instance at the router first and loses no
streamed request (and does lose some with the drain off); an upgrade to the second stack profile and back, under
streams, loses none either (a canary first); a worker removed at the router by hand is put back by a re-run; client
keys from Ansible Vault are enforced and never shown; Prometheus scrapes every server and the router.
"""

import concurrent.futures
import hashlib
import json
import os
import re
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml
from conftest import (
    JIT_TEMPLATE,
    REPO,
    Streams,
    assert_refused,
    ct_state,
    destroy,
    in_ct,
    main_pids,
    refused_side_by_side,
    run_site,
    task_output,
)

VMID = 980
ROUTER = "http://127.0.0.1:8980"
SMG = "http://127.0.0.1:18980"  # smg itself, behind the front: its worker API is reached here only
KEY = "gpulxc-router-test-key-5d21e0"
SNAPSHOT = "md5sum /etc/smg/* /etc/systemd/system/smg.service 2>/dev/null; systemctl is-active smg"


@pytest.fixture(scope="module")
def inventory(lab_ready, tmp_path_factory):
    destroy(VMID)
    path = tmp_path_factory.mktemp("inv") / "ct980.yml"
    path.write_text(
        json.dumps(
            {
                "sglang_containers": {
                    "hosts": {
                        "ct980": {
                            "proxmox_vmid": VMID,
                            "pct_container_node": "lab-pve",
                            "pct_container_ostemplate": JIT_TEMPLATE,
                            "sglang_services_port_base": 34000,
                            "sglang_services_nccl_port_base": 35000,
                            "sglang_router_port": 8980,
                            "sglang_router_prometheus_port": 29980,
                        }
                    }
                }
            }
        )
    )
    proc, _ = run_site(path, "ct980")
    assert proc.returncode == 0, proc.stdout[-3000:]
    yield path
    destroy(VMID)


def play(inventory, *extra):
    return run_site(inventory, "ct980", "--tags=services,router", *extra)


def request(path, key=None, body=None, method=None, *, base=ROUTER, context=None):
    req = urllib.request.Request(base + path, data=body, headers={"Content-Type": "application/json"}, method=method)
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=30, context=context) as response:
            text = response.read()
            json_answer = response.headers.get_content_type() == "application/json"
            return response.status, json.loads(text or b"null") if json_answer else text.decode()
    except urllib.error.HTTPError as error:
        return error.code, None


def chat(n, key=None):
    # distinct from the first character on: cache_aware routes a new prefix to the least loaded worker
    message = {"role": "user", "content": f"{uuid.uuid4().hex} request {n}"}
    body = json.dumps({"model": "stand-in", "max_tokens": 4, "messages": [message]}).encode()
    status, answer = request("/v1/chat/completions", key, body)
    return status, answer["id"].split("-")[2] if status == 200 else None


def readiness():
    return request("/readiness")[1] or {}


def admin_key():
    return in_ct(VMID, "cat /etc/smg/control-plane-key").stdout.strip()


def workers(key):
    status, body = request("/workers", key, base=SMG)
    assert status == 200, status
    return {worker["url"]: worker for worker in body["workers"]}


def test_100_completions_through_the_router_land_on_all_8(inventory):
    assert readiness() == {"status": "ready", "healthy_workers": 8, "total_workers": 8}
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(chat, range(100)))
    assert [status for status, _ in results] == [200] * 100
    assert {gpu for _, gpu in results} == {f"gpu{i}" for i in range(8)}
    assert in_ct(VMID, "ps -o user=,args= -C smg::router").stdout.split() == ["smg", "smg::router"]
    proc, changed = play(inventory)
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]


def test_a_stopped_instance_is_routed_around_and_back_after_a_rerun(inventory):
    in_ct(VMID, "systemctl stop sglang@3.service")
    try:
        statuses = [chat(n)[0] for n in range(50)]
        assert statuses == [200] * 50
        deadline = time.monotonic() + 90  # 3 failed checks, 10 s apart
        while time.monotonic() < deadline and readiness().get("healthy_workers") != 7:
            assert chat(0)[0] == 200
            time.sleep(2)
        assert readiness() == {"status": "ready", "healthy_workers": 7, "total_workers": 8}
    finally:
        proc, changed = play(inventory)
        assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    deadline = time.monotonic() + 60  # 2 good checks
    while time.monotonic() < deadline and readiness().get("healthy_workers") != 8:
        time.sleep(2)
    assert readiness()["healthy_workers"] == 8
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        assert "gpu3" in {gpu for _, gpu in pool.map(chat, range(100))}


def test_a_rolling_restart_under_a_stream_of_requests_loses_none(inventory):
    """Every instance restarted two at a time for a changed setting while 8 streams run through the router: each
    is drained at the router first, so none is cut or refused. The restart back, all 8 at once with the drain off,
    cuts none either - SGLang 0.5.12 drains on SIGTERM itself (finishes what runs, takes new requests, exits once
    idle: tokenizer_manager.py:2375-2411, and the H200 runs) - though the router refuses requests while none is up
    (the counts are printed)."""
    before = main_pids(VMID)
    started = time.monotonic()
    with Streams(ROUTER) as streams:
        time.sleep(3)
        # two at a time (6 of 8 keep serving): the drain is the same for each step, in half the steps
        proc, changed = play(
            inventory, "-e", '{"sglang_services_max_running_requests": 32, "sglang_services_restart_batch": 2}'
        )
        time.sleep(3)
    drained_s = time.monotonic() - started
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    after = main_pids(VMID)
    assert len(after) == 8 and all(old != new for old, new in zip(before, after, strict=True)), (before, after)
    drain = r"TASK \[gpulxc\.sglang\.sglang_services : Drain at the router first - (sglang@\d+, sglang@\d+)\]"
    steps = re.findall(drain, proc.stdout)
    assert steps == [f"sglang@{i}, sglang@{i + 1}" for i in range(0, 8, 2)], steps
    assert (streams.cut, streams.refused) == (0, []), (streams.cut, streams.refused[:5])
    # streams flowed all along (8 of 2 s each: 4 a second when every server serves; at least 1 a second measured)
    assert streams.done >= drained_s and streams.gpus == {f"gpu{i}" for i in range(8)}, (streams.done, drained_s)
    assert readiness() == {"status": "ready", "healthy_workers": 8, "total_workers": 8}

    started = time.monotonic()
    back = json.dumps({"sglang_services_router_drain": False, "sglang_services_restart_batch": 0})
    with Streams(ROUTER) as undrained:  # the control: SGLang's own drain
        time.sleep(3)
        proc, changed = play(inventory, "-e", back)
        time.sleep(3)
    undrained_s = time.monotonic() - started
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    print(
        f"rolling restart under 8 streams: drained {streams.done} done, {streams.cut} cut in {drained_s:.0f} s; "
        f"back all at once, not drained: {undrained.done} done, {undrained.cut} cut, {len(undrained.refused)}"
        f" refused in {undrained_s:.0f} s"
    )
    assert undrained.cut == 0, (undrained.done, undrained.cut)


def test_an_upgrade_to_the_second_profile_under_streams_loses_no_request_and_neither_does_going_back(inventory):
    """sglang-0.5.12 to sglang-0.5.23 under 8 streams through the router: the new stack is built beside the running
    one, sglang@0 moves to it first alone (its own cold JIT caches; the canary: health, a sampled chat, the smoke
    chat), then the rest four at a time (half of them serving), each step drained at the router first - no
    stream cut, none refused - and every server reports 0.5.23. Back to sglang-0.5.12 on purpose: nothing installed,
    its caches warm, the same."""
    for profile, version in (("sglang-0.5.23", "0.5.23"), ("sglang-0.5.12", "0.5.12")):
        with Streams(ROUTER) as streams:
            steps = json.dumps({"sglang_stack_profile": profile, "sglang_services_restart_batch": 4})
            proc, changed = run_site(inventory, "ct980", "-e", steps)
        assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
        canary = "gpulxc.sglang.sglang_services : Restart the canary on the new stack, then wait for its health and a"
        assert "included: " in task_output(proc, canary + " sampled chat"), proc.stdout[-3000:]
        assert streams.cut == 0 and streams.refused == [] and streams.done > 0, (streams.cut, streams.refused[:3])
        served = {request("/server_info", base=f"http://127.0.0.1:{34000 + i}")[1]["version"] for i in range(8)}
        assert served == {version}, served
    proc, changed = play(inventory)
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]


def test_the_router_killed_during_a_rolling_restart_comes_back_and_the_run_restarts_every_instance(inventory):
    """smg SIGKILLed once the rolling restart's second step has restarted its instances: systemd starts it again
    (Restart=always) with every instance from its arguments; the drains and re-admissions it misses are skipped
    with a warning (no step waits on a router that is gone), every instance is restarted, and the run ends with
    all 8 in rotation; the next run changes nothing."""
    before, smg_before = main_pids(VMID), in_ct(VMID, "systemctl show -P MainPID smg.service").stdout.strip()
    killed, done = [], threading.Event()

    def kill_smg_in_the_second_step():
        while not done.is_set() and not killed:
            if main_pids(VMID)[2] not in ("0", before[2]):  # sglang@2 restarted: the second step runs
                killed.append(in_ct(VMID, "systemctl kill -s KILL smg.service").returncode)
            time.sleep(0.5)

    changed_setting = json.dumps({"sglang_services_max_running_requests": 40, "sglang_services_restart_batch": 2})
    killer = threading.Thread(target=kill_smg_in_the_second_step)
    killer.start()
    try:
        proc, changed = play(inventory, "-e", changed_setting)
    finally:
        done.set()
        killer.join()
    assert killed == [0] and proc.returncode == 0 and changed > 0, (killed, proc.stdout[-3000:])
    after = main_pids(VMID)
    assert all(old != new for old, new in zip(before, after, strict=True)), (before, after)
    assert in_ct(VMID, "systemctl show -P MainPID smg.service").stdout.strip() not in ("0", smg_before)
    assert readiness() == {"status": "ready", "healthy_workers": 8, "total_workers": 8}
    proc, changed = play(inventory, "-e", changed_setting)
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]
    proc, changed = play(inventory, "-e", '{"sglang_services_router_drain": false, "sglang_services_restart_batch": 0}')
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]  # back to the default, all at once


def test_a_worker_removed_at_the_router_is_put_back_by_a_rerun(inventory):
    key = admin_key()
    assert request("/workers", base=SMG)[0] == 401  # the worker API needs the admin key
    assert request("/workers", key)[0] == 401  # and is not reached through the front: it sends smg its own key
    worker = workers(key)["http://127.0.0.1:34005"]
    status, _ = request(f"/workers/{worker['id']}", key, method="DELETE", base=SMG)
    assert status in (200, 202), status
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "http://127.0.0.1:34005" in workers(key):
        time.sleep(1)
    assert "http://127.0.0.1:34005" not in workers(key)
    proc, changed = play(inventory)
    assert proc.returncode == 0 and changed == 1, proc.stdout[-3000:]
    assert "changed: [ct980]" in proc.stdout.split("Put every instance in rotation", 1)[1].split("TASK", 1)[0]
    assert workers(key)["http://127.0.0.1:34005"]["status"] == "ready"
    assert readiness() == {"status": "ready", "healthy_workers": 8, "total_workers": 8}


def smg_workers(inventory, **args):
    """gpulxc.sglang.smg_workers on ct980, as the rolling restart runs it: the process and its result."""
    argv = [
        str(REPO / ".venv/bin/ansible"),
        "ct980",
        "-i",
        "inventories/lab",
        "-i",
        str(inventory),
        "-m",
        "gpulxc.sglang.smg_workers",
        "-a",
        json.dumps(args),
    ]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="false")
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=REPO, env=env)
    found = re.search(r"=> (\{.*\})\s*$", proc.stdout, re.S)
    return proc, json.loads(found.group(1)) if found else {}


def test_a_drain_right_after_a_request_reads_the_live_load_and_waits_for_nothing(inventory):
    """The drain asks each server GET /v1/loads (live) before /metrics: sglang 0.5.12's gauges keep their last
    logged value for 30 s once idle (the stand-in logs as the real scheduler does), and on the H200 a drain
    reading them waited 30.8 s for an idle server (evidence/gpu/runs/2026-12-02-b)."""
    url = "http://127.0.0.1:34006"
    body = json.dumps({"model": "stand-in", "max_tokens": 100, "messages": [{"role": "user", "content": "x"}]})
    req = urllib.request.Request(
        url + "/v1/chat/completions", data=body.encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as response:  # 0.5 s of decoding, logged at 40 and 80 tokens
        assert response.status == 200
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        assert re.search(r"sglang:num_running_reqs\{[^}]*\} 1\.0", response.read().decode())  # lagging
    try:
        proc, result = smg_workers(inventory, urls=[url], state="drained", timeout=60)
        assert proc.returncode == 0, proc.stdout[-2000:]
        assert result["workers"][url] == "draining" and result["in_flight"] == {url: 0}
        assert result["waited"] < 5, result
    finally:
        proc, result = smg_workers(inventory, urls=[url], state="admitted", timeout=60)
    assert proc.returncode == 0 and result["workers"][url] == "ready", proc.stdout[-2000:]


PROMETHEUS, PROMTOOL = Path("/usr/bin/prometheus"), Path("/usr/bin/promtool")  # Debian's (tools/test installs it)


def prometheus_api(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/{path}", timeout=10) as response:
        return json.loads(response.read())["data"]


def wait_for(what, check, timeout):
    deadline = time.monotonic() + timeout
    while not (found := check()) and time.monotonic() < deadline:
        time.sleep(1)
    assert found, f"{what}: not within {timeout} s"
    return found


def test_prometheus_scrapes_every_server_and_the_router_and_an_instance_down_fires(inventory, tmp_path):
    """sglang_monitoring's scrape job, targets and rules, loaded by a real Prometheus (Debian's 2.42): the router
    and the 8 servers up through the front, the servers' series labelled with their GPU, container and node, the
    rules valid (promtool) and loaded, and SglangTargetDown firing for a stopped instance."""
    assert PROMETHEUS.exists() and PROMTOOL.exists(), "Debian's prometheus is not installed: tools/test lab does it"
    directory = tmp_path / "prometheus"
    settings = json.dumps(
        {
            "sglang_monitoring_dir": str(directory),
            "sglang_monitoring_address": "127.0.0.1",
            "sglang_monitoring_scrape_interval": "1s",
            "sglang_monitoring_down_for": "3s",
        }
    )
    for expected in (None, 0):
        proc, changed = run_site(inventory, "ct980", "--tags=monitoring", "-e", settings)
        assert proc.returncode == 0 and (expected is None or changed == expected), proc.stdout[-3000:]
    rules = directory / "rules/gpulxc-sglang.rules.yml"
    checked = subprocess.run([PROMTOOL, "check", "rules", rules], capture_output=True, text=True, check=False)
    assert checked.returncode == 0 and "SUCCESS: 4 rules found" in checked.stdout, checked.stdout + checked.stderr
    assert json.loads((directory / "dashboards/gpulxc-sglang.json").read_text())["uid"] == "gpulxc-sglang"
    # Prometheus 2.42 has no scrape_config_files (2.43): the job goes into its own scrape_configs
    job = yaml.safe_load((directory / "scrape/ct980.yml").read_text())["scrape_configs"]
    config = tmp_path / "prometheus.yml"
    config.write_text(
        json.dumps({"global": {"evaluation_interval": "1s"}, "rule_files": [str(rules)], "scrape_configs": job})
    )
    checked = subprocess.run([PROMTOOL, "check", "config", config], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:

        def targets():
            try:
                found = prometheus_api(port, "targets")["activeTargets"]
            except OSError:
                return None
            return found if len(found) == 9 and {t["health"] for t in found} == {"up"} else None

        up = wait_for("9 targets up", targets, 60)
        assert sorted(t["labels"]["instance"] for t in up) == sorted(
            ["ct980/router"] + [f"ct980/sglang@{n}" for n in range(8)]
        )
        series = prometheus_api(port, "query?query=sglang:num_running_reqs")["result"]
        assert sorted((s["metric"]["gpu"], s["metric"]["container"], s["metric"]["node"]) for s in series) == [
            (str(n), "ct980", "lab-pve") for n in range(8)
        ]
        # the labels are the server's own (--extra-metric-labels), not only the targets'
        own = [
            line
            for line in request("/metrics", base="http://127.0.0.1:34003")[1].splitlines()
            if line.startswith("sglang:num_running_reqs{")
        ]
        assert len(own) == 1 and 'container="ct980",node="lab-pve",gpu="3"' in own[0], own
        router = prometheus_api(port, 'query?query=smg_worker_health{container="ct980"}')["result"]
        assert len(router) == 8 and {s["metric"]["node"] for s in router} == {"lab-pve"}
        loaded = [r["name"] for g in prometheus_api(port, "rules")["groups"] for r in g["rules"]]
        assert sorted(loaded) == [
            "SglangKvCacheFull",
            "SglangQueueGrowing",
            "SglangServerUnhealthy",
            "SglangTargetDown",
        ]
        in_ct(VMID, "systemctl stop sglang@5.service")
        firing = wait_for(
            "SglangTargetDown firing for sglang@5",
            lambda: [
                a
                for a in prometheus_api(port, "alerts")["alerts"]
                if a["labels"]["alertname"] == "SglangTargetDown" and a["state"] == "firing"
            ],
            60,
        )
        assert [(a["labels"]["instance"], a["labels"]["gpu"]) for a in firing] == [("ct980/sglang@5", "5")]
    finally:
        server.terminate()
        server.wait(timeout=30)
        in_ct(VMID, "systemctl start sglang@5.service")
    wait_for("8 healthy workers again", lambda: readiness().get("healthy_workers") == 8, 120)


def client_key_sources(tmp_path, monkeypatch):
    """{source: (the play's extra arguments, its key)}: where operators keep secrets, each accepted."""
    (tmp_path / "pass").write_text("gpulxc-test-vault-password\n")
    (tmp_path / "vault.yml").write_text(json.dumps({"sglang_router_api_keys": [{"tenant": "lab", "key": KEY}]}))
    subprocess.run(
        [
            str(REPO / ".venv/bin/ansible-vault"),
            "encrypt",
            "--vault-password-file",
            str(tmp_path / "pass"),
            str(tmp_path / "vault.yml"),
        ],
        check=True,
        capture_output=True,
    )
    monkeypatch.setenv("GPULXC_TEST_ROUTER_KEY", KEY + "-env")
    lookup = "{{ lookup('ansible.builtin.env', 'GPULXC_TEST_ROUTER_KEY') }}"
    (tmp_path / "lookup.yml").write_text(
        json.dumps(
            {
                "all": {
                    "vars": {
                        # a tenant starting with "-": smg would take it for a flag if handed as a separate argument
                        "sglang_router_api_keys": [{"tenant": "-lab", "key": lookup}]
                    }
                }
            }
        )
    )
    (tmp_path / "keys.json").write_text(
        json.dumps({"sglang_router_api_keys": [{"tenant": "lab", "key": KEY + "-file"}]})
    )
    (tmp_path / "env").mkdir()  # as ansible-runner passes AWX's extra variables, marked unsafe as AWX writes them
    (tmp_path / "env/extravars").write_text(f"sglang_router_api_keys:\n- {{tenant: lab, key: !unsafe '{KEY}-awx'}}\n")
    return {
        "vault": (["--vault-password-file", str(tmp_path / "pass"), "-e", f"@{tmp_path / 'vault.yml'}"], KEY),
        "lookup": (["-i", str(tmp_path / "lookup.yml")], KEY + "-env"),
        "extra-vars file": (["-e", f"@{tmp_path / 'keys.json'}"], KEY + "-file"),
        "awx": (["-e", f"@{tmp_path / 'env/extravars'}"], KEY + "-awx"),
    }


def test_client_keys_from_every_secret_source_are_enforced_and_never_shown(inventory, tmp_path, monkeypatch):
    try:
        for source, (extra, key) in client_key_sources(tmp_path, monkeypatch).items():
            proc, changed = play(inventory, "-v", *extra)
            assert proc.returncode == 0 and changed > 0, (source, proc.stdout[-3000:])
            assert key not in proc.stdout + proc.stderr, source
            assert chat(1) == (401, None), source
            assert chat(1, key)[0] == 200, source
        commands = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=False).stdout
        assert key not in commands and admin_key() not in commands and admin_key() not in proc.stdout
        modes = in_ct(VMID, "stat -c '%a %U:%G' /etc/smg/control-plane-key /etc/smg/router-args.json").stdout.split()
        assert modes == ["600", "root:root"] * 2, modes
        holders = in_ct(
            VMID,
            f"grep -rlF {key} /etc /opt /usr/local /run /tmp /root /var 2>/dev/null | xargs -r stat -c '%a %U:%G %n'",
        ).stdout.splitlines()
        assert holders and all(line.split()[0][-1] == "0" for line in holders), holders  # none world-readable
        assert in_ct(VMID, "systemctl cat smg.service").stdout.count(key) == 0
    finally:
        proc, changed = play(inventory)
        assert proc.returncode == 0, proc.stdout[-3000:]
    assert chat(1)[0] == 200


# Every route smg registers (model_gateway/src/server.rs:779-930 of lightseekorg/smg at 73da68c: protected,
# realtime, multipart, public, admin and worker routes), the two the 1.13.0 wheel's binary answers besides
# (docs/security.md), and a path no one registers (smg's fallback).
SMG_ROUTES = [
    ("POST", "/v1/responses"),
    ("GET", "/v1/responses/r1"),
    ("POST", "/v1/responses/r1/cancel"),
    ("DELETE", "/v1/responses/r1"),
    ("GET", "/v1/responses/r1/input_items"),
    ("POST", "/v1/conversations"),
    ("GET", "/v1/conversations/c1"),
    ("POST", "/v1/conversations/c1"),
    ("DELETE", "/v1/conversations/c1"),
    ("GET", "/v1/conversations/c1/items"),
    ("POST", "/v1/conversations/c1/items"),
    ("GET", "/v1/conversations/c1/items/i1"),
    ("DELETE", "/v1/conversations/c1/items/i1"),
    ("POST", "/generate"),
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/completions"),
    ("POST", "/rerank"),
    ("POST", "/v1/rerank"),
    ("POST", "/v1/embeddings"),
    ("POST", "/v1/messages"),
    ("POST", "/v1/interactions"),
    ("POST", "/v1/classify"),
    ("POST", "/v1/tokenize"),
    ("POST", "/v1/detokenize"),
    ("POST", "/v1/realtime/sessions"),
    ("POST", "/v1/realtime/client_secrets"),
    ("POST", "/v1/realtime/transcription_sessions"),
    ("GET", "/v1/realtime"),
    ("POST", "/v1/realtime/calls"),
    ("POST", "/v1/audio/transcriptions"),
    ("GET", "/health"),
    ("GET", "/health_generate"),
    ("GET", "/engine_metrics"),
    ("GET", "/v1/models"),
    ("GET", "/get_model_info"),
    ("GET", "/get_server_info"),
    ("POST", "/flush_cache"),
    ("POST", "/start_profile"),
    ("POST", "/stop_profile"),
    ("GET", "/get_loads"),
    ("POST", "/parse/function_call"),
    ("POST", "/parse/reasoning"),
    ("POST", "/wasm"),
    ("DELETE", "/wasm/w1"),
    ("GET", "/wasm"),
    ("POST", "/v1/tokenizers"),
    ("GET", "/v1/tokenizers"),
    ("GET", "/v1/tokenizers/t1"),
    ("DELETE", "/v1/tokenizers/t1"),
    ("GET", "/v1/tokenizers/t1/status"),
    ("POST", "/workers"),
    ("GET", "/workers"),
    ("GET", "/workers/w1"),
    ("PUT", "/workers/w1"),
    ("PATCH", "/workers/w1"),
    ("DELETE", "/workers/w1"),
    ("GET", "/v1/models/stand-in"),
    ("GET", "/loads"),
    ("GET", "/metrics"),
    ("GET", "/no-such-route-gpulxc"),
]
SERVER_KEY = "gpulxc-server-key-7a1c$x"  # a "$": nginx must not expand it


def front_context():
    """TLS that trusts only the certificate ct980's front serves now."""
    return ssl.create_default_context(cadata=in_ct(VMID, "cat /etc/smg/front/tls.crt").stdout)


def test_beyond_loopback_the_front_serves_tls_and_closes_every_route_without_a_key(inventory, tmp_path):
    (tmp_path / "pass").write_text("gpulxc-test-vault-password\n")
    secrets = tmp_path / "secrets.yml"
    secrets.write_text(
        json.dumps({"sglang_router_api_keys": [{"tenant": "lab", "key": KEY}], "sglang_services_api_key": SERVER_KEY})
    )
    subprocess.run(
        [
            str(REPO / ".venv/bin/ansible-vault"),
            "encrypt",
            "--vault-password-file",
            str(tmp_path / "pass"),
            str(secrets),
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=operator",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(tmp_path / "op.key"),
            "-out",
            str(tmp_path / "op.crt"),
        ],
        check=True,
        capture_output=True,
    )
    operator = tmp_path / "operator.json"
    operator.write_text(
        json.dumps(
            {
                "sglang_router_tls_certificate": (tmp_path / "op.crt").read_text(),
                "sglang_router_tls_private_key": (tmp_path / "op.key").read_text(),
            }
        )
    )
    https = ROUTER.replace("http://", "https://")
    keyed = [
        "--vault-password-file",
        str(tmp_path / "pass"),
        "-e",
        f"@{secrets}",
        "-e",
        # the 8 restarted for the server key at once, not one at a time (the rolling restart has tests of its own)
        '{"sglang_router_host": "0.0.0.0", "sglang_services_restart_batch": 0}',
    ]
    try:
        proc, changed = run_site(inventory, "ct980", "--tags=services,router,summary", *keyed)
        assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
        assert KEY not in proc.stdout and SERVER_KEY not in proc.stdout
        context = front_context()
        assert request("/liveness", base=https, context=context)[0] == 200
        assert request("/readiness", base=https, context=context)[1]["healthy_workers"] == 8
        refused = {
            f"{m} {p}": request(p, None, b"{}" if m != "GET" else None, m, base=https, context=context)[0]
            for m, p in SMG_ROUTES
        }
        assert set(refused.values()) == {401}, {r: s for r, s in refused.items() if s != 401}
        assert {request(p, "wrong", base=https, context=context)[0] for p in ("/get_server_info", "/v1/models")} == {
            401
        }
        # the servers demand their key; smg sends it, not the client's
        assert request("/v1/models", base="http://127.0.0.1:34000")[0] == 401
        body = json.dumps({"model": "stand-in", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
        assert request("/v1/chat/completions", KEY, body.encode(), base=https, context=context)[0] == 200
        assert request("/metrics", KEY, base=https, context=context)[0] == 200
        # each server's metrics, through the front only with a client key
        assert request("/metrics/workers/7", KEY, base=https, context=context)[0] == 200
        assert request("/metrics/workers/7", None, base=https, context=context)[0] == 401
        assert request("/get_server_info", KEY, base=https, context=context)[0] == 403  # it holds the server key
        gateway = in_ct(VMID, "grep -v '^#' /etc/smg/gateway-key").stdout.strip()
        journal = in_ct(VMID, "journalctl --no-pager -o cat -u smg.service -u smg-front.service -u 'sglang@*'").stdout
        commands = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=False).stdout
        assert gateway and [k for k in (KEY, SERVER_KEY, gateway) if k in journal + commands] == []
        assert request("/liveness")[0] == 400  # plain HTTP on the TLS port: nginx refuses it
        served = ssl.PEM_cert_to_DER_cert(in_ct(VMID, "cat /etc/smg/front/tls.crt").stdout)
        fingerprint = hashlib.sha256(served).hexdigest().upper()
        lines = json.loads(proc.stdout.rsplit("TASK [Summary]", 1)[1].split("=>", 1)[1].split("PLAY RECAP")[0])["msg"]
        assert any(
            line.endswith(", client key required, TLS)") and line.startswith("endpoint: https://") for line in lines
        ), lines
        assert any(
            line.startswith("TLS certificate: /etc/smg/front/tls.crt")
            and line.endswith(":".join(fingerprint[i : i + 2] for i in range(0, 64, 2)))
            for line in lines
        ), lines
        # the operator's certificate replaces the one made here, and the second run with it changes nothing
        for expected in (None, 0):
            proc, changed = play(inventory, *keyed, "-e", f"@{operator}")
            assert proc.returncode == 0 and (expected is None or changed == expected), proc.stdout[-3000:]
            assert "PRIVATE KEY" not in proc.stdout
        mine = ssl.create_default_context(cafile=str(tmp_path / "op.crt"))
        assert request("/readiness", base=https, context=mine)[0] == 200
    finally:
        proc, changed = play(inventory, "-e", '{"sglang_services_restart_batch": 0}')
        assert proc.returncode == 0, proc.stdout[-3000:]
    assert chat(1)[0] == 200 and request("/get_server_info")[0] == 200  # on loopback, without keys: all open


# Bad input: its breadth (every class of bad value) is tests/unit/roles/test_bad_input.py's; here, runs that several
# bad settings share, side by side, refused with every message and the CT left byte for byte as it was: the router's
# settings read against the instances the services published in the CT, and keys in plain text on the command line.
REFUSED = {
    "settings": (
        {
            "sglang_router_port": 34003,
            "sglang_router_smg_port": 29980,
            "sglang_router_host": "0.0.0.0",
            "sglang_router_prometheus_host": "0.0.0.0",
            "sglang_router_tls_certificate": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
        },
        [
            "sglang_router_port 34003 is the port of an SGLang instance (published by sglang_services)",
            "sglang_router_smg_port and sglang_router_prometheus_port are both 29980",
            "sglang_router_host 0.0.0.0 is reachable from other machines: set",
            "sglang_router_prometheus_host 0.0.0.0 is reachable from other",
            "sglang_router_tls_certificate and sglang_router_tls_private_key go together",
        ],
    ),
    "plain-text keys": (
        {
            "sglang_router_host": "0.0.0.0",
            "sglang_router_api_keys": [{"tenant": "t", "key": "plain"}],
            "sglang_router_worker_api_key": "plain-worker-key",
        },
        [
            "sglang_router_api_keys holds a key written in plain text",
            "sglang_router_worker_api_key is written in plain text",
        ],
    ),
}


@pytest.fixture(scope="module")
def refused(inventory):
    """Each REFUSED run, side by side, and the CT before and after them all."""
    arguments = [(inventory, "-e", json.dumps(extra)) for extra, _ in REFUSED.values()]
    return refused_side_by_side(play, arguments, lambda: (in_ct(VMID, SNAPSHOT).stdout, ct_state(VMID)))


@pytest.mark.parametrize("case", list(REFUSED))
def test_bad_input_fails_before_any_change(refused, case):
    runs, before, after = refused
    assert_refused(runs[list(REFUSED).index(case)], REFUSED[case][1])
    assert after == before
