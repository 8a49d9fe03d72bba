"""gpulxc.sglang.pct_ssh: command construction, quoting, sudo, transfers and error messages.

The OpenSSH layer (ansible.builtin.ssh, the parent class) is replaced by recorders, so these tests see
exactly what would be sent to the node.
"""

import ast
import multiprocessing
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.playbook.play_context import PlayContext
from ansible.plugins.connection import ssh as ssh_plugin
from ansible.plugins.loader import connection_loader
from ansible_collections.gpulxc.sglang.plugins.plugin_utils import pct_channel

REPO = Path(__file__).resolve().parents[4]

PCT = "/usr/sbin/pct"


class Recorder:
    """Stands in for the SSH layer: records node commands and file transfers, answers as told."""

    def __init__(self):
        self.commands = []
        self.transfers = []
        self.answers = []

    def exec_command(self, cmd, in_data=None, sudoable=True):
        self.commands.append((cmd, in_data))
        answer = self.answers.pop(0) if self.answers else (0, b"", b"")
        if isinstance(answer, Exception):
            raise answer
        return answer

    def transport(self, in_path, out_path, action):
        self.transfers.append((in_path, out_path, action))
        return 0, b"", b""


@pytest.fixture
def ssh(monkeypatch):
    rec = Recorder()
    monkeypatch.setattr(ssh_plugin.Connection, "exec_command", rec.exec_command)
    monkeypatch.setattr(ssh_plugin.Connection, "_file_transport_command", rec.transport)
    return rec


def connect(user="root", **options):
    conn = connection_loader.get("gpulxc.sglang.pct_ssh", PlayContext(), None)
    conn.set_options(direct={"host": "pve1", "remote_user": user, "vmid": 200, "pct_channel": False, **options})
    return conn


def argv(node_command):
    return shlex.split(node_command)


def test_exec_runs_the_command_in_the_containers_shell(ssh):
    cmd = "/bin/sh -c 'echo ~ && sleep 0' ; echo \"$HOME\" | tr a-z A-Z"
    connect().exec_command(cmd)
    sent, in_data = ssh.commands[0]
    # the node's shell gets one safely quoted command line; the CT's /bin/sh gets cmd unchanged, with
    # the environment set explicitly (not pct exec's PATH=/sbin:/bin:/usr/sbin:/usr/bin policy)
    assert argv(sent) == [PCT, "exec", "200", "--", *pct_channel.CONTAINER_ENV, "/bin/sh", "-c", cmd]
    assert "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" in argv(sent)
    assert argv(sent)[5:9] == ["-u", "SSL_CERT_FILE", "-u", "SSL_CERT_DIR"]
    assert in_data is None


def test_pipelining_passes_the_module_on_stdin(ssh):
    conn = connect()
    assert conn.has_pipelining
    conn.exec_command("/usr/bin/python3 && sleep 0", in_data=b"print('module')")
    assert ssh.commands[0][1] == b"print('module')"


def test_non_root_user_runs_pct_with_sudo_without_prompt(ssh):
    connect(user="ansible").exec_command("id -u")
    assert argv(ssh.commands[0][0])[:4] == ["sudo", "-n", PCT, "exec"]


def test_pct_path_is_configurable(ssh):
    connect(pct_executable="/opt/pve/bin/pct").exec_command("true")
    assert argv(ssh.commands[0][0])[0] == "/opt/pve/bin/pct"


@pytest.mark.parametrize(
    ("pct_says", "expected"),
    [
        ("container '200' not running!", r"CT 200 is not running on pve1: start it \(pct start 200\)"),
        ("Configuration file 'nodes/pve1/lxc/200.conf' does not exist", "CT 200 does not exist on pve1"),
    ],
)
def test_pct_refusals_become_clear_connection_errors(ssh, pct_says, expected):
    # ssh exits 255 for its own errors, and so does pct: the ssh layer raises, we explain
    ssh.answers.append(AnsibleConnectionFailure("Failed to connect to the host via ssh: " + pct_says))
    with pytest.raises(AnsibleConnectionFailure, match=expected):
        connect().exec_command("true")


@pytest.mark.parametrize("returncode", [2, 25, 255])
@pytest.mark.parametrize(
    ("pct_says", "expected"),
    [
        ("container '200' not running!", "CT 200 is not running on pve1"),
        ("Configuration file 'nodes/pve1/lxc/200.conf' does not exist", "CT 200 does not exist on pve1"),
        ("CT is locked (backup)", r"CT 200 on pve1 is locked \(backup: .*pct unlock 200"),
    ],
)
def test_pct_refusals_are_explained_whatever_their_exit_code(ssh, returncode, pct_says, expected):
    # pct's refusals are Perl dies: they exit with $! (often 2), not 255
    ssh.answers.append((returncode, b"", pct_says.encode() + b"\n"))
    with pytest.raises(AnsibleConnectionFailure, match=expected):
        connect().exec_command("true")


def test_another_cts_refusal_text_from_a_command_is_its_own_result(ssh):
    said = b"Configuration file 'nodes/pve1/lxc/300.conf' does not exist\n"
    ssh.answers.append((2, b"", said))
    assert connect().exec_command("pct config 300") == (2, b"", said)


