"""gpulxc.sglang.pct_ssh's channel (plugin_utils/pct_channel.py and its agent), run on this machine.

The channel's "node command" here is the container-side command line itself (CONTAINER_ARGV: python3 reading
the agent from stdin), so everything but SSH and pct runs for real: the detached channel process, its socket,
the agent, and Ansible module payloads made by this Ansible, run by the agent in a forked child.
"""

import base64
import io
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
import time
import types
import zipfile
from pathlib import Path

import pytest
from ansible.errors import AnsibleConnectionFailure
from ansible.playbook.play_context import PlayContext
from ansible.plugins.connection import ssh as ssh_plugin
from ansible.plugins.loader import become_loader, connection_loader
from ansible_collections.gpulxc.sglang.plugins.connection import pct_ssh
from ansible_collections.gpulxc.sglang.plugins.plugin_utils import pct_channel, pct_channel_agent

pytestmark = pytest.mark.timed  # its waits and fakes time what they test (tests/unit/conftest.py)

REPO = Path(__file__).resolve().parents[4]


@pytest.fixture
def channel(tmp_path):
    """run(cmd, in_data=None, **start) through a channel at a fresh path; stops it afterwards."""
    path = str(tmp_path / "pct-test")
    start = {
        "node_argv": list(pct_channel.CONTAINER_ARGV),
        "agent": pct_channel_agent.__file__,
        "preload": True,
        "idle": 30,
        "timeout": 10,
    }

    def run(cmd, in_data=None, **overrides):
        return pct_channel.run(path, cmd, in_data, start={**start, **overrides})

    run.path = path
    yield run
    for pid in channel_pids(path):
        os.kill(pid, signal.SIGTERM)


def channel_pids(path):
    out = subprocess.run(["pgrep", "-f", f"pct_channel.py {path} "], capture_output=True, text=True, check=False)
    return [int(pid) for pid in out.stdout.split()]


def test_a_command_runs_with_its_status_stdout_and_stderr(channel):
    assert channel("echo out; echo err >&2; exit 3") == (3, b"out\n", b"err\n")
    assert Path(channel.path).is_socket()
    assert (os.stat(channel.path).st_mode & 0o077) == 0


def test_stdin_is_the_data_given_byte_for_byte_else_dev_null(channel):
    data = bytes(range(256)) * 4000 + b"\n\x00end"
    rc, out, _ = channel("cat", data)
    assert (rc, out) == (0, data)
    assert channel("cat") == (0, b"", b"")  # /dev/null: no wait for input


def test_one_channel_process_serves_every_command(channel):
    channel("true")
    pids = channel_pids(channel.path)
    for _ in range(5):
        channel("true")
    assert len(pids) == 1
    assert channel_pids(channel.path) == pids


def test_a_second_command_while_one_runs_is_refused_not_queued(channel):
    channel("true")
    first = threading.Thread(target=channel, args=("sleep 2",))
    first.start()
    time.sleep(0.5)
    started = time.monotonic()
    with pytest.raises(pct_channel.Unavailable, match="busy"):
        channel("echo second")
    assert time.monotonic() - started < 1
    first.join()
    assert channel("echo after") == (0, b"after\n", b"")


def test_an_agent_killed_under_a_command_is_lost_and_the_next_command_starts_a_new_channel(channel):
    channel("true")
    # the agent is the parent of the command's shell
    with pytest.raises(pct_channel.Lost):
        channel("kill -9 $PPID; sleep 5")
    assert channel("echo again") == (0, b"again\n", b"")


def test_an_idle_channel_exits_and_removes_its_socket(channel):
    channel("true", idle=1)
    pids = channel_pids(channel.path)
    assert pids
    for _ in range(40):
        if not Path(channel.path).exists() and not channel_pids(channel.path):
            break
        time.sleep(0.1)
    assert not Path(channel.path).exists()
    assert not channel_pids(channel.path)


def test_a_container_side_that_does_not_start_is_unavailable(channel):
    with pytest.raises(pct_channel.Unavailable, match="did not start: failed: no agent"):
        channel("true", node_argv=["/bin/sh", "-c", "echo 'python3: not found' >&2; exit 127"])
    assert not Path(channel.path).exists()


# -- Ansible modules in a forked child -------------------------------------------------------------------


