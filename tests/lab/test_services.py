"""sglang_services through site.yml on a lab CT (ct970): one systemd instance of the stand-in server
per simulated GPU (ports 32000 + i, the router on 8970: lab CTs share the host's network, and CT 200 may serve on
30000 + i), health-checked and smoke-tested by sglang_health; one JIT build on a cold cache; the model staged into
/dev/shm from the node's bind mount (back by itself after a node reboot: test_drift.py); the device cgroup; rolling
restarts one health-gated instance at a time; a new stack's JIT caches of its own, the instances moving to it one
at a time; cold and warm start
times with staggered stand-in delays; an API key from Ansible Vault kept out of output, command lines
and world-readable files; a crash named with its journal; kill -9 and a stopped unit repaired; the GPU
list shrunk; bad input refused before any change.
"""

import ast
import concurrent.futures
import hashlib
import itertools
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from conftest import (
    JIT_TEMPLATE,
    REPO,
    TEMPLATE,
    assert_refused,
    byte_size,
    changed_tasks,
    ct_state,
    destroy,
    in_ct,
    job_lines,
    main_pids,
    pct,
    playbook_command,
    refused_side_by_side,
    run_site,
    slowed_down,
    standin_environment,
)

VMID = 970
FLASHINFER = ".cache/flashinfer/0.6.11.post1/120a"  # FlashInfer's versioned cache under a stack's JIT caches
HEALTH = (
    "import urllib.request, urllib.error\n"
    "for i in range(8):\n"
    "    try:\n"
    "        print(i, urllib.request.urlopen(f'http://127.0.0.1:{32000 + i}/health', timeout=5).status)\n"
    "    except (urllib.error.HTTPError, OSError) as e:\n"
    "        print(i, getattr(e, 'code', 'refused'))\n"
)
SNAPSHOT = (
    "md5sum /etc/sglang/instance-*.yaml /etc/systemd/system/sglang@.service;"
    " systemctl is-enabled sglang@{0..7}.service; systemctl is-active sglang@{0..7}.service"
)


@pytest.fixture(scope="module")
def inventory(lab_ready, tmp_path_factory):
    destroy(VMID)
    path = tmp_path_factory.mktemp("inv") / "ct970.yml"
    path.write_text(
        json.dumps(
            {
                "sglang_containers": {
                    "hosts": {
                        "ct970": {
                            "proxmox_vmid": VMID,
                            "pct_container_node": "lab-pve",
                            "pct_container_ostemplate": JIT_TEMPLATE,
                            "sglang_services_port_base": 32000,
                            "sglang_services_nccl_port_base": 33000,
                            "sglang_router_port": 8970,
                            "sglang_router_prometheus_port": 29970,
                            # all at once: the tests of the rolling restart ask for one at a time (the role's
                            # default) themselves
                            "sglang_services_restart_batch": 0,
                        }
                    }
                }
            }
        )
    )
    proc, _ = play(path, whole=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    # a model too big for the lab CT's 1 GiB /dev/shm (sparse: it takes no room where it is)
    in_ct(VMID, "mkdir -p /srv/big-model && echo {} >/srv/big-model/config.json && truncate -s 2G /srv/big-model/w.bin")
    yield path
    destroy(VMID)


def wait_healthy(deadline_s=60):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline and health() != {str(i): "200" for i in range(8)}:
        time.sleep(1)
    assert health() == {str(i): "200" for i in range(8)}


def status(path, key=None, index=0, body=None):
    request = urllib.request.Request(f"http://127.0.0.1:{32000 + index}{path}", data=body)
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        return urllib.request.urlopen(request, timeout=5).status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0  # refused: nothing listens (loading, or stopped)


CHAT = json.dumps({"model": "stand-in", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}).encode()


def start_times(since):
    """{GPU index: (started, ready)} from each instance's journal since `since`: systemd's "Started" line
    and the server's "fired up" line (the journal's own timestamps, seconds)."""
    times = {}
    for i in range(8):
        out = in_ct(VMID, f"journalctl -u sglang@{i}.service -o json --since @{since:.0f} --no-pager").stdout
        started = ready = None
        for entry in map(json.loads, out.splitlines()):
            stamp = int(entry["__REALTIME_TIMESTAMP"]) / 1e6
            message = entry.get("MESSAGE") or ""
            if message.startswith("Started ") and stamp >= since:
                started, ready = stamp, None
            elif "fired up and ready to roll" in message and started is not None:
                ready = stamp
        assert started is not None and ready is not None, (i, out[-2000:])
        times[i] = (started, ready)
    return times


def stop_times(since):
    """{GPU index: (stopping, stopped)}: systemd's "Stopping" and "Stopped" lines of each instance since `since`."""
    times = {}
    for i in range(8):
        out = in_ct(VMID, f"journalctl -u sglang@{i}.service -o json --since @{since:.0f} --no-pager").stdout
        stamps = {}
        for entry in map(json.loads, out.splitlines()):
            word, stamp = (entry.get("MESSAGE") or "").split(" ", 1)[0], int(entry["__REALTIME_TIMESTAMP"]) / 1e6
            if word in ("Stopping", "Stopped") and stamp >= since:
                stamps.setdefault(word, stamp)
        assert len(stamps) == 2, (i, out[-2000:])
        times[i] = (stamps["Stopping"], stamps["Stopped"])
    return times


class Poller(threading.Thread):
    """Sends the 8 servers a chat completion every 50 ms while a play runs (each answers at once: 200 when
    serving, 503 while warming or draining, refused while loading or stopped): the most not serving at once, and the
    longest it went without looking (`longest_gap`, seconds: a sweep that waited on a busy machine)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.most_down = 0
        self.sweeps = 0
        self.longest_gap = 0.0
        self.done = threading.Event()

    def run(self):
        last = time.monotonic()
        while not self.done.is_set():
            down = sum(status("/v1/chat/completions", index=i, body=CHAT) != 200 for i in range(8))
            self.most_down = max(self.most_down, down)
            self.sweeps += 1
            now = time.monotonic()
            self.longest_gap, last = max(self.longest_gap, now - last), now
            time.sleep(0.05)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.join()


SAMPLED = json.dumps(
    {
        "model": "stand-in",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 1,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 20,
    }
).encode()


def sampled_chat(index):
    started = time.monotonic()
    code = status("/v1/chat/completions", index=index, body=SAMPLED)
    return code, round(time.monotonic() - started, 2)


def jit_dir():
    """The JIT caches of the stack the servers start from: /var/cache/sglang/stacks/<the stack's directory name>."""
    fact = json.loads(in_ct(VMID, "cat /etc/ansible/facts.d/gpulxc_stack.fact").stdout)
    return "/var/cache/sglang/stacks/" + fact["stack"].rstrip("/").rsplit("/", 1)[1]


def builds(directory=None):
    """{op: builds} of the stand-in's JIT log in a stack's caches (the current stack's by default)."""
    log = f"{directory or jit_dir()}/{FLASHINFER}/gpulxc-standin-builds.log"
    ops = [line.split(" op=")[1].split()[0] for line in in_ct(VMID, f"cat {log}").stdout.splitlines()]
    return {op: ops.count(op) for op in sorted(set(ops))}


def play(inventory, *extra, whole=False):
    tags = [] if whole else ["--tags=services"]
    return run_site(inventory, "ct970", *tags, *extra)


def health():
    return dict(line.split() for line in in_ct(VMID, f'python3 -c "{HEALTH}"').stdout.splitlines())


def test_eight_servers_healthy_one_jit_build_and_a_second_run_changes_nothing(inventory):
    assert in_ct(VMID, "systemctl is-active sglang@{0..7}.service").stdout.split() == ["active"] * 8
    assert health() == {str(i): "200" for i in range(8)}
    # cold cache: instance 0 built the decode kernel, the rest loaded it; the smoke chats' sampling kernel, once
    assert builds() == {"gpulxc_standin_decode": 1, "gpulxc_standin_sampling": 1}
    assert in_ct(VMID, "ps -o user= -C python | sort -u").stdout.split() == ["sglang"]  # not root
    # ready means a sampled request is fast: the smoke chats built and loaded FlashInfer's sampling kernel, which
    # the first top-k/top-p request on each server would otherwise wait for (88 s on the H200)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        sampled = list(pool.map(sampled_chat, range(8)))
    assert all(code == 200 and took < 1.0 for code, took in sampled), sampled
    config = in_ct(VMID, "cat /etc/sglang/instance-5.yaml").stdout
    for line in ("port: 32005", "nccl-port: 33005", 'attention-backend: "flashinfer"', "mem-fraction-static: 0.88"):
        assert line in config.splitlines(), line
    assert "--config /etc/sglang/instance-" in in_ct(VMID, "systemctl cat sglang@5.service").stdout
    # the model staged from the node's read-only bind mount; the staging unit runs before every instance
    assert in_ct(VMID, "cmp /mnt/models/stand-in/model.safetensors /dev/shm/stand-in/model.safetensors").returncode == 0
    assert in_ct(VMID, "systemctl is-enabled sglang-model-stage.service").stdout.strip() == "enabled"
    requires = in_ct(VMID, "systemctl show -p Requires -p After --value sglang@5.service").stdout
    assert requires.count("sglang-model-stage.service") == 2, requires
    # the device cgroup: closed, the CT's NVIDIA nodes allowed by path
    devices = in_ct(VMID, "systemctl show -p DevicePolicy -p DeviceAllow sglang@5.service").stdout
    assert "DevicePolicy=closed" in devices
    for node in ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"] + [f"/dev/nvidia{i}" for i in range(8)]:
        assert f"{node} rw" in devices, (node, devices)
    proc, changed = play(inventory, whole=True)
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]


