"""Tests of the lab's stand-ins: they are the ground truth every later suite relies on.

Tests marked `lxc` drive real LXC containers through the installed /usr/sbin/pct and need root and a
built lab (`lab/setup`); the test command builds it first.
"""

import concurrent.futures
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "lab"))

TEMPLATE = "local:vztmpl/debian-12-gpulxclab_12.0-1_amd64.tar.zst"
# A site's own template with jit_toolchain's packages and the router front's (nginx, openssl): the offline CT's, and
# the CTs of the suites about the servers and the router, whose apt installs test_drift.py and test_fleet.py show
JIT_TEMPLATE = "local:vztmpl/debian-12-gpulxclab-jit_12.0-2_amd64.tar.zst"


def pytest_configure(config):
    # tools/test runs these as the suite pypi, beside the lab: they wait on PyPI, not on the lab
    config.addinivalue_line("markers", "pypi: asks PyPI and needs no lab")
    # tools/test runs the tests marked lab_alone one after another, then the rest in lanes side by side: each lab
    # file's CTs, ports and package index are its own, but these change what every CT on the node meets
    config.addinivalue_line(
        "markers",
        "lab_alone: changes what every CT on the lab node meets (the lab itself, a node reboot, the Proxmox release"
        " pct plays, nvidia-uvm's major, a GPU's device node, the node unit, whether any other CT passes GPUs); runs"
        " with no other lab test beside it",
    )


# The lab tests' clock (fast-clock.yml, an inventory every play of these tests reads): the stand-in's waits and smg's
# checks shorter than the real ones, which the roles' defaults and the stand-in keep (make demo, molecule).
FAST_CLOCK = Path(__file__).with_name("fast-clock.yml")
STANDIN_CLOCK = yaml.safe_load(FAST_CLOCK.read_text())["sglang_containers"]["vars"]["sglang_services_environment"]


def standin_environment(plan=None, clock=None):
    """sglang_services_environment for a test that sets its own: the lab's fast clock (or `clock`, {} for the real
    server's) and a stand-in plan ({GPU index: {load_s, warmup_s, fault, ...}}, lab/standin/sglang/launch_server.py)."""
    environment = dict(STANDIN_CLOCK)
    if clock is not None:
        environment["GPULXC_LAB_STANDIN_CLOCK"] = json.dumps(clock)
    if plan is not None:
        environment["GPULXC_LAB_STANDIN_PLAN"] = plan if isinstance(plan, str) else json.dumps(plan)
    return environment


def run_site(inventory, limit, *args):
    """`ansible-playbook site.yml` on one lab CT (the lab inventory plus a test's own), from the repository's
    ansible.cfg: the process and the changed count of the CT's recap line (None without one)."""
    return run_playbook("site.yml", inventory, limit, *args)


def playbook_command(playbook, inventory, limit, *args):
    """(argv, env) of `ansible-playbook <playbook>` on one lab CT, for subprocess.run or Popen with cwd=REPO."""
    argv = [
        str(REPO / ".venv/bin/ansible-playbook"),
        playbook,
        "-i",
        str(REPO / "inventories/lab"),
        "-i",
        str(FAST_CLOCK),
        "-i",
        str(inventory),
        "-l",
        limit,
        *args,
    ]
    return argv, dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="false")


def run_playbook(playbook, inventory, limit, *args):
    """`ansible-playbook <playbook>` as run_site runs site.yml."""
    argv, env = playbook_command(playbook, inventory, limit, *args)
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=REPO, env=env)
    recap = re.search(rf"{limit}\s*:\s*ok=\d+\s+changed=(\d+)", proc.stdout)
    return proc, int(recap.group(1)) if recap else None


def side_by_side(play, argument_lists, workers=3):
    """play(*arguments) for each list, run side by side: [(process, changed)] in the order given. For runs
    refused before any change: they only read, so they may share a CT, and their before/after comparison is one."""
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda arguments: play(*arguments), argument_lists))


def refused_side_by_side(play, argument_lists, snapshot):
    """Runs refused for bad input (their breadth: tests/unit/roles/test_bad_input.py), side by side, and
    `snapshot()` - what they must leave byte for byte as it was - before and after them all: (runs, before, after)."""
    before = snapshot()
    runs = side_by_side(play, argument_lists)
    return runs, before, snapshot()


def assert_refused(run, messages):
    """The run failed, changed nothing, and said each message (whitespace as the terminal folds it aside)."""
    proc, changed = run
    assert proc.returncode != 0 and changed == 0, proc.stdout[-3000:]
    said = " ".join(proc.stdout.split())
    missing = [message for message in messages if message not in said]
    assert not missing, (missing, proc.stdout[-3000:])