@pytest.fixture(scope="module")
def payloads(tmp_path_factory):
    """Real AnsiballZ payloads from this Ansible (ping; command env), caught on their way to Python."""
    work = tmp_path_factory.mktemp("payloads")
    catcher = work / "python"
    catcher.write_text(f'#!/bin/sh\ncat > "{work}/payload-$$.py"\n')
    catcher.chmod(0o755)
    caught = {}
    modules = (
        ("ping", "ansible.builtin.ping", ""),
        ("env", "ansible.builtin.command", "env"),
        # get_url downloads into AnsibleModule.tmpdir, which an atexit handler removes
        ("get_url", "ansible.builtin.get_url", f"url=file:///etc/hostname dest={work}/hostname"),
    )
    for name, module, args in modules:
        subprocess.run(
            [
                str(REPO / ".venv/bin/ansible"),
                "localhost",
                "-c",
                "local",
                "-m",
                module,
                "-a",
                args,
                "-e",
                f"ansible_python_interpreter={catcher}",
                "-e",
                "ansible_pipelining=true",
                "-e",
                f"ansible_remote_tmp={work}/remote_tmp",
            ],
            capture_output=True,
            text=True,
            check=False,
            cwd=REPO,
            env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg")),
        )
        (found,) = set(work.glob("payload-*.py")) - set(caught.values())
        caught[name] = found
    result = {name: path.read_bytes() for name, path in caught.items()}
    result["remote_tmp"] = work / "remote_tmp"
    return result


def start_agent(argv):
    """ask(cmd, data) -> (answer header, stdout, stderr), straight to an agent run by `argv` (no channel process)."""
    source = Path(pct_channel_agent.__file__).read_bytes() + b"\nmain(preload=True)\n"
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    proc.stdin.write(b"%d\n" % len(source) + source)
    proc.stdin.flush()
    assert proc.stdout.readline() == pct_channel.READY

    def ask(cmd, data=None):
        proc.stdin.write(json.dumps({"cmd": cmd, "in": -1 if data is None else len(data)}).encode() + b"\n")
        proc.stdin.write(data or b"")
        proc.stdin.flush()
        header = json.loads(proc.stdout.readline())
        return header, proc.stdout.read(header["out"]), proc.stdout.read(header["err"])

    ask.proc = proc
    return ask


@pytest.fixture
def agent():
    ask = start_agent(list(pct_channel.CONTAINER_ARGV))
    # the Python the agent runs on (python3 on the PATH, maybe through a shim): modules are piped to it
    ask.python = ask("python3 -c 'import sys; print(sys.executable)'")[1].decode().strip()
    yield ask
    ask.proc.stdin.close()
    ask.proc.wait(5)


# Pythons of other containers (Debian 11: 3.9, Ubuntu 22.04: 3.10, 3.12, 3.13), where this machine has them.
OTHER_PYTHONS = sorted(str(p) for p in Path("/root/.pyenv/versions").glob("3.1[0-9]*/bin/python3"))
OTHER_PYTHONS += sorted(str(p) for p in Path("/root/.pyenv/versions").glob("3.9*/bin/python3"))


@pytest.mark.skipif(not OTHER_PYTHONS, reason="no other Python versions on this machine")
@pytest.mark.parametrize("python", OTHER_PYTHONS)
def test_on_other_pythons_modules_run_forked_from_310_and_fresh_before(payloads, python):
    ask = start_agent([python, "-c", pct_channel.BOOT])
    try:
        header, out, err = ask("/bin/sh -c '%s && sleep 0'" % python, payloads["ping"])
        version = tuple(int(x) for x in Path(python).resolve().name.removeprefix("python").split(".")[:2])
        assert (header["rc"], json.loads(out)["ping"]) == (0, "pong"), err
        assert header["via"] == ("fork" if version >= (3, 10) else "shell")
    finally:
        ask.proc.stdin.close()
        ask.proc.wait(5)


def python_command(agent, env=""):
    """How Ansible pipes a module to the agent's Python (python3 -> the interpreter's path)."""
    return "/bin/sh -c " + shlex.quote("%s%s && sleep 0" % (env, agent.python))


def test_a_module_runs_in_a_forked_child_with_the_same_result(agent, payloads):
    header, out, _ = agent(python_command(agent), payloads["ping"])
    assert (header["rc"], header["via"]) == (0, "fork")
    assert json.loads(out)["ping"] == "pong"
    header, out, _ = agent(python_command(agent), payloads["ping"])
    assert (header["via"], json.loads(out)["ping"]) == ("fork", "pong")


def test_the_commands_environment_reaches_the_module(agent, payloads):
    header, out, _ = agent(python_command(agent, "GPULXC_PROBE='a b' "), payloads["env"])
    assert header["via"] == "fork"
    assert "GPULXC_PROBE=a b" in json.loads(out)["stdout"].splitlines()
    # and does not stay for the next module
    header, out, _ = agent(python_command(agent), payloads["env"])
    assert "GPULXC_PROBE" not in json.loads(out)["stdout"]