def test_the_device_cgroup_is_what_lets_the_gpu_through(inventory):
    """Without its DeviceAllow list an instance cannot open its GPU: the policy is enforced here."""
    dropins = "/etc/systemd/system/sglang@5.service.d"
    in_ct(
        VMID,
        f"mkdir -p {dropins} && printf '[Service]\\nDeviceAllow=\\n' >{dropins}/gpulxc-test-no-gpus.conf"
        " && systemctl daemon-reload && systemctl restart sglang@5.service",
    )
    try:
        deadline = time.monotonic() + 20
        journal = ""
        while time.monotonic() < deadline and "Operation not permitted" not in journal:
            time.sleep(1)
            journal = in_ct(VMID, "journalctl -u sglang@5.service -n 20 --no-pager").stdout
        assert "no CUDA-capable device is detected (/dev/nvidia5: Operation not permitted)" in journal, journal
    finally:
        in_ct(
            VMID,
            f"rm -rf {dropins} && systemctl daemon-reload && systemctl reset-failed sglang@5.service;"
            " systemctl restart sglang@5.service",
        )
    wait_healthy()


def test_a_changed_setting_restarts_one_health_gated_instance_at_a_time(inventory):
    pids = main_pids(VMID)
    started = time.monotonic()
    with Poller() as poller:
        proc, changed = play(
            inventory,
            "-e",
            json.dumps({"sglang_services_max_running_requests": 32, "sglang_services_restart_batch": 1}),
        )
    took = time.monotonic() - started
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert "max-running-requests: 32" in in_ct(VMID, "cat /etc/sglang/instance-7.yaml").stdout.splitlines()
    new = main_pids(VMID)
    assert all(new[i] != pids[i] for i in range(8)), (pids, new)
    # it looked all along the play (a sweep at least every 2 s; 8 restarts take longer), and never saw 2 down
    sweeps = (poller.sweeps, poller.longest_gap, took)
    assert poller.longest_gap < 2 and poller.sweeps > took / 2 and poller.most_down == 1, (sweeps, poller.most_down)
    proc, changed = play(inventory)  # back, all at once (the CT's inventory)
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert health() == {str(i): "200" for i in range(8)}


PROGRESS = re.compile(r"\(item=(\d+)/(\d+) healthy((?:, \d+ [a-z ]+?)*) after (?:(\d+)m)?(\d+)s of 30m00s")


def progress_lines(proc, task):
    """[(healthy, total, other states, seconds waited)] of the progress lines the named health wait printed, the
    first time it ran in the play (the handler's check at the end may have the same name)."""
    header = r"TASK \[[^\]]*: " + re.escape(task) + r"\][^\n]*\n"
    blocks = re.findall(header + r"((?:(?!TASK \[)[^\n]*\n)*)", proc.stdout)
    return [
        (int(healthy), int(total), others.lstrip(", "), int(minutes or 0) * 60 + int(seconds))
        for healthy, total, others, minutes, seconds in PROGRESS.findall(blocks[0] if blocks else "")
    ]


