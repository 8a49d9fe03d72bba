"""The container connection plugins, over the lab's sshd and pct, on a real LXC container.

Both the collection's gpulxc.sglang.pct_ssh and the stock community.proxmox.proxmox_pct_remote run the
common cases; the cases only ours gets right (shell quoting, no file held in memory) run on ours.
"""

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO, TEMPLATE, destroy, pct

VMID = 906
OURS = "gpulxc.sglang.pct_ssh"
STOCK = "community.proxmox.proxmox_pct_remote"
ANSIBLE = str(REPO / ".venv/bin/ansible")


@pytest.fixture(scope="module")
def inventory(lab_ready, tmp_path_factory):
    destroy(VMID)
    pct("create", VMID, TEMPLATE, "--hostname", "conntest", "--unprivileged", "0", "--rootfs", "local-lvm:4")
    pct("start", VMID)
    path = tmp_path_factory.mktemp("inv") / "hosts.yml"
    # the lab inventory's connection settings, with this CT
    path.write_text(
        json.dumps({"all": {"hosts": {"ct": {"proxmox_vmid": VMID}}, "vars": lab_vars()}}),
    )
    yield path
    destroy(VMID)


def lab_vars():
    variables = {}
    for name in ("all.yml", "sglang_containers.yml"):
        variables.update(yaml.safe_load((REPO / "inventories/lab/group_vars" / name).read_text()))
    return {k: v for k, v in variables.items() if k.startswith("ansible_")}


