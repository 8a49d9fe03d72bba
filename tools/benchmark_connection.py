"""Per-task overhead of the container connection plugins, measured side by side in one run.

    .venv/bin/python tools/benchmark_connection.py [--tasks 20] [--repeat 3] [--copy-mb 200]

Needs the lab (lab/setup, as root). On one lab CT (907), for gpulxc.sglang.pct_ssh and the stock
community.proxmox.proxmox_pct_remote: the wall time of a play of N `command: true` tasks minus an
empty play, per task; split into SSH, `pct exec` and module time, measured on their own:
- SSH: OpenSSH `ssh node true` over a warm ControlMaster (pct_ssh) / a paramiko connect + login and
  one exec channel per command (stock, which connects once per task in each worker);
- pct exec: `pct exec <vmid> -- true` on the node, times the execs per task (counted from -vvv); pct_ssh's
  channel (one `pct exec` per container, kept open) runs the commands with neither, and the module in a child
  of a Python that has imported what modules share: its row shows the channel's commands, and the module
  time is in the rest;
- module: the command module's AnsiballZ payload run in the CT, less one `pct exec`;
- Ansible: the rest (worker fork, templating, result handling).
Then a large-file copy with each plugin: wall time and the peak RSS of the largest process.
Prints a Markdown table (docs/benchmarks.md keeps the last one).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import paramiko
import yaml

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv/bin"
VMID = 907
TEMPLATE = "local:vztmpl/debian-12-gpulxclab_12.0-1_amd64.tar.zst"
PLUGINS = {
    "pct_ssh": "gpulxc.sglang.pct_ssh",
    "pct_ssh_plain": "gpulxc.sglang.pct_ssh",
    "stock": "community.proxmox.proxmox_pct_remote",
}
# pct_ssh_plain: the channel switched off (a plain `pct exec` over its own SSH session per command)
EXTRA = {"pct_ssh_plain": ("-e", "proxmox_pct_channel=false")}
LAB_SSH = "/var/lib/gpulxc-lab/ssh"


def sh(*cmd: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, check=True, **kwargs)


def timed(func, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def ensure_ct() -> None:
    status = subprocess.run(["/usr/sbin/pct", "status", str(VMID)], capture_output=True, text=True, check=False)
    if status.returncode != 0:
        sh("/usr/sbin/pct", "create", str(VMID), TEMPLATE, "--hostname", "bench", "--unprivileged", "0")
    if "running" not in status.stdout:
        sh("/usr/sbin/pct", "start", str(VMID))
    probe = ["/usr/sbin/pct", "exec", str(VMID), "--", "systemctl", "is-system-running"]
    for _ in range(60):
        state = subprocess.run(probe, capture_output=True, text=True, check=False).stdout.strip()
        if state in ("running", "degraded"):
            return
        time.sleep(1)
    raise SystemExit("benchmark CT did not boot")


def write_inventory(work: Path) -> Path:
    variables = {}
    for name in ("all.yml", "sglang_containers.yml"):
        variables.update(yaml.safe_load((REPO / "inventories/lab/group_vars" / name).read_text()))
    variables = {k: v for k, v in variables.items() if k.startswith("ansible_") and k != "ansible_connection"}
    path = work / "hosts.yml"
    path.write_text(json.dumps({"all": {"hosts": {"bench": {"proxmox_vmid": VMID}}, "vars": variables}}))
    return path


def write_play(work: Path, tasks: int) -> Path:
    task = {"name": "Run true", "ansible.builtin.command": "true", "changed_when": False}
    play = [{"name": "bench", "hosts": "bench", "gather_facts": False, "tasks": [task] * tasks}]
    path = work / f"play{tasks}.yml"
    path.write_text(yaml.safe_dump(play))
    return path


def playbook(inventory: Path, play: Path, name: str, *extra: str, env: dict | None = None) -> str:
    plugin = PLUGINS[name]
    proc = subprocess.run(
        [
            str(VENV / "ansible-playbook"),
            "-i",
            str(inventory),
            "-e",
            f"ansible_connection={plugin}",
            *EXTRA.get(name, ()),
            *extra,
            str(play),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), **(env or {})),
    )
    if proc.returncode != 0:
        raise SystemExit(f"{plugin}: {play.name} failed\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return proc.stdout


def ssh_warm(repeat: int) -> float:
    control = f"ControlPath={tempfile.gettempdir()}/gpulxc-bench-%C"
    base = [
        "ssh",
        "-p",
        "2222",
        "-i",
        f"{LAB_SSH}/id_ed25519",
        "-o",
        f"UserKnownHostsFile={LAB_SSH}/known_hosts",
        "-o",
        "ControlMaster=auto",
        "-o",
        "ControlPersist=60s",
        "-o",
        control,
        "root@127.0.0.1",
    ]
    sh(*base, "true")  # start the master
    return timed(lambda: sh(*base, "true"), repeat)


def paramiko_costs(repeat: int) -> tuple[float, float]:
    key = paramiko.Ed25519Key.from_private_key_file(f"{LAB_SSH}/id_ed25519")

    def connect():
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        client.connect("127.0.0.1", port=2222, username="root", pkey=key, look_for_keys=False, allow_agent=False)
        return client

    def connect_close():
        connect().close()

    client = connect()

    def channel():
        _, out, _ = client.exec_command("true")
        out.channel.recv_exit_status()

    costs = timed(connect_close, repeat), timed(channel, repeat)
    client.close()
    return costs


def module_cost(inventory: Path, work: Path, pct_exec: float, repeat: int) -> float:
    """Run the command module's AnsiballZ payload (kept by ANSIBLE_KEEP_REMOTE_FILES) in the CT."""
    out = playbook(inventory, write_play(work, 1), "stock", "-vvv", env={"ANSIBLE_KEEP_REMOTE_FILES": "1"})
    match = re.search(r"(/root/\.ansible/tmp/ansible-tmp-[^/\s'\"]+/AnsiballZ_command\.py)", out)
    if not match:
        raise SystemExit("could not find the AnsiballZ payload in the -vvv output")
    payload = match.group(1)
    run = ["/usr/sbin/pct", "exec", str(VMID), "--", "/usr/bin/python3", payload]
    total = timed(lambda: sh(*run), repeat)
    sh("/usr/sbin/pct", "exec", str(VMID), "--", "rm", "-rf", str(Path(payload).parent))
    return total - pct_exec