def test_a_drained_restart_of_a_server_warming_for_25_s_shows_its_progress_every_5_s(inventory):
    """A changed environment restarts the 8 (all at once, the inventory's batch), drained at the router first; instance
    0 then warms up for 25 s: the wait prints a line at least every 10 s (5 s slices: the default's 20 would make the
    test four times as long) saying what it sees, not silence."""
    plan = json.dumps({"0": {"warmup_s": 25}})
    slow = json.dumps(
        {"sglang_services_progress_interval": 5, "sglang_services_environment": standin_environment(plan)}
    )
    everyone = ", ".join(f"sglang@{i}" for i in range(8))
    try:
        proc, changed = play(inventory, "-e", slow)
        assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
        assert f"Drain at the router first - {everyone}" in proc.stdout, proc.stdout[-3000:]
        lines = progress_lines(proc, f"Wait for the health of {everyone}")
        print(lines)
        # the warm-up began with instance 0's restart job, while the other restarts were still being asked for
        # (several seconds on a busy machine: 12 s once, the wait then saw 13 s of it): the wait sees two slices of it
        assert len(lines) >= 3, proc.stdout[-3000:]
        assert all(line[1] == 8 and line[0] < 8 for line in lines[:-1]), lines
        assert all(line[2] == "1 warming" for line in lines[1:-1]), lines
        assert lines[-1][:3] == (8, 8, "") and lines[-1][3] >= 10, lines
        waited = [0] + [line[3] for line in lines]
        assert max(b - a for a, b in itertools.pairwise(waited)) <= 10, waited
    finally:
        proc, _ = play(inventory)
        assert proc.returncode == 0, proc.stdout[-3000:]


# a line of the first instance's health wait while its unit runs FlashInfer's ninja
JIT_LINE = re.compile(
    r"\(item=0/1 healthy[^\n]*\(waiting for sglang@0; sglang@0: JIT build gpulxc_standin_decode"
    r" (?:(\d+)m)?(\d+)s\)\)"
)


def test_a_new_stack_gets_caches_of_its_own_and_the_instances_move_to_it_the_canary_alone_then_a_batch_at_a_time(
    inventory,
):
    """A new stack (one more package: a lock of its own): its JIT caches start cold in a directory of their own;
    instance 0 moves first and alone and builds them - slowed to 20 s (the unit's processes run 10 ms a second),
    its build shows in the wait's lines (5 s slices) - while the other 7 keep serving on the old stack, then the rest
    a batch of 4 at a time, never more stopped at once (one at a time, the role's default, is the changed setting's
    test). Back to the old stack (the rest at once, this CT's batch): nothing installed, its caches were kept, and
    every instance starts warm on them (no build)."""
    old, before = jit_dir(), builds()
    batches = {"sglang_services_restart_batch": 4}  # this CT's is all at once
    more = (
        "-e",
        json.dumps(
            {"sglang_stack_extra_packages": ["pycountry==24.6.1"], **batches, "sglang_services_progress_interval": 5}
        ),
    )
    since = time.time()
    with slowed_down(VMID, r"^ninja -v ", 20, 10, unit="sglang@0.service") as said:
        proc, changed = play(inventory, *more, whole=True)
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    new = jit_dir()
    assert new != old and "slowed " in said[0], (new, old, said)
    seen = [int(m or 0) * 60 + int(sec) for m, sec in JIT_LINE.findall(proc.stdout)]
    assert len(seen) >= 2 and max(seen) >= 10, (seen, said, proc.stdout[-3000:])
    stops = stop_times(since)  # a batch after another: at no moment more than 4 instances stopping
    assert max(sum(start <= t < end for start, end in stops.values()) for t, _ in stops.values()) <= 4, stops
    canary = stops.pop(0)  # instance 0 (the cold build) first, alone: the rest stop once it is back
    assert all(start >= canary[1] for start, _ in stops.values()), (canary, stops)
    assert builds(new) == {"gpulxc_standin_decode": 1, "gpulxc_standin_sampling": 1}
    assert builds(old) == before  # the old stack's caches are kept
    assert health() == {str(i): "200" for i in range(8)}
    proc, changed = play(inventory, whole=True)  # back to the old stack
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert jit_dir() == old and builds(old) == before  # warm: no build
    # sglang_stack_keep_stacks 2: the other stack and its caches stay
    assert in_ct(VMID, f"test -d {new}").returncode == 0
    proc, changed = play(inventory, whole=True)
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]


def test_a_new_stack_failing_on_its_canary_is_rolled_back_and_the_run_says_why(inventory):
    """The new stack's stand-in (the stack holding pycountry 24.6.1) crashes at start on GPU 0 (a lab fault): the
    canary sglang@0 fails there and the container goes back to the stack it ran - the venv's link, the CUDA environment
    file, the unit, sglang@0 restarted on it and healthy - while the other 7 never stopped; the run fails naming
    the canary and why. A run with the inputs back changes what the fault's setting changed, then nothing."""
    old = in_ct(VMID, "readlink -f /opt/sglang/venv").stdout.strip()
    before = main_pids(VMID)
    plan = {"0": {"fault": "crash_at_start", "only_with": "pycountry==24.6.1"}}  # the old stack has 26.2.16
    extra = json.dumps(
        {"sglang_stack_extra_packages": ["pycountry==24.6.1"], "sglang_services_environment": standin_environment(plan)}
    )
    proc, _ = play(inventory, "-e", extra, whole=True)
    out = " ".join(proc.stdout.split())
    assert proc.returncode != 0 and "failed on the canary sglang@0" in out, proc.stdout[-3000:]
    assert "crashes at every start" in out and f"The container is back on {old}" in out, out[-3000:]
    assert in_ct(VMID, "readlink -f /opt/sglang/venv").stdout.strip() == old
    assert f"CUDA_HOME={old}/" in in_ct(VMID, "cat /etc/sglang/cuda.env").stdout
    assert f"ExecStart={old}/bin/python " in in_ct(VMID, "cat /etc/systemd/system/sglang@.service").stdout
    now = main_pids(VMID)
    assert now[1:] == before[1:] and now[0] != before[0], (before, now)  # only the canary moved, and came back
    assert in_ct(VMID, f"tr '\\0' ' ' </proc/{now[0]}/cmdline").stdout.startswith(f"{old}/bin/python "), now[0]
    assert health() == {str(i): "200" for i in range(8)}
    proc, changed = play(inventory, whole=True)
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert in_ct(VMID, "readlink -f /opt/sglang/venv").stdout.strip() == old
    proc, changed = play(inventory, whole=True)
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]