def test_startup_environment_or_another_interpreter_path_runs_in_a_fresh_python(agent, payloads, tmp_path):
    header, out, _ = agent(python_command(agent, "PYTHONPATH=/nowhere "), payloads["env"])
    assert header["via"] == "shell"
    assert "PYTHONPATH=/nowhere" in json.loads(out)["stdout"].splitlines()
    # a virtual environment's python is a link to the same binary, with other packages: not this Python
    link = tmp_path / "venv-python3"
    link.symlink_to(agent.python)
    header, out, _ = agent("/bin/sh -c " + shlex.quote(f"{link} && sleep 0"), payloads["ping"])
    assert (header["via"], json.loads(out)["ping"]) == ("shell", "pong")


def test_a_forked_module_cleans_up_after_itself(agent, payloads):
    remote_tmp = payloads["remote_tmp"]
    shutil.rmtree(remote_tmp, ignore_errors=True)
    header, out, err = agent(python_command(agent), payloads["get_url"])
    assert (header["via"], header["rc"]) == ("fork", 0), (out, err)
    assert json.loads(out)["dest"].endswith("/hostname")
    # AnsibleModule.tmpdir was made for the download and removed by its atexit handler, as in a fresh Python
    assert list(remote_tmp.iterdir()) == []


def repacked(payload, member, extra):
    """The payload with `extra` appended to one file of its zip."""
    found = re.search(rb"\nzip_data='([A-Za-z0-9+/=]+)'", payload)
    old = zipfile.ZipFile(io.BytesIO(base64.b64decode(found.group(1))))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as new:
        for info in old.infolist():
            data = old.read(info.filename)
            new.writestr(info, data + extra if info.filename == member else data)
    return payload.replace(found.group(1), base64.b64encode(buffer.getvalue()))


def test_a_payload_whose_shared_files_differ_runs_in_a_fresh_python(agent, payloads):
    assert agent(python_command(agent), payloads["ping"])[0]["via"] == "fork"
    changed = repacked(payloads["ping"], "ansible/module_utils/basic.py", b"\n# another version\n")
    header, out, _ = agent(python_command(agent), changed)
    assert (header["via"], json.loads(out)["ping"]) == ("shell", "pong")


def test_other_commands_and_interpreters_run_in_the_shell(agent, payloads):
    assert agent("/bin/sh -c 'echo hi'")[0]["via"] == "shell"
    header, _, err = agent("/bin/sh -c '/nonexistent/python3 && sleep 0'", payloads["ping"])
    assert (header["via"], header["rc"]) == ("shell", 127)
    assert b"not found" in err


def test_a_module_that_dies_reports_its_status(agent, payloads):
    broken = payloads["ping"].replace(b'if __name__ == "__main__":', b"import os\nos.kill(os.getpid(), 9)\nif 1:")
    header, _, _ = agent(python_command(agent), broken)
    assert (header["via"], header["rc"]) == ("fork", 137)
    assert agent(python_command(agent), payloads["ping"])[0]["rc"] == 0


# -- pct_ssh's use of the channel -------------------------------------------------------------------------


def connect(**options):
    conn = connection_loader.get("gpulxc.sglang.pct_ssh", PlayContext(), None)
    conn.set_options(direct={"host": "pve1", "remote_user": "root", "vmid": 200, **options})
    return conn


@pytest.fixture
def calls(monkeypatch):
    """Records what goes through the channel and what through a plain pct exec; answers as told."""
    record = {"channel": [], "pct": [], "answers": [], "pct_answers": {}}

    def run(path, cmd, in_data, *, start):
        record["channel"].append((path, cmd, in_data, start))
        answer = record["answers"].pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def pct_exec(self, cmd, in_data, sudoable):
        record["pct"].append(cmd)
        answer = record["pct_answers"].get(cmd, (0, b"plain", b""))
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(pct_channel, "run", run)
    monkeypatch.setattr(connection_loader.get("gpulxc.sglang.pct_ssh", class_only=True), "_pct_exec", pct_exec)
    return record


def test_commands_go_through_the_channel(calls):
    calls["answers"].append((0, b"via channel", b""))
    assert connect().exec_command("echo x", in_data=b"in") == (0, b"via channel", b"")
    path, cmd, in_data, start = calls["channel"][0]
    assert (cmd, in_data, calls["pct"]) == ("echo x", b"in", [])
    assert os.path.basename(path).startswith("pct-")
    # ssh to the node, which runs pct exec with the agent's bootstrap
    assert start["node_argv"][0] == "ssh"
    assert shlex.split(start["node_argv"][-1]) == ["/usr/sbin/pct", "exec", "200", "--", *pct_channel.CONTAINER_ARGV]
    assert (start["idle"], start["preload"]) == (60, True)