def ansible(inventory, plugin, module, args, check=True):
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
    )
    proc = subprocess.run(
        [ANSIBLE, "ct", "-i", str(inventory), "-e", f"ansible_connection={plugin}", "-m", module, "-a", args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=REPO,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{plugin} {module} {args}: rc={proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr}")
    result = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["ct"] if proc.stdout.startswith("{") else {}
    return proc, result


def ct_sha256(path):
    return pct("exec", VMID, "--", "sha256sum", path).stdout.split()[0]


@pytest.mark.parametrize("plugin", [OURS, STOCK])
def test_module_runs_in_the_container(inventory, plugin):
    _, result = ansible(inventory, plugin, "ansible.builtin.command", "cat /etc/hostname")
    assert result["stdout"] == "conntest"


@pytest.mark.parametrize("plugin", [OURS, STOCK])
@pytest.mark.parametrize("size", [1_000_000, 2_000_000])
def test_copy_and_fetch_round_trip(inventory, plugin, size, tmp_path):
    src = tmp_path / "blob"
    src.write_bytes(os.urandom(size))
    ansible(inventory, plugin, "ansible.builtin.copy", f"src={src} dest=/root/blob mode=0600")
    assert ct_sha256("/root/blob") == hashlib.sha256(src.read_bytes()).hexdigest()
    ansible(inventory, plugin, "ansible.builtin.fetch", f"src=/root/blob dest={tmp_path}/back/ flat=true")
    assert (tmp_path / "back/blob").read_bytes() == src.read_bytes()


def test_raw_command_line_runs_entirely_in_the_container(inventory):
    # The stock plugin hands `pct exec <id> -- <cmd>` to the node's shell unquoted, so `;`, `|` and
    # `>` in a raw command run on the node; ours quotes the command for the container's /bin/sh.
    marker = Path("/tmp/gpulxc-conntest-where")
    marker.unlink(missing_ok=True)
    ansible(inventory, OURS, "ansible.builtin.raw", f"hostname > {marker}; echo done")
    assert not marker.exists()
    assert pct("exec", VMID, "--", "cat", str(marker)).stdout.strip() == "conntest"


def peak_rss_of_copy(inventory, src, dest):
    """Peak RSS (KiB) of the largest process of one `ansible -m copy` run, measured in a fresh parent."""
    measure = "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True); "
    measure += "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    cmd = [
        ANSIBLE,
        "ct",
        "-i",
        str(inventory),
        "-e",
        f"ansible_connection={OURS}",
        "-m",
        "ansible.builtin.copy",
        "-a",
        f"src={src} dest={dest} mode=0600",
    ]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    python = str(REPO / ".venv/bin/python")
    out = subprocess.run([python, "-c", measure, *cmd], capture_output=True, text=True, check=True, cwd=REPO, env=env)
    return int(out.stdout.strip())


def test_large_copy_is_not_held_in_memory(inventory, tmp_path):
    small, big = tmp_path / "small", tmp_path / "big"
    small.write_bytes(os.urandom(1_000))
    with open(big, "wb") as handle:
        for _ in range(120):
            handle.write(os.urandom(1_000_000))
    baseline = peak_rss_of_copy(inventory, small, "/root/small")
    peak = peak_rss_of_copy(inventory, big, "/root/big")
    assert ct_sha256("/root/big") == hashlib.sha256(big.read_bytes()).hexdigest()
    # holding the 120 MB file would add at least 117,000 KiB to the peak
    assert peak - baseline < 30_000, f"peak RSS {peak} KiB for 120 MB, {baseline} KiB for 1 kB"
    pct("exec", VMID, "--", "rm", "-f", "/root/big")


@pytest.mark.parametrize(
    ("plugin", "message"),
    [
        (OURS, f"CT {VMID} is not running on 127.0.0.1: start it (pct start {VMID})"),
        # the stock plugin's report hides pct's reason (recorded here as the baseline)
        (STOCK, "Failed to create temporary directory."),
    ],
)
def test_stopped_container(inventory, plugin, message):
    pct("stop", VMID)
    try:
        proc, _ = ansible(inventory, plugin, "ansible.builtin.ping", "", check=False)
        assert proc.returncode != 0
        assert message in proc.stdout + proc.stderr
    finally:
        pct("start", VMID)


def verbose_run(inventory, *extra):
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    return subprocess.run(
        [ANSIBLE, "ct", "-i", str(inventory), "-e", f"ansible_connection={OURS}", "-vvv", *extra],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=REPO,
    )


def test_commands_go_through_one_channel_that_outlives_a_container_restart(inventory):
    first = verbose_run(inventory, "-m", "ansible.builtin.command", "-a", "cat /proc/1/comm")
    assert first.returncode == 0, first.stdout[-3000:]
    assert "PCT CHANNEL" in first.stdout
    assert "PCT EXEC" not in first.stdout  # no command needed its own SSH session and pct exec
    # the container restarts under the channel: the next command starts a new one (no error, no retry by hand)
    pct("stop", VMID)
    pct("start", VMID)
    again = verbose_run(inventory, "-m", "ansible.builtin.command", "-a", "cat /proc/1/comm")
    assert again.returncode == 0, again.stdout[-3000:]
    assert "systemd" in again.stdout


def test_two_runs_at_once_on_one_container_both_finish(inventory):
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    runs = []
    for i in range(2):
        runs.append(
            subprocess.Popen(
                [
                    ANSIBLE,
                    "ct",
                    "-i",
                    str(inventory),
                    "-e",
                    f"ansible_connection={OURS}",
                    "-vvv",
                    "-m",
                    "ansible.builtin.shell",
                    "-a",
                    f"sleep 3; echo run-{i}",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=env,
                cwd=REPO,
            )
        )
    outputs = [run.communicate(timeout=120)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    assert all(f"run-{i}" in out for i, out in enumerate(outputs))
    # one of them found the channel busy and ran with its own pct exec instead of waiting
    assert sum("PCT CHANNEL not used (busy)" in out for out in outputs) == 1


# An action that calls the connection's put_file/fetch_file directly (copy and fetch check the remote side
# before they transfer), so what pct push/pull say about a failed copy reaches the task.
TRANSFER_ACTION = """
from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        getattr(self._connection, args["op"] + "_file")(args["src"], args["dest"])
        result["changed"] = True
        return result
"""


@pytest.mark.parametrize(
    ("transfer", "reason"),
    [
        (
            ("put", "BIG", "/nonexistent/dir/x"),
            "failed to transfer file to /nonexistent/dir/x: pct: failed to create file: /nonexistent/dir/x: "
            "No such file or directory",
        ),
        (
            ("fetch", "/root/missing", "LOCAL"),
            "failed to fetch /root/missing: pct: failed to open /root/missing: No such file or directory",
        ),
    ],
)
def test_failing_pct_push_and_pull_fail_the_task_with_the_reason(inventory, tmp_path, transfer, reason):
    """pct push/pull exit 0 when the copy fails in their worker: pct_ssh reads their stderr."""
    op, src, dest = transfer
    actions = tmp_path / "actions"
    actions.mkdir()
    (actions / "gpulxc_lab_transfer.py").write_text(TRANSFER_ACTION)
    big = tmp_path / "big"
    big.write_bytes(os.urandom(1_000_000))  # above pct_transfer_threshold: through pct push
    src = str(big) if src == "BIG" else src
    dest = str(tmp_path / "fetched") if dest == "LOCAL" else dest
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_ACTION_PLUGINS=str(actions),
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
    )
    proc = subprocess.run(
        [
            ANSIBLE,
            "ct",
            "-i",
            str(inventory),
            "-e",
            f"ansible_connection={OURS}",
            "-m",
            "gpulxc_lab_transfer",
            "-a",
            json.dumps({"op": op, "src": src, "dest": dest}),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=REPO,
    )
    assert proc.returncode != 0, proc.stdout
    result = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["ct"]
    assert result.get("failed") is True, result
    assert reason in result["msg"], result["msg"]
    assert not (tmp_path / "fetched").exists()