def decode_op():
    return f"{jit_dir()}/{FLASHINFER}/cached_ops/gpulxc_standin_decode"


def wait_for(script, deadline_s=60, interval=0.1):
    deadline = time.monotonic() + deadline_s
    while in_ct(VMID, script).returncode != 0:
        assert time.monotonic() < deadline, script
        time.sleep(interval)


def test_eight_started_together_on_a_cold_cache_build_the_jit_kernels_once(inventory):
    """As at boot after a new stack: all 8 start at the same moment and race for the build's lock."""
    in_ct(VMID, f"systemctl stop sglang@{{0..7}}.service && rm -rf {jit_dir()}/.cache/flashinfer")
    since = time.time()
    time.sleep(1)  # start_times reads the journal from a whole second (`--since @<s>`)
    # (reset-failed: the earlier tests' restarts count towards StartLimitBurst; these starts are the test's own)
    start_all = "systemctl reset-failed sglang@{0..7}.service; systemctl start sglang@{0..7}.service"
    assert in_ct(VMID, start_all).returncode == 0
    wait_healthy()
    times = start_times(since)
    starts = [start for start, _ in times.values()]
    assert max(starts) - min(starts) < 2, times  # they did start together
    assert builds() == {"gpulxc_standin_decode": 1}  # no sampled request yet
    proc, changed = play(inventory)
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]


def test_a_jit_build_killed_half_way_is_rebuilt_at_the_next_start(inventory):
    """SIGKILL during instance 0's first build, and the truncated library a kill during the link leaves (not in
    ninja's log): FlashInfer 0.6.11 runs ninja at every start (flashinfer/jit/core.py:307-319), and ninja rebuilds
    an output its log lacks, so the next start heals it by itself; a re-run finds no unfinished build left."""
    in_ct(VMID, f"systemctl stop sglang@{{0..7}}.service && rm -rf {jit_dir()}/.cache/flashinfer")
    # (reset-failed: the earlier tests' restarts count towards StartLimitBurst; these starts are the test's own)
    in_ct(VMID, "systemctl reset-failed sglang@0.service; systemctl start sglang@0.service")
    op = decode_op()
    wait_for(f"test -e {op}/build.ninja")
    # ninja and nvcc die with it
    in_ct(VMID, "systemctl kill -s KILL sglang@0.service; systemctl stop sglang@0.service")
    assert in_ct(VMID, f"test -e {op}/gpulxc_standin_decode.so").returncode != 0  # killed before its link
    in_ct(VMID, f"head -c 4096 /usr/bin/python3 >{op}/gpulxc_standin_decode.so")  # what a kill during the link leaves
    in_ct(VMID, "systemctl reset-failed sglang@0.service; systemctl start sglang@0.service")
    wait_for(
        "python3 -c 'import urllib.request; urllib.request.urlopen(\"http://127.0.0.1:32000/health\", timeout=5)'",
        60,
        0.5,
    )
    assert builds() == {"gpulxc_standin_decode": 2}  # the killed build, then ninja's at the next start
    assert "file too short" not in in_ct(VMID, "journalctl -u sglang@0.service --no-pager").stdout
    proc, changed = play(inventory)  # starts the other 7
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert "gpulxc.sglang.sglang_services : Remove JIT builds killed half-way; is the JIT cache warm?" not in (
        changed_tasks(proc)
    ), proc.stdout[-3000:]
    wait_healthy()
    proc, changed = play(inventory)
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]


