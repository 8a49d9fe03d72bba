#!/usr/bin/env python3
"""Benchmark of site.yml in the lab (not a test: it prints one table and asserts nothing but success).

On a fresh lab CT (ct995: ports 38000 + i, the router on 8995; lab CTs share the host's network):
fresh converge from an empty node; no-op re-runs over the collection's connection (gpulxc.sglang.pct_ssh)
and the same play over the stock community.proxmox.proxmox_pct_remote, three of each interleaved after
the converge's writes are flushed (their medians, the ratio of the medians, and each pair's ratio); then
the instances' time to all healthy on a cold JIT cache (instance 0 alone, then the rest) and on a warm one
(all together), each against its bound from the single-instance times (the stand-in servers get staggered
load/warm-up delays, as in the services suite), and the JIT builds when all 8 start at the same moment on
an empty cache (the stand-in logs each build it starts).
Usage, as root with the lab built (`make lab`): .venv/bin/python tools/benchmark_site.py
`--against CHECKOUT`: instead, after the converge, no-op re-runs of this checkout's site.yml and of CHECKOUT's (another
commit of the collection, with its collection path: a worktree), interleaved, then this checkout's over the stock
connection: what a change of the roles costs the no-op re-run, and this checkout's ratio to the stock connection.
Each checkout rewrites what the other publishes in another shape (a local fact), so their runs may each change a task.
`--preload N`: instead, after the converge, N no-op re-runs with the channel's preload on and N with it off
(`proxmox_pct_channel_preload=false`), interleaved so that a change of the machine's load hits both alike:
the preload's gain on its own, at site.yml level (docs/connection.md).
"""