def execs_per_task(inventory: Path, work: Path, name: str) -> tuple[int, int]:
    """(commands with their own SSH session and pct exec, commands through pct_ssh's channel) of one task."""
    out = playbook(inventory, write_play(work, 1), name, "-vvv")
    channel = len(re.findall(r"^<[^>]+> PCT CHANNEL (?!not used)", out, re.MULTILINE))
    if name.startswith("pct_ssh"):
        return len(re.findall(r"^<[^>]+> PCT EXEC ", out, re.MULTILINE)), channel
    return len(re.findall(r"^<[^>]+> EXEC ", out, re.MULTILINE)), channel


def copy_peak(inventory: Path, plugin: str, src: Path) -> tuple[float, int]:
    measure = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        "subprocess.run(sys.argv[1:], check=True, capture_output=True); "
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    cmd = [
        str(VENV / "ansible"),
        "bench",
        "-i",
        str(inventory),
        "-e",
        f"ansible_connection={plugin}",
        "-m",
        "ansible.builtin.copy",
        "-a",
        f"src={src} dest=/root/{src.name} mode=0600",
    ]
    out = sh(
        str(VENV / "python"),
        "-c",
        measure,
        *cmd,
        cwd=REPO,
        env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg")),
    ).stdout.split()
    sh("/usr/sbin/pct", "exec", str(VMID), "--", "rm", "-f", f"/root/{src.name}")
    return float(out[0]), int(out[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--copy-mb", type=int, default=200)
    parser.add_argument("--keep", action="store_true", help="keep the benchmark CT")
    args = parser.parse_args()
    ensure_ct()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        inventory = write_inventory(work)
        empty, full = write_play(work, 0), write_play(work, args.tasks)
        pct_exec = timed(lambda: sh("/usr/sbin/pct", "exec", str(VMID), "--", "true"), 10)
        module = module_cost(inventory, work, pct_exec, 5)
        ssh_exec = ssh_warm(10)
        p_connect, p_channel = paramiko_costs(10)
        for name in PLUGINS:
            playbook(inventory, full, name)  # warm caches (and the ControlMaster, the channel)
            t_empty = timed(lambda: playbook(inventory, empty, name), args.repeat)  # noqa: B023
            t_full = timed(lambda: playbook(inventory, full, name), args.repeat)  # noqa: B023
            per_task = (t_full - t_empty) / args.tasks
            execs, channel = execs_per_task(inventory, work, name)
            ssh = execs * ssh_exec if name.startswith("pct_ssh") else p_connect + execs * p_channel
            # through the channel, the module runs in a child of a Python that imported what modules share
            module_here = None if channel else module
            rows[name] = {
                "play": t_full,
                "per_task": per_task,
                "execs": execs,
                "channel": channel,
                "ssh": ssh,
                "pct": execs * pct_exec,
                "module": module_here,
            }
            rows[name]["overhead"] = per_task - module
            rows[name]["ansible"] = per_task - (module_here or 0) - ssh - rows[name]["pct"]
        src = work / "big.bin"
        with open(src, "wb") as handle:
            for _ in range(args.copy_mb):
                handle.write(os.urandom(1 << 20))
        copies = {name: copy_peak(inventory, PLUGINS[name], src) for name in ("pct_ssh", "stock")}
    if not args.keep:
        sh("/usr/sbin/pct", "destroy", str(VMID), "--force", "1")

    ms = lambda seconds: f"{seconds * 1000:.0f}"  # noqa: E731
    print(
        f"Machine: {platform.node()}, {os.cpu_count()} cores, {platform.platform()}; "
        f"{args.tasks} tasks of `command: true`, median of {args.repeat} runs; lab pct (a Python stand-in, "
        "not Proxmox's Perl pct, whose start-up cost is not measured here)\n"
    )
    print(
        "| plugin | play of %d tasks (s) | per task (ms) | per task less a fresh module run (ms) "
        "| SSH + pct exec per task | channel commands per task | SSH (ms) | pct exec (ms) | module (ms) "
        "| Ansible, rest (ms) |" % args.tasks
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, row in rows.items():
        label = PLUGINS[name] + (" (channel off)" if name in EXTRA else "")
        cells = [label, f"{row['play']:.2f}", ms(row["per_task"]), ms(row["overhead"]), str(row["execs"])]
        cells += [str(row["channel"]), ms(row["ssh"]), ms(row["pct"])]
        cells += ["in the rest (preloaded)" if row["module"] is None else ms(row["module"]), ms(row["ansible"])]
        print("| " + " | ".join(cells) + " |")
    for name in ("pct_ssh", "pct_ssh_plain"):
        print(f"\nPer-task ratio {name} / stock: {rows[name]['per_task'] / rows['stock']['per_task']:.2f}")
    # the per-task ratio decides the exit status: with the channel the module runs preloaded, cheaper than
    # the fresh run subtracted for "overhead", so that ratio can go negative and tells nothing then
    ratio = rows["pct_ssh"]["per_task"] / rows["stock"]["per_task"]
    overhead = rows["pct_ssh"]["overhead"] / rows["stock"]["overhead"]
    print(f"\nOverhead ratio pct_ssh / stock: {overhead:.2f} (per task less a fresh module run; informative)")
    print(f"Per-task ratio pct_ssh / stock: {ratio:.2f} (target <= 0.33: the exit status)\n")
    print(f"| plugin | copy of {args.copy_mb} MiB: wall (s) | peak RSS of the largest process (MiB) |")
    print("|---|---|---|")
    for name, (wall, rss) in copies.items():
        print(f"| {PLUGINS[name]} | {wall:.1f} | {rss / 1024:.0f} |")
    return 0 if ratio <= 1 / 3 else 1


if __name__ == "__main__":
    sys.exit(main())