def test_cold_start_then_warm_start_with_staggered_delays(inventory):
    """Cold: instance 0 alone (it builds the JIT kernels), then the other 7 together; warm: all 8 together."""
    plan = {
        str(i): {"load_s": load, "warmup_s": warm}
        for i, (load, warm) in enumerate([(3, 1), (1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (2, 2), (1, 1)])
    }
    delay = {int(i): p["load_s"] + p["warmup_s"] for i, p in plan.items()}
    extra = json.dumps(
        {"sglang_services_environment": standin_environment(plan), "sglang_services_progress_interval": 1}
    )
    try:
        in_ct(VMID, f"systemctl stop sglang@{{0..7}}.service && rm -rf {jit_dir()}/.cache/flashinfer")
        since = time.time()
        proc, _ = play(inventory, "-e", extra)
        assert proc.returncode == 0, proc.stdout[-3000:]
        # the first instance's wait (its JIT build, then its load) said what it saw at every slice
        first = progress_lines(proc, "Wait for the health of sglang@0")
        assert len(first) >= 3 and first[-1][:2] == (1, 1), proc.stdout[-3000:]
        assert all(line[:2] == (0, 1) and line[2] in ("1 loading", "1 warming") for line in first[:-1]), first
        cold = start_times(since)
        first_ready = cold[0][1]
        assert all(cold[i][0] >= first_ready for i in range(1, 8)), cold  # the rest waited for instance 0
        t0 = first_ready - cold[0][0]
        cold_total = max(ready for _, ready in cold.values()) - cold[0][0]
        others = max(delay[i] for i in range(1, 8))
        assert cold_total <= t0 + others + 10, (cold_total, t0, others)

        in_ct(VMID, "systemctl stop sglang@{0..7}.service")
        since = time.time()
        proc, changed = play(inventory, "-e", extra)
        assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
        warm = start_times(since)
        warm_total = max(ready for _, ready in warm.values()) - min(start for start, _ in warm.values())
        assert warm_total <= max(delay.values()) + 10, warm_total
        print(
            f"cold start: {cold_total:.1f} s (instance 0 alone: {t0:.1f} s, slowest other: {others} s);"
            f" warm start: {warm_total:.1f} s (slowest: {max(delay.values())} s, one after another:"
            f" {sum(delay.values())} s)"
        )
    finally:
        proc, _ = play(inventory)
        assert proc.returncode == 0, proc.stdout[-3000:]


def test_an_api_key_from_vault_is_enforced_and_never_shown(inventory, tmp_path):
    key = "gpulxc-test-key-7f3a9c"
    (tmp_path / "pass").write_text("gpulxc-test-vault-password\n")
    vaulted = subprocess.run(
        [
            str(REPO / ".venv/bin/ansible-vault"),
            "encrypt_string",
            "--vault-password-file",
            str(tmp_path / "pass"),
            "--name",
            "sglang_services_api_key",
            key,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (tmp_path / "key.yml").write_text(vaulted)
    try:
        # the servers' own key, the router left out (test_router.py has keyed servers behind the router)
        no_router = ("--skip-tags=router", "-e", "sglang_services_router_drain=false")
        since = int(time.time())
        proc, changed = play(
            inventory,
            "-v",
            *no_router,
            "--vault-password-file",
            str(tmp_path / "pass"),
            "-e",
            f"@{tmp_path / 'key.yml'}",
        )
        assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
        assert key not in proc.stdout + proc.stderr
        assert status("/v1/models") == 401
        assert status("/v1/models", key) == 200
        assert key not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=False).stdout
        # SGLang logs every argument at start (the stand-in as 0.5.12 does): the launcher keeps the key out
        journal = in_ct(VMID, f"journalctl --no-pager -o cat -u 'sglang@*' --since @{since}").stdout
        assert "server_args=ServerArgs(" in journal and "api_key='<redacted>'" in journal
        assert key not in journal
        holders = in_ct(
            VMID,
            f"grep -rlF {key} /etc /opt /usr/local /var/cache/sglang /run /tmp /root 2>/dev/null"
            " | xargs -r stat -c '%a %U:%G %n'",
        ).stdout.splitlines()
        assert holders and all(line.split()[0][-1] in "0" for line in holders), holders  # none world-readable
    finally:
        proc, changed = play(inventory)
        assert proc.returncode == 0, proc.stdout[-3000:]
    assert status("/v1/models") == 200


def test_a_crash_at_start_is_named_with_its_state_and_journal(inventory):
    plan = {
        "sglang_services_environment": standin_environment({"1": {"fault": "crash_at_start"}}),
        "sglang_services_health_deadline": 15,
        "sglang_services_restart_batch": 1,
    }
    try:
        proc, _ = play(inventory, "-e", json.dumps(plan))
        assert proc.returncode != 0
        out = proc.stdout
        # the rolling restart stops at the instance that does not come back: sglang@0 came back, 2 to 7 keep serving
        assert "Restart sglang@0]" in out
        assert "SGLang servers not healthy " in out and "sglang@1 (http://127.0.0.1:32001): loading" in out
        assert "Restart sglang@2]" not in out
        assert "unit sglang@1.service is " in out
        assert "RuntimeError: gpulxc lab fault injection: crash at start" in out  # the journal tail
    finally:
        proc, changed = play(inventory)
        assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert health() == {str(i): "200" for i in range(8)}


def test_an_instance_crashing_at_every_start_fails_the_run_without_waiting_for_the_deadline(inventory):
    """Crashing at every start, sglang@5 ends each time with SIGKILL as sglang 0.5.12 does - a clean exit for the
    unit (SuccessExitStatus) - and systemd restarts it, RestartSec apart (1 s: fast-clock.yml): the health check
    names it after two restarts (NRestarts), not at its 30-minute deadline nor only at the start limit; a run without
    the fault repairs it."""
    plan = {
        "sglang_services_environment": standin_environment({"5": {"fault": "crash_at_start"}}),
        "sglang_services_health_deadline": 1800,
    }
    try:
        started = time.monotonic()
        proc, _ = play(inventory, "-e", json.dumps(plan))
        took = time.monotonic() - started
        assert proc.returncode != 0
        out = " ".join(proc.stdout.split())
        assert (
            "not healthy (systemd gave up on them or they crash at every start; not waited for): sglang@5 (" in out
        ), out[-3000:]
        assert "its unit restarted 2 times while waited for" in out and "it crashes at every start" in out
        assert "status=9/KILL" in out or "Scheduler hit an exception" in out  # the journal tail
        assert took < 120, took
    finally:
        proc, changed = play(inventory)
        assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert health() == {str(i): "200" for i in range(8)}


def test_kill_9_is_restarted_by_systemd_and_a_stopped_unit_by_a_rerun(inventory):
    pid = in_ct(VMID, "systemctl show -p MainPID --value sglang@2.service").stdout.strip()
    assert in_ct(VMID, f"kill -9 {pid}").returncode == 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and health().get("2") != "200":
        time.sleep(1)
    assert health()["2"] == "200"
    assert in_ct(VMID, "systemctl show -p MainPID --value sglang@2.service").stdout.strip() != pid
    in_ct(VMID, "systemctl stop sglang@3.service")
    assert health()["3"] == "refused"
    proc, changed = play(inventory)
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert health()["3"] == "200"


def test_shrinking_the_gpu_list_stops_and_disables_the_rest(inventory):
    proc, _ = play(inventory, "-e", json.dumps({"sglang_services_gpus": [0, 1]}))
    assert proc.returncode == 0, proc.stdout[-3000:]
    states = in_ct(VMID, "systemctl is-active sglang@{0..7}.service; systemctl is-enabled sglang@{0..7}.service").stdout
    assert states.split() == ["active"] * 2 + ["inactive"] * 6 + ["enabled"] * 2 + ["disabled"] * 6
    proc, changed = play(inventory)
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert health() == {str(i): "200" for i in range(8)}


def test_two_instances_on_one_gpu_start_one_after_another_at_every_start(inventory):
    """Two servers on GPU 0 (0.45 each, a 2 s load), one on GPU 1: the second on GPU 0 waits in its ExecStartPre
    until the first listens; started together by systemd (as at boot) they still come up one after the other,
    where the stand-in, like the real server, kills the one that profiles while the other is loading."""
    instances = [{"gpu": 0, "mem_fraction_static": 0.45}, {"gpu": 1}, {"gpu": 0, "mem_fraction_static": 0.45}]
    extra = {
        "sglang_services_instances": instances,
        "sglang_services_environment": standin_environment({"0": {"load_s": 2}}),
    }
    proc, _ = play(inventory, "-e", json.dumps(extra))
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert [status("/health", index=i) for i in range(3)] == [200] * 3
    assert in_ct(VMID, "systemctl is-active sglang@{3..7}.service").stdout.split() == ["inactive"] * 5
    assert in_ct(VMID, "cat /etc/sglang/instance-2.env").stdout.count("CUDA_VISIBLE_DEVICES=0") == 1
    assert in_ct(VMID, "systemctl stop sglang@0.service sglang@2.service").returncode == 0
    since = time.time()
    assert in_ct(VMID, "systemctl start sglang@0.service sglang@2.service").returncode == 0  # both at once, as at boot
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and [status("/health", index=i) for i in (0, 2)] != [200, 200]:
        time.sleep(0.5)
    journals = {
        i: in_ct(VMID, f"journalctl -u sglang@{i}.service --since @{int(since)} --no-pager").stdout for i in (0, 2)
    }
    assert [status("/health", index=i) for i in (0, 2)] == [200, 200], journals
    # each started once: no "Not enough memory", no crash restart
    assert all("Not enough memory" not in j and j.count("Started sglang@") == 1 for j in journals.values()), journals
    assert "waiting for /etc/sglang/instance-0.yaml (http://127.0.0.1:32000) to allocate its memory pool" in journals[2]
    proc, changed = play(inventory, "-e", json.dumps(extra))
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]
    proc, _ = play(inventory)  # back to one instance per GPU
    assert proc.returncode == 0, proc.stdout[-3000:]
    wait_healthy()


# Bad input: its breadth (every class of bad value) is tests/unit/roles/test_bad_input.py's; here, runs that several
# bad settings share, side by side, refused with every message and the CT left byte for byte as it was: the settings'
# own check, the model's room in /dev/shm read in the CT (the staging script), a key in plain text on the command
# line.
REFUSED = {
    "settings": (
        {
            "sglang_services_port_base": 65530,
            "sglang_services_mem_fraction_static": 1.5,
            "sglang_services_restart_batch": -1,
            "sglang_services_progress_interval": -20,
            "sglang_services_host": "0.0.0.0",
            "sglang_services_attention_backend": "fa5",
        },
        [
            "sglang_services_port_base 65530 (and sglang_services_nccl_port_base 33000) plus the highest GPU index 7",
            "sglang_services_mem_fraction_static is 1.5; it must be",
            "sglang_services_restart_batch is -1; it must be 0",
            "sglang_services_progress_interval is -20; it must be 0 (one silent",
            "sglang_services_host 0.0.0.0 is reachable from other machines and the servers have no key: set",
            "sglang_services_attention_backend: --attention-backend: 'fa5' is not one of its choices",
        ],
    ),
    "model too big": (
        {"sglang_services_model_source": "/srv/big-model"},
        ["not enough room in /dev/shm for the model: it needs 2.0 GiB"],
    ),
    "plain-text key": (
        {"sglang_services_api_key": "plain-text-key"},
        ["sglang_services_api_key is written in plain text (an inventory, a vars file, a playbook or the command"],
    ),
}


@pytest.fixture(scope="module")
def refused(inventory):
    """Each REFUSED run, side by side, and the CT before and after them all."""
    # the router left out for the key: this is the services' own check of it (test_router.py has the router's)
    arguments = [
        (inventory, *(["--skip-tags=router"] if "sglang_services_api_key" in extra else []), "-e", json.dumps(extra))
        for extra, _ in REFUSED.values()
    ]
    return refused_side_by_side(play, arguments, lambda: (in_ct(VMID, SNAPSHOT).stdout, ct_state(VMID)))


@pytest.mark.parametrize("case", list(REFUSED))
def test_bad_input_fails_before_any_change(refused, case):
    runs, before, after = refused
    assert_refused(runs[list(REFUSED).index(case)], REFUSED[case][1])
    assert after == before


# -- faults during a converge (issue 23 part 5): each run fails naming the cause, a re-run with it gone converges.
#    These come last: they leave the model source and the stand-in plan the last one set.

FAULT_MODEL = "/srv/model-faults"
FAULT_SOURCE = {"sglang_services_model_source": FAULT_MODEL}
# Waits in the CT for the staging copy to start (its .partial directory), then makes the fault happen under it.
DURING_THE_COPY = """
import os, signal, subprocess, sys, time
deadline = time.monotonic() + 120
while not os.path.isdir("/dev/shm/stand-in.partial"):
    if time.monotonic() > deadline:
        sys.exit("the staging copy never started")
    time.sleep(0.0005)
# the copy stopped while the fault is made (the pattern built here, so that pgrep does not find this script)
copy = subprocess.run(["pgrep", "-o", "-f", "-".join(["sglang", "stage", "model.py --source"])],
                      capture_output=True, text=True).stdout.split()
os.kill(int(copy[0]), signal.SIGSTOP)
try:
    if sys.argv[1] == "vanish":  # as an unmounted storage: the directory is gone
        os.rename("/srv/model-faults", "/srv/model-faults.unmounted")
    else:  # something else writes to /dev/shm until it is full
        fd = os.open("/dev/shm/gpulxc-test-filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while True:
                os.write(fd, bytes(1 << 20))
        except OSError as error:
            print("filled:", error, flush=True)
        os.close(fd)
finally:
    os.kill(int(copy[0]), signal.SIGCONT)
print("fault made", flush=True)
"""


def play_during_the_copy(inventory, fault):
    watcher = subprocess.Popen(
        ["/usr/sbin/pct", "exec", str(VMID), "--", "python3", "-c", DURING_THE_COPY, fault],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        proc, _ = play(inventory, "-e", json.dumps(FAULT_SOURCE))
    finally:
        said = watcher.communicate(timeout=130)[0]
    assert "fault made" in said, said
    return proc, " ".join(proc.stdout.split())


def test_the_model_source_vanishing_or_dev_shm_filling_during_staging_fails_naming_it_and_a_rerun_converges(inventory):
    """A 256 MiB model in 128 files: the source vanishes under the copy, then /dev/shm fills up under it. Each run
    fails saying so, how far the copy got, and that the previous copy is still there (room for both: it stays until
    the new one is whole); nothing half copied is left. The fault gone, a re-run stages the model."""
    in_ct(
        VMID,
        f"mkdir -p {FAULT_MODEL} && cp /mnt/models/stand-in/config.json {FAULT_MODEL}/"
        f" && for i in $(seq -w 0 127); do head -c 2M /dev/zero >{FAULT_MODEL}/w-$i.bin; done",
    )
    still_staged = "cmp /mnt/models/stand-in/model.safetensors /dev/shm/stand-in/model.safetensors"
    nothing_half = "test ! -e /dev/shm/stand-in.partial && test ! -e /dev/shm/stand-in.previous"
    try:
        proc, out = play_during_the_copy(inventory, "vanish")
        assert proc.returncode != 0, proc.stdout[-3000:]
        assert f"the model source {FAULT_MODEL} vanished during the copy, after " in out, proc.stdout[-3000:]
        assert "of 129 files" in out and "/dev/shm/stand-in still holds the previous copy" in out, out[-3000:]
        assert in_ct(VMID, f"{still_staged} && {nothing_half}").returncode == 0
        in_ct(VMID, f"mv {FAULT_MODEL}.unmounted {FAULT_MODEL}")

        proc, out = play_during_the_copy(inventory, "fill")
        assert proc.returncode != 0, proc.stdout[-3000:]
        assert "/dev/shm filled up during the copy of the model, after " in out, proc.stdout[-3000:]
        assert "(the largest entries now: /dev/shm/gpulxc-test-filler (" in out, out[-3000:]
        assert in_ct(VMID, f"{still_staged} && {nothing_half}").returncode == 0
    finally:
        in_ct(
            VMID,
            f"rm -f /dev/shm/gpulxc-test-filler; test -d {FAULT_MODEL} || mv {FAULT_MODEL}.unmounted {FAULT_MODEL}",
        )
    proc, changed = play(inventory, "-e", json.dumps(FAULT_SOURCE))
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert in_ct(VMID, f"cmp {FAULT_MODEL}/w-127.bin /dev/shm/stand-in/w-127.bin && {nothing_half}").returncode == 0
    wait_healthy()


STAGING = f"sglang_services: staging {FAULT_MODEL} in /dev/shm/stand-in"


def test_a_slowed_model_copy_prints_its_progress_every_interval(inventory):
    """The staged model gone from /dev/shm: the run copies it again (256 MiB in 129 files), the copy slowed to run
    3 ms a second for 30 s (1 ms let nothing through on a loaded machine); the wait prints a line every 5 s
    (sglang_services_progress_interval) with the copy growing of its total, the last one saying it ended; a re-run
    changes nothing."""
    in_ct(VMID, "rm -rf /dev/shm/stand-in")
    extra = json.dumps({**FAULT_SOURCE, "sglang_services_progress_interval": 5})
    with slowed_down(VMID, "sglang-stage-model.py --source", 30, 3) as said:
        proc, changed = play(inventory, "-e", extra)
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert "slowed " in said[0], said
    lines = job_lines(proc, STAGING)
    print(lines)
    assert len(lines) >= 4 and lines[-1][0].endswith("(ended)"), proc.stdout[-3000:]
    waited = [0] + [seconds for _, seconds in lines]
    assert max(b - a for a, b in itertools.pairwise(waited)) <= 8, waited
    # while it runs, <model>.partial grows towards the source's size; once renamed into place, the model is there
    copying = re.compile(r"copying ([0-9.]+ [KMG]?i?B) of 256.0 MiB, in place ([0-9.]+ [KMG]?i?B)")
    sizes = [tuple(map(byte_size, copying.match(line).groups())) for line, _ in lines]
    copied = [partial for partial, _ in sizes[:-1]]
    assert copied == sorted(copied) and copied[-1] > 0 and sizes[-1] == (0, 256 << 20), lines
    assert in_ct(VMID, f"cmp {FAULT_MODEL}/w-127.bin /dev/shm/stand-in/w-127.bin").returncode == 0
    proc, changed = play(inventory, "-e", json.dumps(FAULT_SOURCE))
    assert proc.returncode == 0 and changed == 0, changed_tasks(proc)


def test_the_container_restarted_during_a_converge_fails_naming_it_and_a_rerun_converges(inventory):
    """pct reboot from the node while the run restarts the instances one at a time (instance 0 takes 15 s to load, so
    the reboot lands in its health wait): the run fails saying the CT stopped or restarted under the task, not
    that an instance crashed; the CT's boot brings its servers back by itself; a re-run converges."""
    plan = {"0": {"load_s": 15, "warmup_s": 1}}
    extra = json.dumps(
        {**FAULT_SOURCE, "sglang_services_restart_batch": 1, "sglang_services_environment": standin_environment(plan)}
    )
    # the reboot once the run waits for instance 0's health (its output read as it comes: the restart itself, not
    # another change of its main process, decides when)
    argv, env = playbook_command("site.yml", inventory, "ct970", "--tags=services", "-e", extra)
    run = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=dict(env, PYTHONUNBUFFERED="1")
    )
    said, rebooted = [], []
    try:
        for line in run.stdout:
            said.append(line)
            if not rebooted and re.match(
                r"TASK \[gpulxc\.sglang\.sglang_services : Wait for the health of sglang@0\]", line
            ):
                rebooted.append(pct("reboot", VMID, check=False))
    finally:
        run.wait(timeout=1800)
    proc = subprocess.CompletedProcess(argv, run.returncode, "".join(said), "")
    assert rebooted and rebooted[0].returncode == 0, (rebooted, proc.stdout[-3000:])
    out = " ".join(proc.stdout.split())
    assert proc.returncode != 0, proc.stdout[-3000:]
    # the health wait sees systemd stopping the servers, or the channel is lost with the task under it
    causes = (
        "the container is shutting down (a shutdown or a reboot",
        "restarted while the task ran (it has been up",
        "stopped under the task (a shutdown or a reboot",
    )
    assert any(cause in out for cause in causes), proc.stdout[-3000:]
    assert "systemd gave up on them" not in out, proc.stdout[-3000:]
    wait_healthy(deadline_s=120)  # the CT's own boot: staging unit, then the 8
    proc, changed = play(inventory, "-e", extra)
    assert proc.returncode == 0, proc.stdout[-3000:]
    if changed:
        proc, changed = play(inventory, "-e", extra)
        assert proc.returncode == 0 and changed == 0, changed_tasks(proc)


# -- every module's EXAMPLES as written (issue 24), last: they drain, restart and write beside the services.
#    Only the example's site values are replaced, by the lab's: each pair must be in the example as written, so an
#    example that changes is run again as it then reads.
EXAMPLE_VMID = 979
LAB_UV = "http://127.0.0.1:3141/files/uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
EXAMPLE_UV = "https://files.pythonhosted.org/packages/.../uv-0.13.9-py3-none-manylinux_2_17_x86_64.whl"
NODE = socket.gethostname().split(".")[0]  # the lab node's Proxmox VE name (lab/setup: hostname -s)
SITE = {
    "container_info": [],
    "cuda_toolkit_info": [],
    "file_set": [("/opt/cuda", "/opt/gpulxc-example")],
    "gpu_capability": [],
    "jit_cache": [("/var/cache/sglang/.cache/flashinfer", "/var/cache/sglang/.cache/flashinfer")],
    "job_progress": [("/srv/models/Qwen3-8B", "/mnt/models/stand-in"), ("/dev/shm/Qwen3-8B", "/dev/shm/example-copy")],
    "pct_config": [
        ("vmid: 200", f"vmid: {EXAMPLE_VMID}"),
        ("delegate_to: pve1", "delegate_to: lab-pve"),
        ("local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", TEMPLATE),
        ("rootfs: local-lvm:200", "rootfs: local-lvm:4"),
    ],
    "pct_info": [
        ("vmid: 200", f"vmid: {EXAMPLE_VMID}"),
        ("delegate_to: pve1", "delegate_to: lab-pve"),
        ("local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", TEMPLATE),
    ],
    "pve_cluster_info": [
        ("pve1.example.com", "127.0.0.1"),
        ("vmid: 200", f"vmid: {EXAMPLE_VMID}"),
        ("node: pve1", f"node: {NODE}"),
    ],
    "sglang_health": [
        ("127.0.0.1:30000", "127.0.0.1:32000"),
        ("127.0.0.1:30001", "127.0.0.1:32001"),
        ("chat: Qwen3-8B", "chat: stand-in"),
    ],
    "sglang_units_info": [],
    "smg_workers": [("127.0.0.1:30003", "127.0.0.1:32003")],
    "stack_info": [],
    "uv_stack": [
        ("venv: /opt/sglang/venv", "venv: /opt/gpulxc-example/venv"),
        ("dir: /etc/sglang/stack", "dir: /etc/gpulxc-example/stack"),
    ],
    "wheelhouse": [
        ("dest: /srv/wheelhouse", 'dest: "{{ example_dir }}/wheelhouse"'),
        ("https://pypi.org/simple", "http://127.0.0.1:3141/simple"),
        (EXAMPLE_UV, LAB_UV),
    ],
}
# where an example runs: in the CT, on the controller (a wheelhouse builder)
ON_CONTROLLER = {"wheelhouse"}


def examples(module):
    tree = ast.parse((REPO / "plugins/modules" / f"{module}.py").read_text())
    return next(
        node.value.value for node in tree.body if isinstance(node, ast.Assign) and node.targets[0].id == "EXAMPLES"
    )


@pytest.fixture
def example_site(tmp_path):
    """The playbook directory of the examples: the file_set example's template (the CT's own unit, so that writing
    it changes nothing), pve_cluster_info's CA, the API stand-in on 8006 with the example's user and token id."""
    unit = in_ct(VMID, "cat /etc/systemd/system/sglang@.service").stdout
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates/sglang@.service.j2").write_text("{% raw %}" + unit + "{% endraw %}")
    (tmp_path / "files").mkdir()
    state = Path("/var/lib/gpulxc-lab/api")
    (tmp_path / "files/pve-root-ca.pem").write_bytes((state / "pve-ssl.pem").read_bytes())
    (tmp_path / "token").write_text("ansible@pve!audit=00000000-0000-4000-8000-0000000000aa\n")
    api = subprocess.Popen(
        [
            "/usr/bin/python3",
            "-m",
            "pve.api",
            "--port",
            "8006",
            "--cert",
            str(state / "pve-ssl.pem"),
            "--key",
            str(state / "pve-ssl.key"),
            "--token-file",
            str(tmp_path / "token"),
        ],
        env=dict(os.environ, PYTHONPATH="/usr/local/lib/gpulxc-lab"),
    )
    # uv_stack's example keeps a venv that uv_venv made: one of its own, beside the services' stack
    in_ct(VMID, "/usr/local/bin/uv venv -q --python /usr/bin/python3 /opt/gpulxc-example/venv")
    uv = next(Path("/var/lib/gpulxc-lab/index/files").glob("uv-0.13.9-*.whl"))
    yield {
        "dir": tmp_path,
        "uv_sha256": hashlib.sha256(uv.read_bytes()).hexdigest(),
        "secret": "00000000-0000-4000-8000-0000000000aa",
    }
    api.terminate()
    api.wait(10)
    destroy(EXAMPLE_VMID)
    in_ct(VMID, "rm -rf /opt/gpulxc-example /etc/gpulxc-example /etc/sglang/api-key /dev/shm/example-copy")


@pytest.mark.parametrize("module", sorted(SITE))
def test_every_modules_examples_run_as_written(inventory, example_site, module):
    text = examples(module)
    for written, lab in SITE[module]:
        assert written in text, f"{module}'s EXAMPLES no longer say {written!r}: update SITE"
        text = text.replace(written, lab)
    if module == "wheelhouse":  # the lab index's uv wheel, not the example's
        text = text.replace(
            "d7f459fe4fd247d830351c75686d3996ace3c6f3f728eb0e85a30b7ada0cef19", example_site["uv_sha256"]
        )
    tasks = yaml.safe_load(text)
    host = "localhost" if module in ON_CONTROLLER else "ct970"
    playbook = example_site["dir"] / f"{module}.yml"
    facts = [{"ansible.builtin.setup": {"gather_subset": ["!all", "!min", "local"]}}] if "ansible_local" in text else []
    play_ = {"name": f"{module}'s EXAMPLES", "hosts": host, "gather_facts": False, "pre_tasks": facts, "tasks": tasks}
    playbook.write_text(yaml.safe_dump([play_], sort_keys=False))
    extra = {
        "vaulted_key": "example-key-0123456789",
        "vault_pve_audit_token": example_site["secret"],
        "example_dir": str(example_site["dir"]),
        "ansible_python_interpreter": sys.executable,
    }
    if host != "localhost":
        extra.pop("ansible_python_interpreter")
    argv, env = playbook_command(str(playbook), inventory, f"{host},lab-pve", "-e", json.dumps(extra))
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=example_site["dir"], env=env)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert re.search(rf"{host}\s*:\s*ok=[1-9]", proc.stdout), proc.stdout[-2000:]
    assert "example-key-0123456789" not in proc.stdout  # file_set's secret: no_log