import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VMID = 995
NAME = f"ct{VMID}"
PLAN = {
    str(i): {"load_s": load, "warmup_s": warm}
    for i, (load, warm) in enumerate([(3, 1), (1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (2, 2), (1, 1)])
}
DELAY = {int(i): p["load_s"] + p["warmup_s"] for i, p in PLAN.items()}
# the JIT caches of the CT's one stack (a shell glob: each stack has its own, and this CT has one)
JIT = "/var/cache/sglang/stacks/*"
BUILDS = f"{JIT}/.cache/flashinfer/0.6.11.post1/120a/gpulxc-standin-builds.log"
ALL_HEALTHY = (
    'import urllib.request as u; [u.urlopen(f"http://127.0.0.1:{38000 + i}/health", timeout=5) for i in range(8)]'
)
STOCK = ("-e", "lab_pct_connection=community.proxmox.proxmox_pct_remote")
NO_PRELOAD = ("-e", "proxmox_pct_channel_preload=false")
PAIRS = 3  # no-op re-runs over each connection, interleaved
SETTLE_S = 30


def pct(*args):
    return subprocess.run(["/usr/sbin/pct", *map(str, args)], capture_output=True, text=True, check=False)


def in_ct(script):
    return pct("exec", VMID, "--", "/bin/bash", "-c", script)


def site(inventory, *args, checkout=REPO, environment=None, output=None):
    """(seconds, ok, changed) of one site.yml run (of the collection in `checkout`); exits on failure."""
    started = time.monotonic()
    proc = subprocess.run(
        [
            str(REPO / ".venv/bin/ansible-playbook"),
            "site.yml",
            "-i",
            "inventories/lab",
            "-i",
            str(inventory),
            "-l",
            NAME,
            *args,
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=checkout,
        env=dict(
            os.environ,
            ANSIBLE_CONFIG=str(Path(checkout) / "ansible.cfg"),
            ANSIBLE_FORCE_COLOR="false",
            **(environment or {}),
        ),
    )
    took = time.monotonic() - started
    if output is not None:
        output.append(proc.stdout)
    recap = re.search(rf"{NAME}\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=0\s+failed=0", proc.stdout)
    if proc.returncode != 0 or not recap:
        sys.exit(f"site.yml failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return took, int(recap.group(1)), int(recap.group(2))


def start_times(since):
    """{GPU index: (started, ready)} from each instance's journal (systemd's Started, the server's fired up)."""
    times = {}
    for i in range(8):
        out = in_ct(f"journalctl -u sglang@{i}.service -o json --since @{since:.0f} --no-pager").stdout
        started = ready = None
        for entry in map(json.loads, out.splitlines()):
            stamp = int(entry["__REALTIME_TIMESTAMP"]) / 1e6
            message = entry.get("MESSAGE") or ""
            if message.startswith("Started ") and stamp >= since:
                started, ready = stamp, None
            elif "fired up and ready to roll" in message and started is not None:
                ready = stamp
        times[i] = (started, ready)
    return times


def against_rows(inventory, other):
    """Rows of no-op re-runs of this checkout and of `other`, interleaved, then this one over the stock connection."""
    os.sync()
    time.sleep(SETTLE_S)
    runs = {"this": [], "other": [], "stock": []}
    tasks = {}
    for _ in range(PAIRS):
        for name, extra, checkout in (("this", (), REPO), ("other", (), other)):
            took, ok, changed = site(inventory, *extra, checkout=checkout)
            runs[name].append(took)
            tasks[name] = (ok, changed)
    for _ in range(PAIRS):
        took, ok, changed = site(inventory, *STOCK)
        runs["stock"].append(took)
        tasks["stock"] = (ok, changed)
    mid = {name: sorted(times)[PAIRS // 2] for name, times in runs.items()}
    label = {"this": f"this checkout ({REPO})", "other": f"{other}", "stock": "this checkout, stock connection"}
    rows = [
        (
            f"no-op re-run, {label[name]}, median",
            f"{mid[name]:.1f} s",
            f"{tasks[name][0]} tasks, {tasks[name][1]} changed",
            f"{mid[name] / tasks[name][0] * 1000:.0f} ms/task; runs: " + " ".join(f"{t:.1f}" for t in runs[name]),
        )
        for name in ("this", "other", "stock")
    ]
    pairs = " ".join(f"{a / b:.2f}" for a, b in zip(runs["this"], runs["other"], strict=True))
    rows.append(("this / other, medians", f"{mid['this'] / mid['other']:.3f}", "", f"pairs: {pairs}"))
    rows.append(("this / stock, medians", f"{mid['this'] / mid['stock']:.3f}", "", ""))
    # where a no-op's time goes: ansible.posix.profile_tasks, one run of each checkout, its slowest tasks
    for name, checkout in (("this", REPO), ("other", other)):
        printed = []
        site(
            inventory,
            checkout=checkout,
            environment={"ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks"},
            output=printed,
        )
        slowest = [line for line in printed[0].splitlines() if re.search(r" -+ \d+\.\d+s$", line)][:12]
        print(f"--- profile_tasks, {label[name]}:\n" + "\n".join(slowest), flush=True)
    return rows


def noop_rows(inventory):
    """Rows of the no-op re-runs over both connections: medians of interleaved pairs, and their ratio."""
    rows = []
    # interleaved pairs, medians: one sample of each on a shared 2-core VM varies by 10 % and more; first
    # the converge's writes flushed (a re-run right after it runs beside their write-back, ~2 s slower)
    os.sync()
    time.sleep(SETTLE_S)
    ours, stock = [], []
    for _ in range(PAIRS):
        took, ok, changed = site(inventory)
        ours.append(took)
        took, stock_ok, stock_changed = site(inventory, *STOCK)
        stock.append(took)
    mid, stock_mid = sorted(ours)[PAIRS // 2], sorted(stock)[PAIRS // 2]
    ours_runs, stock_runs = (" ".join(f"{t:.1f}" for t in runs) for runs in (ours, stock))
    rows.append(
        (
            "no-op re-run (gpulxc.sglang.pct_ssh), median",
            f"{mid:.1f} s",
            f"{ok} tasks, {changed} changed",
            f"{mid / ok * 1000:.0f} ms/task; runs: {ours_runs}",
        )
    )
    rows.append(
        (
            "no-op re-run (community.proxmox.proxmox_pct_remote), median",
            f"{stock_mid:.1f} s",
            f"{stock_ok} tasks, {stock_changed} changed",
            f"{stock_mid / stock_ok * 1000:.0f} ms/task; runs: {stock_runs}",
        )
    )
    rows.append(
        (
            "no-op ratio pct_ssh / stock (medians)",
            f"{mid / stock_mid:.3f}",
            "target <= 0.17 (issue 20), <= 20 s",
            "per pair: " + " ".join(f"{a / b:.3f}" for a, b in zip(ours, stock, strict=True)),
        )
    )
    return rows


def preload_rows(inventory, runs):
    """Rows of the preload's A/B: the median no-op re-run with it on and off, and their difference."""
    on, off = [], []
    for _ in range(runs):
        on.append(site(inventory)[0])
        off.append(site(inventory, *NO_PRELOAD)[0])
    on.sort()
    off.sort()
    mid_on, mid_off = on[runs // 2], off[runs // 2]
    return [
        ("no-op re-run, preload on (median)", f"{mid_on:.1f} s", " ".join(f"{t:.1f}" for t in on), ""),
        ("no-op re-run, preload off (median)", f"{mid_off:.1f} s", " ".join(f"{t:.1f}" for t in off), ""),
        ("preload's gain (off - on)", f"{mid_off - mid_on:.1f} s", "decision threshold 2 s", ""),
    ]


def main():
    runs = int(sys.argv[sys.argv.index("--preload") + 1]) if "--preload" in sys.argv else 0
    if os.geteuid() != 0 or not Path("/usr/sbin/pct").exists():
        sys.exit("run as root with the lab built (make lab)")
    pct("destroy", VMID, "--force", "1")
    with tempfile.TemporaryDirectory() as tmp:
        inventory = Path(tmp) / f"{NAME}.yml"
        inventory.write_text(
            json.dumps(
                {
                    "sglang_containers": {
                        "hosts": {
                            NAME: {
                                "proxmox_vmid": VMID,
                                "pct_container_node": "lab-pve",
                                "sglang_services_port_base": 38000,
                                "sglang_services_nccl_port_base": 39000,
                                "sglang_router_port": 8995,
                                "sglang_router_prometheus_port": 29995,
                            }
                        }
                    }
                }
            )
        )
        rows = []
        took, ok, changed = site(inventory)
        rows.append(("fresh converge from an empty node", f"{took:.1f} s", f"{ok} tasks, {changed} changed", ""))
        if "--against" in sys.argv:
            rows += against_rows(inventory, Path(sys.argv[sys.argv.index("--against") + 1]).resolve())
            pct("destroy", VMID, "--force", "1")
            return print_rows(rows)
        if runs:
            rows += preload_rows(inventory, runs)
            pct("destroy", VMID, "--force", "1")
            return print_rows(rows)
        rows += noop_rows(inventory)

        extra = json.dumps({"sglang_services_environment": {"GPULXC_LAB_STANDIN_PLAN": json.dumps(PLAN)}})
        in_ct(f"systemctl stop sglang@{{0..7}}.service && rm -rf {JIT}/.cache/flashinfer")
        since = time.time()
        site(inventory, "--tags", "services", "-e", extra)
        cold = start_times(since)
        t0 = cold[0][1] - cold[0][0]
        cold_total = max(ready for _, ready in cold.values()) - cold[0][0]
        others = max(DELAY[i] for i in range(1, 8))
        rows.append(
            (
                "cold: all 8 healthy (instance 0 builds the JIT kernels alone)",
                f"{cold_total:.1f} s",
                f"bound {t0:.1f} + {others} + 10 = {t0 + others + 10:.1f} s",
                f"one after another: {t0 + sum(DELAY[i] for i in range(1, 8)):.1f} s",
            )
        )

        in_ct("systemctl stop sglang@{0..7}.service")
        since = time.time()
        site(inventory, "--tags", "services", "-e", extra)
        warm = start_times(since)
        warm_total = max(ready for _, ready in warm.values()) - min(start for start, _ in warm.values())
        rows.append(
            (
                "warm: all 8 healthy (together)",
                f"{warm_total:.1f} s",
                f"bound {max(DELAY.values())} + 10 = {max(DELAY.values()) + 10} s",
                f"one after another: {sum(DELAY.values())} s",
            )
        )

        in_ct(f"systemctl stop sglang@{{0..7}}.service && rm -rf {JIT}/.cache/flashinfer")
        in_ct("systemctl start sglang@{0..7}.service")  # all 8 at the same moment, as at boot
        deadline = time.monotonic() + 120
        while in_ct(f"python3 -c '{ALL_HEALTHY}'").returncode:
            if time.monotonic() > deadline:
                sys.exit("the 8 instances started together did not become healthy")
            time.sleep(1)
        builds = len(in_ct(f"cat {BUILDS}").stdout.splitlines())
        rows.append(("JIT builds: 8 started together on an empty cache", str(builds), "target 1", ""))
        site(inventory)  # back to the inventory's settings
    pct("destroy", VMID, "--force", "1")
    print_rows(rows)


def print_rows(rows):
    print(
        f"site.yml in the lab, {time.strftime('%Y-%m-%d')}: {os.cpu_count()} cores, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}"
    )
    print("| measure | time | against | note |\n|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
