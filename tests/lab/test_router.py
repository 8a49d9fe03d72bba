"""sglang_router through site.yml on a lab CT (ct980): the real SGLang model gateway (smg, from the lab
index's real wheels) in front of 8 stand-in servers (ports 34000 + i, the router on 8980: lab CTs share the
host's network). Requests through it land on every instance; a stopped instance is routed around, reported
unhealthy, and back after a re-run; client keys from Ansible Vault are enforced and never shown.
"""

import concurrent.futures
import json
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import pytest
from conftest import REPO, destroy, pct, run_site

VMID = 980
ROUTER = "http://127.0.0.1:8980"
KEY = "gpulxc-router-test-key-5d21e0"
SNAPSHOT = "md5sum /etc/smg/* /etc/systemd/system/smg.service 2>/dev/null; systemctl is-active smg"


@pytest.fixture(scope="module")
def inventory(lab_ready, tmp_path_factory):
    destroy(VMID)
    path = tmp_path_factory.mktemp("inv") / "ct980.yml"
    path.write_text(json.dumps({"sglang_containers": {"hosts": {"ct980": {
        "proxmox_vmid": VMID, "pct_container_node": "lab-pve",
        "sglang_services_port_base": 34000, "sglang_services_nccl_port_base": 35000,
        "sglang_router_port": 8980, "sglang_router_prometheus_port": 29980}}}}))  # fmt: skip
    proc, _ = run_site(path, "ct980")
    assert proc.returncode == 0, proc.stdout[-3000:]
    yield path
    destroy(VMID)


def play(inventory, *extra):
    return run_site(inventory, "ct980", "--tags=services,router", *extra)


def in_ct(script):
    return pct("exec", VMID, "--", "/bin/bash", "-c", script, check=False)


def request(path, key=None, body=None):
    req = urllib.request.Request(ROUTER + path, data=body, headers={"Content-Type": "application/json"})
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
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


def test_100_completions_through_the_router_land_on_all_8(inventory):
    assert readiness() == {"status": "ready", "healthy_workers": 8, "total_workers": 8}
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(chat, range(100)))
    assert [status for status, _ in results] == [200] * 100
    assert {gpu for _, gpu in results} == {f"gpu{i}" for i in range(8)}
    assert in_ct("ps -o user=,args= -C smg::router").stdout.split() == ["smg", "smg::router"]
    proc, changed = play(inventory)
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]


def test_a_stopped_instance_is_routed_around_and_back_after_a_rerun(inventory):
    in_ct("systemctl stop sglang@3.service")
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


def test_client_keys_from_vault_are_enforced_and_never_shown(inventory, tmp_path):
    (tmp_path / "pass").write_text("gpulxc-test-vault-password\n")
    (tmp_path / "keys.yml").write_text(json.dumps({"sglang_router_api_keys": [{"tenant": "lab", "key": KEY}]}))
    subprocess.run([str(REPO / ".venv/bin/ansible-vault"), "encrypt", "--vault-password-file", str(tmp_path / "pass"),
                    str(tmp_path / "keys.yml")], check=True, capture_output=True)  # fmt: skip
    try:
        proc, changed = play(inventory, "-v", "--vault-password-file", str(tmp_path / "pass"),
                             "-e", f"@{tmp_path / 'keys.yml'}")  # fmt: skip
        assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
        assert KEY not in proc.stdout + proc.stderr
        assert chat(1) == (401, None)
        assert chat(1, KEY)[0] == 200
        assert KEY not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=False).stdout
        holders = in_ct(f"grep -rlF {KEY} /etc /opt /usr/local /run /tmp /root /var 2>/dev/null"
                        " | xargs -r stat -c '%a %U:%G %n'").stdout.splitlines()  # fmt: skip
        assert holders and all(line.split()[0][-1] == "0" for line in holders), holders  # none world-readable
        assert in_ct("systemctl cat smg.service").stdout.count(KEY) == 0
    finally:
        proc, changed = play(inventory)
        assert proc.returncode == 0, proc.stdout[-3000:]
    assert chat(1)[0] == 200


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"sglang_router_host": "0.0.0.0"}, "sglang_router_host 0.0.0.0 is reachable from other machines: set"),
        ({"sglang_router_policy": "fastest"}, "sglang_router_policy fastest is not an smg policy: random"),
        ({"sglang_router_host": "0.0.0.0", "sglang_router_api_keys": [{"tenant": "t", "key": "plain"}]},
         "sglang_router_api_keys holds a key written in plain text"),
    ],
)  # fmt: skip
def test_bad_input_fails_before_any_change(inventory, extra, message):
    before = in_ct(SNAPSHOT).stdout
    proc, changed = play(inventory, "-e", json.dumps(extra))
    assert proc.returncode != 0 and changed == 0, proc.stdout[-3000:]
    assert message in " ".join(proc.stdout.split())
    assert (
        in_ct("md5sum /etc/smg/* /etc/systemd/system/smg.service 2>/dev/null; systemctl is-active smg").stdout == before
    )