@pytest.mark.parametrize(
    ("core", "preload"), [("2.19.4", True), ("2.20.0", True), ("2.21.5", True), ("2.22.0", False), ("3.0.0", False)]
)
def test_the_preload_is_used_only_on_the_ansible_core_versions_it_is_tested_with(calls, monkeypatch, core, preload):
    monkeypatch.setattr(pct_ssh, "ansible_core_version", core)
    calls["answers"].append((0, b"via channel", b""))
    connect().exec_command("echo x")
    assert calls["channel"][0][3]["preload"] is preload


def test_what_the_channel_cannot_take_runs_with_a_plain_pct_exec(calls):
    calls["answers"].append(pct_channel.Unavailable("busy"))
    assert connect().exec_command("echo x") == (0, b"plain", b"")
    assert calls["pct"] == ["echo x"]


def test_a_command_lost_with_the_channel_fails_after_pct_had_its_say(calls):
    calls["answers"].append(pct_channel.Lost("the channel closed before answering"))
    with pytest.raises(AnsibleConnectionFailure, match="whether the command ran is unknown"):
        connect().exec_command("echo x")
    # pct's own error (CT not running) would have been raised at "true"; then the container's uptime
    assert calls["pct"] == ["true", pct_ssh.CT_UPTIME_COMMAND]


def lost_after(calls, monkeypatch, seconds):
    """The channel lost after the command ran `seconds`."""
    clock = [1000.0, 1000.0 + seconds]
    monkeypatch.setattr(
        pct_ssh, "time", types.SimpleNamespace(monotonic=lambda: clock.pop(0) if clock[1:] else clock[0])
    )
    calls["answers"].append(pct_channel.Lost("the channel closed before answering"))


@pytest.mark.parametrize(("uptime", "ran"), [(b"12\n", 40), (b"0\n", 1)])
def test_a_container_restarted_under_a_command_is_named_with_its_uptime(calls, monkeypatch, uptime, ran):
    lost_after(calls, monkeypatch, ran)
    calls["pct_answers"][pct_ssh.CT_UPTIME_COMMAND] = (0, uptime, b"")
    with pytest.raises(AnsibleConnectionFailure) as failure:
        connect().exec_command("echo x")
    assert failure.value.message.startswith(
        f"CT 200 on pve1 restarted while the task ran (it has been up {int(uptime)} s, the task ran {ran} s)"
    ), failure.value.message
    assert "run the play again" in failure.value.message


@pytest.mark.parametrize("answer", [(0, b"900\n", b""), (0, b"", b""), (0, b"x\n", b""), (1, b"", b"no systemctl")])
def test_a_container_up_for_longer_than_the_command_or_of_unknown_uptime_is_not_called_restarted(
    calls, monkeypatch, answer
):
    lost_after(calls, monkeypatch, 40)
    calls["pct_answers"][pct_ssh.CT_UPTIME_COMMAND] = answer
    with pytest.raises(AnsibleConnectionFailure) as failure:
        connect().exec_command("echo x")
    assert "restarted" not in failure.value.message and "whether the command ran is unknown" in failure.value.message


@pytest.mark.parametrize("options", [{"pct_channel": False}, {"password": "secret"}])
def test_no_channel_when_switched_off_or_with_a_password(calls, options):
    assert connect(**options).exec_command("echo x") == (0, b"plain", b"")
    assert calls["channel"] == []


def test_no_channel_for_become_in_the_container(calls):
    conn = connect()
    conn.set_become_plugin(become_loader.get("ansible.builtin.sudo"))
    assert conn.exec_command("echo x") == (0, b"plain", b"")
    assert calls["channel"] == []


def test_reset_connection_makes_the_next_command_start_a_new_channel(monkeypatch, tmp_path):
    monkeypatch.setattr(ssh_plugin.Connection, "reset", lambda self: None)
    conn = connect(control_path_dir=str(tmp_path))
    conn.host = "pve1"
    path = Path(conn._channel_path())
    path.write_text("")  # stands in for the channel's socket
    conn.reset()
    assert not path.exists()


def test_a_container_stopped_under_a_command_is_named_as_stopped_not_as_never_started(calls, monkeypatch):
    lost_after(calls, monkeypatch, 40)
    calls["pct_answers"]["true"] = AnsibleConnectionFailure("CT 200 is not running on pve1: start it (pct start 200)")
    with pytest.raises(AnsibleConnectionFailure) as failure:
        connect().exec_command("echo x")
    assert failure.value.message.startswith("CT 200 on pve1 stopped under the task (a shutdown or a reboot"), failure
    assert "pct start 200 if it stays stopped" in failure.value.message


def test_another_refusal_of_pct_after_a_lost_command_is_passed_on(calls, monkeypatch):
    lost_after(calls, monkeypatch, 40)
    calls["pct_answers"]["true"] = AnsibleConnectionFailure("CT 200 on pve1 is locked (backup: ...)")
    with pytest.raises(AnsibleConnectionFailure, match="is locked"):
        connect().exec_command("echo x")