def changed_tasks(proc):
    """The names of the tasks that reported a change."""
    return re.findall(r"TASK \[([^\]]+)\][^\n]*\n(?:(?!TASK \[)[^\n]*\n)*?changed: ", proc.stdout)


def task_output(proc, name):
    """What a task printed: from its TASK line to the next task's ("" when it did not run)."""
    if f"TASK [{name}]" not in proc.stdout:
        return ""
    return proc.stdout.split(f"TASK [{name}]", 1)[1].split("\nTASK [", 1)[0]


def pct(*args, check=True, stdin=None):
    proc = subprocess.run(["/usr/sbin/pct", *map(str, args)], capture_output=True, text=True, check=False, stdin=stdin)
    if check and proc.returncode != 0:
        raise AssertionError(f"pct {' '.join(map(str, args))} failed ({proc.returncode}): {proc.stderr}")
    return proc


def pct_fails(*args, message, code=2):
    """pct refused: a die exits with errno (2 in the lab), a failed task with 255 (lab/pve/pct.py EXIT_*)."""
    proc = pct(*args, check=False)
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert message in proc.stderr, proc.stderr
    return proc


def conf_text(vmid):
    return Path(f"/etc/pve/lxc/{vmid}.conf").read_text()


# What a run refused for bad input must leave byte-for-byte as it was, besides the CT's config on the node: a
# listing of the container's software, configuration and units, their checksums, the units' states and their
# main processes (a unit restarted and back up has another main PID).
CT_STATE = (
    "find /opt/sglang /opt/smg /etc/sglang /etc/smg /etc/systemd/system -maxdepth 2 2>/dev/null | sort;"
    " find /etc/sglang /etc/smg /etc/systemd/system -maxdepth 1 -type f -exec md5sum {} + 2>/dev/null | sort;"
    " systemctl list-units --all --no-legend --plain 'sglang*' 'smg*' 2>/dev/null | while read -r unit rest; do"
    ' echo "$unit $rest MainPID=$(systemctl show -P MainPID "$unit")"; done'
)


def in_ct(vmid, script):
    """`bash -c script` in CT `vmid` (the process: its returncode, stdout and stderr; a failure raises nothing)."""
    return pct("exec", vmid, "--", "/bin/bash", "-c", script, check=False)


def main_pids(vmid, gpus=range(8)):
    """The main PIDs of the CT's sglang@N.service for each GPU N (a restarted unit has another)."""
    units = " ".join(f"sglang@{gpu}.service" for gpu in gpus)
    return in_ct(vmid, f"systemctl show -p MainPID --value {units}").stdout.split()


def ct_state(vmid):
    """(the CT's config, CT_STATE in the CT): the bad-input suites compare it before and after."""
    inside = pct("exec", vmid, "--", "/bin/bash", "-c", CT_STATE, check=False).stdout
    return conf_text(vmid), inside


def destroy(vmid):
    if Path(f"/etc/pve/lxc/{vmid}.conf").exists():
        pct("destroy", vmid, "--force", "1")


INDEX = Path("/var/lib/gpulxc-lab/index")  # the lab package index's tree (lab/index/build): simple/ and files/