def test_the_ssh_layers_wording_is_dropped_from_pcts_message(ssh):
    ssh.answers.append(
        AnsibleConnectionFailure(
            'Data could not be sent to remote host "pve1". Make sure this host can be reached over ssh: '
            "Configuration file 'nodes/pve1/lxc/200.conf' does not exist"
        )
    )
    with pytest.raises(AnsibleConnectionFailure) as info:
        connect().exec_command("true")
    assert info.value.message == (
        "CT 200 does not exist on pve1 (pct: Configuration file 'nodes/pve1/lxc/200.conf' does not exist); "
        "check proxmox_vmid or create it with the gpulxc.sglang.pct_container role"
    )


def test_unrelated_ssh_failures_are_left_as_they_are(ssh):
    ssh.answers.append(AnsibleConnectionFailure("Failed to connect to the host via ssh: Connection refused"))
    with pytest.raises(AnsibleConnectionFailure, match="Connection refused"):
        connect().exec_command("true")


def test_missing_pct_says_so(ssh):
    ssh.answers.append((127, b"", b"bash: line 1: /usr/sbin/pct: No such file or directory\n"))
    with pytest.raises(AnsibleConnectionFailure, match="not found on pve1: is it a Proxmox VE node"):
        connect().exec_command("true")


def test_sudo_without_nopasswd_says_what_to_add(ssh):
    ssh.answers.append((1, b"", b"sudo: a password is required\n"))
    with pytest.raises(AnsibleConnectionFailure, match=r"ansible ALL = \(root\) NOPASSWD: /usr/sbin/pct"):
        connect(user="ansible").exec_command("true")


def test_a_failing_command_in_the_container_is_its_own_result(ssh):
    ssh.answers.append((1, b"", b"cat: /nope: does not exist\n"))
    assert connect().exec_command("cat /nope") == (1, b"", b"cat: /nope: does not exist\n")


def test_small_file_is_written_with_one_exec(ssh, tmp_path):
    src = tmp_path / "small"
    src.write_bytes(b"x" * 1000)
    connect().put_file(str(src), "/root/.ansible/tmp/it's here")
    ((sent, in_data),) = ssh.commands
    assert argv(sent)[-1] == "cat > '/root/.ansible/tmp/it'\"'\"'s here'"
    assert shlex.split(argv(sent)[-1]) == ["cat", ">", "/root/.ansible/tmp/it's here"]
    assert in_data == b"x" * 1000
    assert ssh.transfers == []


def test_large_file_goes_through_the_node_and_pct_push(ssh, tmp_path):
    src = tmp_path / "large"
    src.write_bytes(b"y" * 300_000)
    ssh.answers.append((0, b"in=300000\nstaged=300000\n", b"trying to acquire lock...\n OK\n"))
    connect(user="ansible").put_file(str(src), "/srv/model.bin")
    ((in_path, staged, action),) = ssh.transfers
    assert (in_path, action) == (str(src), "put")  # the SSH file transfer streams the file
    assert staged.startswith(".ansible-pct-")  # relative: lands in the SSH user's home
    ((script, in_data),) = ssh.commands
    assert in_data is None  # the file's bytes never pass through memory
    assert f'sudo -n {PCT} push 200 "$HOME"/{staged} /srv/model.bin' in script
    assert f"sudo -n {PCT} exec 200 -- /usr/bin/stat -c %s -- /srv/model.bin" in script  # the size that arrived
    assert f'rm -f -- "$HOME"/{staged}' in script  # removed whatever pct says


def test_failed_push_is_an_error_with_pcts_message(ssh, tmp_path):
    src = tmp_path / "large"
    src.write_bytes(b"z" * 300_000)
    ssh.answers.append((1, b"", b"failed to create file: /nope/x: No such file or directory\n"))
    with pytest.raises(AnsibleError, match="failed to transfer file to /nope/x: failed to create file"):
        connect().put_file(str(src), "/nope/x")


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        # pct push exits 0 when its worker fails: the reason is on stderr only
        (
            (0, b"in=\nstaged=300000\n", b"failed to create file: /nope/x: No such file or directory\n"),
            "failed to transfer file to /nope/x: pct: failed to create file: /nope/x: No such file or directory",
        ),
        # a short write (the CT's disk full) prints nothing: the size says it
        ((0, b"in=65536\nstaged=300000\n", b""), "failed to transfer file to /nope/x: 65536 bytes arrived of 300000"),
    ],
)
def test_push_failing_in_pcts_worker_is_an_error(ssh, tmp_path, answer, expected):
    src = tmp_path / "large"
    src.write_bytes(b"z" * 300_000)
    ssh.answers.append(answer)
    with pytest.raises(AnsibleError, match=expected):
        connect().put_file(str(src), "/nope/x")


def test_push_to_a_stopped_container_says_so(ssh, tmp_path):
    src = tmp_path / "large"
    src.write_bytes(b"z" * 300_000)
    ssh.answers.append((1, b"", b"can only push files to a running CT\n"))
    with pytest.raises(AnsibleConnectionFailure, match="CT 200 is not running on pve1"):
        connect().put_file(str(src), "/root/x")


def test_fetch_pulls_to_the_node_then_transfers_then_removes(ssh, tmp_path):
    ssh.answers.append((0, b"in=13\nstaged=13\n", b""))
    connect(user="ansible").fetch_file("/etc/hostname", str(tmp_path / "hostname"))
    pull, rm = (c for c, _ in ssh.commands)
    ((staged, out_path, action),) = ssh.transfers
    assert (out_path, action) == (str(tmp_path / "hostname"), "get")
    assert f'sudo -n {PCT} pull 200 /etc/hostname "$HOME"/{staged} --user ansible' in pull
    assert rm == f'rm -f -- "$HOME"/{staged}'


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            (0, b"in=\nstaged=0\n", b"failed to open /root/missing: No such file or directory\n"),
            "failed to fetch /root/missing: pct: failed to open /root/missing: No such file or directory",
        ),
        ((0, b"in=4096\nstaged=1024\n", b""), "failed to fetch /root/missing: 1024 bytes arrived of 4096"),
    ],
)
def test_fetch_failing_in_pcts_worker_is_an_error_and_leaves_nothing(ssh, tmp_path, answer, expected):
    ssh.answers.append(answer)
    with pytest.raises(AnsibleError, match=expected):
        connect().fetch_file("/root/missing", str(tmp_path / "x"))
    assert ssh.transfers == []  # the empty staged file is not fetched
    assert ssh.commands[-1][0].startswith('rm -f -- "$HOME"/.ansible-pct-')  # and is removed


def test_options_cover_every_option_of_the_ssh_plugin():
    """This plugin drives ansible.builtin.ssh: every option that plugin reads must be declared here."""

    def options(path):
        tree = ast.parse(Path(path).read_text())
        doc = next(n.value.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "DOCUMENTATION")
        return yaml.safe_load(doc)["options"]

    def strip_version_added(node):  # core's version markers are not versions of this collection
        if isinstance(node, dict):
            return {k: strip_version_added(v) for k, v in node.items() if k != "version_added"}
        if isinstance(node, list):
            return [strip_version_added(v) for v in node]
        return node

    ours = options(connection_loader.find_plugin("gpulxc.sglang.pct_ssh"))
    theirs = strip_version_added(options(ssh_plugin.__file__))
    for name, spec in theirs.items():
        # the variables an option is read from may be more than this core's: a name an older tested core reads
        # (2.19's delegated_vars['ansible_host'], gone in 2.20) is never set on a newer one
        mine = dict(ours.get(name) or {})
        assert {v["name"] for v in spec.get("vars", [])} <= {v["name"] for v in mine.get("vars", [])}, name
        mine.pop("vars", None)
        if name == "pipelining":  # on by default here (its own description and default say so)
            assert (mine.pop("default"), mine.pop("type")) == (True, "boolean") and mine.pop("description")
        assert mine == {k: v for k, v in spec.items() if k != "vars"}, name
    assert {"vmid", "proxmox_become_method", "pct_executable", "pct_transfer_threshold"} <= set(ours)


def test_the_garbage_collector_skips_inherited_objects_in_a_task_worker_only(monkeypatch):
    """Loaded in a task's worker process (a fork of the controller), the plugin freezes what the worker inherited;
    anywhere else (the controller, ansible-doc, a test) it leaves the collector alone."""
    module = __import__(type(connect()).__module__, fromlist=["_freeze_inherited_objects"])
    frozen = []
    monkeypatch.setattr(module.gc, "freeze", lambda: frozen.append(True))
    module._freeze_inherited_objects()
    assert frozen == []
    monkeypatch.setattr(multiprocessing, "parent_process", multiprocessing.current_process)
    module._freeze_inherited_objects()
    assert frozen == [True]


def test_pipelining_is_on_without_any_configuration(tmp_path):
    """An installed collection has no ansible.cfg of ours: with an empty one and nothing in the environment, the
    plugin pipelines (ansible.builtin.ssh does not)."""
    (tmp_path / "empty.cfg").write_text("")
    env = {k: v for k, v in os.environ.items() if "PIPELINING" not in k}
    env["ANSIBLE_CONFIG"] = str(tmp_path / "empty.cfg")
    env["ANSIBLE_COLLECTIONS_PATH"] = str(REPO / ".ansible/collections")
    probe = (
        "from ansible.playbook.play_context import PlayContext\n"
        "from ansible.plugins.loader import connection_loader, init_plugin_loader\n"
        "init_plugin_loader()\n"
        "for name in ('gpulxc.sglang.pct_ssh', 'ansible.builtin.ssh'):\n"
        "    conn = connection_loader.get(name, PlayContext(), None)\n"
        "    conn.set_options(var_options={'proxmox_vmid': 200})\n"
        "    print(name, conn.get_option('pipelining'))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert run.stdout.split() == ["gpulxc.sglang.pct_ssh", "True", "ansible.builtin.ssh", "False"], run.stderr