@contextlib.contextmanager
def private_index(name, port):
    """A package index of one test file's own (test infrastructure): lab/index/serve on `port` over a hard-linked
    copy of the lab's index, with a log and a throttle file of its own, so that a test that takes a wheel away,
    tampers with one, slows the index or counts its downloads disturbs no other CT and sees no other CT's requests.
    Yields its url (for uv_venv_index_url), files (the wheels: replace one, never write into it: the copy's files are
    the lab index's), log and throttle."""
    root = Path(f"/var/lib/gpulxc-lab/test-index-{name}")
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    subprocess.run(["cp", "-al", str(INDEX), str(root / "index")], check=True)
    index = SimpleNamespace(
        url=f"http://127.0.0.1:{port}/simple",
        files=root / "index/files",
        log=root / "index.log",
        throttle=root / "index.throttle",
    )
    index.log.touch()
    server = subprocess.Popen(
        [
            "/usr/bin/python3",
            str(REPO / "lab/index/serve"),
            str(root / "index"),
            str(port),
            str(index.log),
            str(index.throttle),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=(root / "index.err").open("w"),
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(index.url + "/", timeout=2).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, (root / "index.err").read_text()
                time.sleep(0.1)
        index.log.write_text("")  # that probe's line
        yield index
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def lab_ready():
    if os.geteuid() != 0 or not Path("/usr/sbin/pct").exists():
        pytest.fail("the lab is not built: run lab/setup as root (the test command does)")
    return True


# Slows a process in a CT down (test infrastructure): waits for a process whose command line matches PATTERN (in
# the unit UNIT's cgroup when given), then lets it run RUN_MS of every second for SECONDS, by SIGSTOP and SIGCONT,
# and lets it go. With UNIT, every process of the unit's cgroup is slowed with it (a build's compilers too: ninja
# starts each in a process group of its own). The real process, really slowed: a copy or a build the play waits for.
SLOW_DOWN = """
import os, re, signal, sys, time
pattern, unit, seconds, run_ms = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
mine = {os.getpid(), os.getppid()}

def processes():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) in mine:
            continue
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ").decode(errors="replace")
            cgroup = open(f"/proc/{pid}/cgroup").read()
        except OSError:
            continue
        if not unit or f"/{unit}" in cgroup:
            yield int(pid), argv

def signal_all(pids, signum):
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass  # it ended

deadline = time.monotonic() + 600
while not (first := [pid for pid, argv in processes() if re.search(pattern, argv)]):
    if time.monotonic() > deadline:
        sys.exit("never started: " + pattern)
    time.sleep(0.001)
end, stops, slowed = time.monotonic() + seconds, 0, set()
while time.monotonic() < end and os.path.exists(f"/proc/{first[0]}"):
    pids = [pid for pid, _ in processes()] if unit else first[:1]
    signal_all(pids, signal.SIGSTOP)
    slowed.update(pids)
    stops += 1
    time.sleep(1 - run_ms / 1000)
    signal_all(pids, signal.SIGCONT)
    time.sleep(run_ms / 1000)
signal_all(slowed, signal.SIGCONT)
print(f"slowed {first[0]} ({stops} stops, {len(slowed)} processes)", flush=True)
"""


@contextlib.contextmanager
def slowed_down(vmid, pattern, seconds, run_ms, unit=""):
    """While the body runs (a play), the first process in CT `vmid` matching `pattern` is slowed down: yields a list
    that holds what the slowing said once it is over ("slowed PID (N stops)")."""
    said = []
    watcher = subprocess.Popen(
        [
            "/usr/sbin/pct",
            "exec",
            str(vmid),
            "--",
            "python3",
            "-c",
            SLOW_DOWN,
            pattern,
            unit,
            str(seconds),
            str(run_ms),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield said
    finally:
        try:
            said.append(watcher.communicate(timeout=seconds + 60)[0])
        except subprocess.TimeoutExpired:
            watcher.kill()
            said.append(watcher.communicate()[0])


def job_lines(proc, task):
    """[(line, seconds run)] of the progress lines a job wait (roles/gpulxc/tasks/job_wait.yml) named `task` printed."""
    line = re.escape(task) + r": ([^\n]*?) after (?:(\d+)m)?(\d+)s( \(ended\))?"
    found = re.findall(r"\(item=" + line + r"\)", proc.stdout)
    return [(line + ended, int(minutes or 0) * 60 + int(seconds)) for line, minutes, seconds, ended in found]


def byte_size(text):
    """Bytes of a size as job_progress writes it ("8.0 MiB", "512 B")."""
    number, unit = text.split()
    return int(float(number) * {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit])


class Streams:
    """Streamed chat completions through the router at `base`, 8 at a time, 2 s each (400 tokens), until stopped:
    a stream that ends without [DONE] was cut, an error or a non-200 answer was refused."""

    def __init__(self, base):
        self.base = base
        self.done, self.cut, self.refused, self.gpus = 0, 0, [], set()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(n,)) for n in range(8)]

    def run(self, n):
        while not self.stopping.is_set():
            message = {"role": "user", "content": f"{uuid.uuid4().hex} stream {n}"}
            body = json.dumps({"model": "stand-in", "stream": True, "max_tokens": 400, "messages": [message]})
            req = urllib.request.Request(
                self.base + "/v1/chat/completions", data=body.encode(), headers={"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(req, timeout=60) as response:
                    text = response.read().decode()
            except (OSError, urllib.error.URLError) as error:
                self.refused.append(str(error))
                time.sleep(0.2)  # no worker to route to: the router answers at once
                continue
            if text.rstrip().endswith("data: [DONE]"):
                self.done += 1
                self.gpus.add(text.split('"id": "gpulxc-standin-', 1)[1].split("-", 1)[0])
            else:
                self.cut += 1

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        for thread in self.threads:
            thread.join()
