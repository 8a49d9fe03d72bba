"""tests/gpu/unit_runner.py, which runs the collection's rendered sglang@.service where there is no systemd (the
lent GPU machine): `show` on the role's real unit (its templates rendered as the role renders them: the preflight
facts, then sglang@.service.j2, instance.env.j2 and cuda_surgery's cuda.env.j2) gives the ExecStart argv with %i
substituted, the environment in systemd's order and the user; systemd's quoting, environment file format,
specifiers and $VAR expansion; bad input refused by name; and a real start and stop of a harmless unit (its
environment, cwd, user, session; KillMode=mixed with and without TimeoutStopSec= running out)."""

import contextlib
import importlib.util
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from ansible.template import Templar, trust_as_template
from conftest import trusted

pytestmark = pytest.mark.timed  # its waits and fakes time what they test (tests/unit/conftest.py)

REPO = Path(__file__).resolve().parents[3]
RUNNER = REPO / "tests/gpu/unit_runner.py"
ROLE = REPO / "roles/sglang_services"
spec = importlib.util.spec_from_file_location("unit_runner", RUNNER)
runner = importlib.util.module_from_spec(spec)
spec.loader.exec_module(runner)

USER = "daemon"  # a system user with a group of the same name (the unit's Group= is its User=), shell nologin
SYSTEM_PYTHON = "/usr/bin/python3"  # readable by that user (the test venv's may live under /root)
CUDA_HOME = "/opt/sglang/venv/lib/python3.11/site-packages/nvidia/cu13"


def role_facts(root, **extra):
    """The role's variables and the facts its preflight sets (templated as Ansible does), with the shared layout
    under root and the service user USER."""
    variables = {}
    for role in ("gpulxc", "cuda_surgery", "sglang_services"):
        variables.update(trusted(yaml.safe_load((REPO / "roles" / role / "defaults/main.yml").read_text())))
    variables.update(trusted(yaml.safe_load((ROLE / "vars/main.yml").read_text())))
    variables.update(
        {
            "gpulxc_env_file": f"{root}/etc/sglang/cuda.env",
            "gpulxc_config_dir": f"{root}/etc/sglang",
            "gpulxc_cache_dir": f"{root}/var/cache/sglang",
            "sglang_services_user": USER,
            "ansible_managed": "managed",
            "gpulxc_gpus": {"indexes": [0, 1], "capabilities": ["9.0", "9.0"]},
            "ansible_local": {
                "gpulxc_stack": {
                    "attention_backends": {"9.0": ["fa3", "flashinfer"]},
                    "fallback_attention_backend": "triton",
                }
            },
            "_cuda_surgery_cuda_home": CUDA_HOME,
            "inventory_hostname": "ct200",
            "hostvars": {},
            **extra,
        }
    )
    # the preflight's facts in its order: the stack the servers start from (stack.yml), then the plan
    tasks = [
        *yaml.safe_load((ROLE / "tasks/stack.yml").read_text()),
        *yaml.safe_load((ROLE / "tasks/preflight.yml").read_text()),
    ]
    for task in [t for t in tasks if "ansible.builtin.set_fact" in t]:
        templar = Templar(variables={**variables, **trusted(task.get("vars", {}))})
        variables.update({k: templar.template(trusted(v)) for k, v in task["ansible.builtin.set_fact"].items()})
    return variables


def render(path, facts, **extra):
    return Templar(variables={**facts, **extra}).template(trust_as_template(path.read_text()))


def value(facts, name):
    return Templar(variables=facts).template(trust_as_template("{{ " + name + " }}"))


def write_role_files(root, **extra):
    """What the roles write into the container: the unit, cuda_surgery's environment file, each instance's
    environment file. Returns the unit's path and the facts."""
    facts = role_facts(root, **extra)
    unit = root / "etc/systemd/system/sglang@.service"
    unit.parent.mkdir(parents=True)
    unit.write_text(render(ROLE / "templates/sglang@.service.j2", facts))
    config = Path(value(facts, "sglang_services_config_dir"))
    config.mkdir(parents=True)
    cuda_env = REPO / "roles/cuda_surgery/templates/etc/sglang/cuda.env.j2"
    Path(value(facts, "cuda_surgery_env_file")).write_text(render(cuda_env, facts))
    for instance in facts["_sglang_services_plan"]["servers"]:
        text = render(ROLE / "templates/instance.env.j2", facts, instance=instance)
        (config / f"instance-{instance['number']}.env").write_text(text)
    return unit, facts


TWO_ON_GPU0 = [{"gpu": 0, "mem_fraction_static": 0.3}, {"gpu": 0, "mem_fraction_static": 0.3}]


def test_show_gives_the_role_units_command_environment_and_user(tmp_path):
    extra_env = {"NCCL_DEBUG": "INFO", "WITH_QUOTES": 'a b "c" \\d', "UNICODE": "é"}
    unit, facts = write_role_files(
        tmp_path, sglang_services_instances=TWO_ON_GPU0, sglang_services_environment=extra_env
    )
    p = runner.plan(str(unit), "1")
    config, cache = value(facts, "sglang_services_config_dir"), value(facts, "sglang_services_cache_dir")
    assert p["unit"] == "sglang@1.service"
    launch = value(facts, "_sglang_services_launch_script")
    assert p["argv"] == ["/opt/sglang/venv/bin/python", launch, "--config", f"{config}/instance-1.yaml"]
    assert [c["argv"] for c in p["exec_start_pre"]] == [[SYSTEM_PYTHON, value(facts, "_sglang_services_turn_script")]]
    daemon = pwd.getpwnam(USER)
    assert (p["user"], p["uid"], p["gid"], p["group"]) == (USER, daemon.pw_uid, daemon.pw_gid, USER)
    assert (p["cwd"], p["umask"], p["no_new_privileges"]) == ("/", 0o027, True)
    assert p["limits"]["NOFILE"] == [65535, 65535] and p["limits"]["STACK"] == [67108864, 67108864]
    assert (p["kill_mode"], p["kill_signal"], p["timeout_stop"]) == ("mixed", signal.SIGTERM, 120)
    assert p["timeout_start"] == 1800
    assert signal.SIGKILL in p["success_signals"] and 137 in p["success_codes"]
    env, origin = p["environment"], p["environment_origin"]
    # the instance's environment file: its GPU, and instance 0 before it on that GPU
    assert env["CUDA_VISIBLE_DEVICES"] == "0"
    assert env["GPULXC_GPU_BEFORE"] == f"http://127.0.0.1:30000,{config}/instance-0.yaml"
    assert origin["CUDA_VISIBLE_DEVICES"] == f"EnvironmentFile={config}/instance-1.env"
    # the unit's Environment= lines, %i substituted; HOME= overrides the passwd entry's
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["HOME"] == cache and origin["HOME"].startswith("Environment=")
    jit = f"{cache}/stacks/venv"  # the stack's own JIT caches (a venv in place: "venv")
    assert (env["SGLANG_CACHE_DIR"], env["SGLANG_DG_CACHE_DIR"]) == (f"{jit}/sglang-1", f"{jit}/deep_gemm-1")
    # sglang_services_environment through the template's to_json and systemd's unquoting, byte for byte
    assert {k: env[k] for k in extra_env} == extra_env
    # cuda_surgery's file: its PATH replaces the manager's, its CUDA_HOME; its shared JIT caches replaced by the
    # stack's own from the instance's file, read after it
    assert env["PATH"].startswith(f"/opt/sglang/venv/bin:{CUDA_HOME}/bin:") and env["CUDA_HOME"] == CUDA_HOME
    assert env["FLASHINFER_WORKSPACE_BASE"] == jit and env["TVM_FFI_CACHE_DIR"] == f"{jit}/tvm-ffi"
    assert origin["FLASHINFER_WORKSPACE_BASE"] == f"EnvironmentFile={config}/instance-1.env"
    # what systemd adds for User=: USER and LOGNAME; no SHELL for a nologin shell
    assert (env["USER"], env["LOGNAME"]) == (USER, USER) and "SHELL" not in env and env.get("LANG")
    assert next(iter(env)) == "PATH"  # the manager's variable first, its value replaced in place
    assert "PrivateTmp=yes" in p["not_applied"] and "Restart=always" in p["not_applied"]
    assert not [w for w in p["warnings"] if "ignoring" in w], p["warnings"]
    first = runner.plan(str(unit), "0")["environment"]
    assert (first["CUDA_VISIBLE_DEVICES"], first["GPULXC_GPU_BEFORE"]) == ("0", "")


def test_show_prints_the_dry_run(tmp_path, capsys):
    unit, facts = write_role_files(tmp_path, sglang_services_gpus=[1])
    assert runner.main(["show", str(unit), "1"]) == 0
    text = capsys.readouterr().out
    config = value(facts, "sglang_services_config_dir")
    launch = value(facts, "_sglang_services_launch_script")
    assert f"command:     /opt/sglang/venv/bin/python {launch} --config {config}/instance-1.yaml" in text
    assert f"user:        {USER} (uid" in text and "CUDA_VISIBLE_DEVICES=1 " in text
    assert runner.main(["show", str(unit), "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["environment"]["SGLANG_CACHE_DIR"].endswith("/sglang-1")


def write_unit(directory, service, name="probe@.service"):
    unit = Path(directory) / name
    unit.write_text("[Unit]\nDescription=probe %i\n\n[Service]\n" + service)
    return unit


def test_environment_files_override_environment_in_order_and_empty_assignments_reset(tmp_path):
    (tmp_path / "one.env").write_text("A=one\nC=one\n")
    (tmp_path / "two.env").write_text("C=two\nD=two\n")
    unit = write_unit(
        tmp_path,
        f"""Environment=A=unit B=unit DROPPED=x
Environment=
Environment=A=unit B=unit
EnvironmentFile=/nonexistent/reset.env
EnvironmentFile=
EnvironmentFile={tmp_path}/one.env
EnvironmentFile=-{tmp_path}/missing.env
EnvironmentFile={tmp_path}/two.env
UnsetEnvironment=D=other B
ExecStart=/bin/true
""",
    )
    env = runner.plan(str(unit), "x")["environment"]
    assert (env["A"], env["C"], env["D"]) == ("one", "two", "two")  # files over Environment=, later files later
    assert "B" not in env and "DROPPED" not in env  # UnsetEnvironment=B; the reset Environment= line
    assert env["USER"] == "root" and "LOGNAME" not in env and "HOME" not in env  # no User=: USER only


def test_systemd_quoting_of_environment_lines(tmp_path):
    unit = write_unit(
        tmp_path,
        r"""Environment="VAR1=word1 word2" VAR2=word3 "VAR3=$word 5 6"
Environment='S=single "inner" \x41' E=a\sb\tc\u00e9 P=100%% N=%n I=%i J=%I
Environment="BAD NAME=x" 1X=y
ExecStart=/bin/true
""",
    )
    p = runner.plan(str(unit), "a-b")
    env = p["environment"]
    assert (env["VAR1"], env["VAR2"], env["VAR3"]) == ("word1 word2", "word3", "$word 5 6")  # systemd.exec(5)
    assert (env["S"], env["E"], env["P"]) == ('single "inner" A', "a b\tcé", "100%")
    assert (env["N"], env["I"], env["J"]) == ("probe@a-b.service", "a-b", "a/b")  # %I unescapes: '-' is '/'
    assert "BAD NAME" not in env and "1X" not in env
    assert sum("invalid environment assignment" in w for w in p["warnings"]) == 2


def test_environment_file_format_as_systemd_reads_it(tmp_path):
    (tmp_path / "f.env").write_text(
        "# comment\n; comment too\n"
        "PLAIN=  a  b  \n"  # leading and trailing whitespace dropped, interior kept
        'DQ="x \\"y\\" \\$z \\n w"\n'  # \" \$ unescaped, \n kept as backslash-n
        "SQ='no \\escapes here'\n"
        "MULTI='line1\nline2'\n"
        "CONT=one\\\ntwo\n"  # a backslash-newline continues
        "ESC=a\\\\b\\c\n"
        "KEY  =spaced key\n"
        "MIX=\"a\"b'c'\n"  # a quote is special only where a value starts: after "a", b'c' is plain text
        "export EXPORTED=1\n"  # not a valid name: ignored with a warning, as systemd does
        "no equals sign\n"
        "EMPTY=\n"
        "INLINE=v # not a comment\n"
        "LAST=end"
    )
    unit = write_unit(tmp_path, f"EnvironmentFile={tmp_path}/f.env\nExecStart=/bin/true\n")
    p = runner.plan(str(unit), "x")
    env = p["environment"]
    assert env["PLAIN"] == "a  b"
    assert env["DQ"] == 'x "y" $z \\n w'
    assert env["SQ"] == "no \\escapes here"
    assert env["MULTI"] == "line1\nline2"
    assert env["CONT"] == "onetwo"
    assert env["ESC"] == "a\\bc"
    assert env["KEY"] == "spaced key"
    assert env["MIX"] == "ab'c'"
    assert env["EMPTY"] == "" and env["INLINE"] == "v # not a comment" and env["LAST"] == "end"
    assert "EXPORTED" not in env and "export EXPORTED" not in env
    assert any("export EXPORTED" in w for w in p["warnings"])


def test_exec_start_words_specifiers_and_dollar_expansion(tmp_path):
    unit = write_unit(
        tmp_path,
        r"""Environment="A=one two" "Q=\"x y\" z"
ExecStart=-/bin/echo %i %% $A ${A} x${A}y $$A "$A" '${UNSET}' $UNSET $Q "a b" \; \x41 %n ${A:-d}
""",
    )
    p = runner.plan(str(unit), "3")
    assert p["argv"] == [
        "/bin/echo",
        "3",
        "%",
        "one",
        "two",
        "one two",
        "xone twoy",
        "$A",
        "one",
        "two",
        "",
        "x y",
        "z",
        "a b",
        ";",
        "A",
        "probe@3.service",
        "${A:-d}",
    ]
    assert p["ignore_failure"] and p["path"] == "/bin/echo"
    assert any("unset environment variable" in w and "UNSET" in w for w in p["warnings"])
    unit = write_unit(tmp_path, "ExecStart=true\n")  # a bare name: systemd's fixed search path
    assert runner.plan(str(unit), "3")["executable"] in ("/usr/bin/true", "/usr/local/bin/true", "/usr/sbin/true")


def test_continuation_lines_comments_and_dropins(tmp_path):
    unit = write_unit(tmp_path, "Environment=A=1 \\\n# a comment inside\n  B=2\nExecStart=/bin/echo one \\\n two\n")
    dropin = tmp_path / "probe@.service.d"
    dropin.mkdir()
    (dropin / "10-env.conf").write_text("[Service]\nEnvironment=C=dropin\n")
    instance = tmp_path / "probe@5.service.d"
    instance.mkdir()
    (instance / "20-user.conf").write_text("[Service]\nEnvironment=C=instance\n")
    p = runner.plan(str(unit), "5")
    assert p["argv"] == ["/bin/echo", "one", "two"]
    assert (p["environment"]["A"], p["environment"]["B"], p["environment"]["C"]) == ("1", "2", "instance")
    assert runner.plan(str(unit), "6")["environment"]["C"] == "dropin"


@pytest.mark.parametrize(
    ("service", "instance", "message"),
    [
        ("Environment=X=%Z\nExecStart=/bin/true\n", "1", "unknown specifier %Z"),
        ("ExecStart=/bin/echo %q\n", "1", "unknown specifier %q"),
        (
            "EnvironmentFile=/nonexistent/cuda.env\nExecStart=/bin/true\n",
            "1",
            "EnvironmentFile=/nonexistent/cuda.env: no such file",
        ),
        ("User=no-such-user-here\nExecStart=/bin/true\n", "1", "User=no-such-user-here: no such user"),
        ("User=root\nGroup=no-such-group-here\nExecStart=/bin/true\n", "1", "Group=no-such-group-here: no such group"),
        ("ExecStart=+/bin/true\n", "1", "prefix '+' (full privileges) is not supported"),
        ("ExecStart=@/bin/true x\n", "1", "prefix '@' (a separate argv[0]) is not supported"),
        ("ExecStart=:/bin/true\n", "1", "prefix ':' (no environment variable substitution) is not supported"),
        ("ExecStart=!/bin/true\n", "1", "prefix '!' (no user/group change) is not supported"),
        ("ExecStartPre=!/bin/true\nExecStart=/bin/true\n", "1", "ExecStartPre= prefix '!'"),
        ('ExecStart=/bin/echo "unbalanced\n', "1", "unbalanced quoting"),
        ("ExecStart=/bin/true ; /bin/false\n", "1", "more than one ExecStart= command"),
        ("ExecStart=bin/true\n", "1", "neither an absolute path nor a bare file name"),
        ("ExecStart=/bin/true\nExecStartPost=/bin/true\n", "1", "ExecStartPost= is set"),
        ("Type=forking\nExecStart=/bin/true\n", "1", "Type=forking: only simple and exec"),
        ("Environment=A=1\n", "1", "no ExecStart="),
        ("ExecStart=/bin/true\n", None, "is a template: name the instance"),
        ("ExecStart=/bin/true\n", "a/b", "not a valid unit instance name"),
        ("ExecStart=/bin/true\nTimeoutStopSec=5 parsecs\n", "1", "unknown time unit"),
    ],
)
def test_bad_input_is_refused_naming_the_setting(tmp_path, capsys, service, instance, message):
    unit = write_unit(tmp_path, service)
    argv = ["show", str(unit)] + ([instance] if instance else [])
    assert runner.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err, err


def test_an_optional_environment_file_may_be_missing(tmp_path):
    unit = write_unit(tmp_path, "EnvironmentFile=-/nonexistent/cuda.env\nExecStart=/bin/true\n")
    assert any("no such file, ignored" in w for w in runner.plan(str(unit), "1")["warnings"])


# -- start and stop, for real --------------------------------------------------------------------------------

PROBE = """
import json, os, resource, signal, subprocess, sys, time
mode = os.environ.get("PROBE_MODE", "")
if "ignore" in mode:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
kids = [subprocess.Popen(["/bin/sleep", "300"]).pid]
if "escape" in mode:  # a grandchild in a session of its own: out of the process group, not out of the unit
    kids.append(subprocess.Popen(["/bin/sleep", "301"], start_new_session=True).pid)
umask = os.umask(0)
creds = os.environ.get("CREDENTIALS_DIRECTORY")
credentials = {"dir": [oct(os.stat(creds).st_mode & 0o7777), os.stat(creds).st_uid], "files": {
    n: [open(os.path.join(creds, n)).read(), oct(os.stat(os.path.join(creds, n)).st_mode & 0o7777),
        os.stat(os.path.join(creds, n)).st_uid] for n in sorted(os.listdir(creds))}} if creds else None
print("PROBE " + json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ),
      "uid": os.getuid(), "gid": os.getgid(), "groups": sorted(os.getgroups()), "umask": umask,
      "sid": os.getsid(0), "pid": os.getpid(), "kids": kids,
      "nofile": list(resource.getrlimit(resource.RLIMIT_NOFILE)), "stdin": os.readlink("/proc/self/fd/0"),
      "credentials": credentials}),
      flush=True)
time.sleep(300)
"""

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists(SYSTEM_PYTHON),
    reason=f"needs root and {SYSTEM_PYTHON} (the unit switches to User={USER})",
)


@pytest.fixture
def world():
    """A directory the service user can read (pytest's tmp_path is root's only), and the runner's state in it."""
    root = Path(tempfile.mkdtemp(prefix="unit-runner-"))
    root.chmod(0o755)
    (root / "probe.py").write_text(PROBE)
    yield root
    for state in (root / "run").glob("*.json"):  # never leave a probe behind, whatever failed
        data = json.loads(state.read_text())
        pids = [*runner.unit_processes(data), data.get("main_pid"), data.get("supervisor_pid")]
        for pid in pids:
            if pid and runner.alive(pid, None):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    shutil.rmtree(root)


def run(world, *args):
    env = {**os.environ, "GPULXC_UNITS_RUN_DIR": str(world / "run")}
    return subprocess.run(
        [sys.executable, str(RUNNER), *args], check=False, capture_output=True, text=True, env=env, timeout=60
    )


def probe_output(log, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines() if log.exists() else []:
            if line.startswith("PROBE "):
                return json.loads(line[6:])
        time.sleep(0.05)
    raise AssertionError(f"no probe output in {log}: {log.read_text() if log.exists() else '(no log)'}")


def probe_unit(world, mode="", extra=""):
    (world / "probe.env").write_text(f'PROBE_MODE={mode}\nFROM_FILE="file value"\nB=from-file\n')
    return write_unit(
        world,
        f"""Type=exec
User={USER}
Group={USER}
Environment="A=one two" B=unit HOME=/nonexistent-home
EnvironmentFile={world}/probe.env
WorkingDirectory={world}
ExecStartPre=/bin/echo pre-start %i $A
ExecStart={SYSTEM_PYTHON} {world}/probe.py %i $A ${{A}}
KillMode=mixed
TimeoutStopSec=1
SuccessExitStatus=SIGKILL 137
LimitNOFILE=4096:8192
UMask=0027
{extra}""",
    )


@needs_root
def test_start_runs_the_unit_as_systemd_would_and_stop_sigterms_the_main_process_only(world):
    unit = probe_unit(world)
    started = run(world, "start", str(unit), "4")
    assert started.returncode == 0, started.stderr
    assert "started, main PID" in started.stdout
    log = world / "run/probe@4.log"
    out = probe_output(log)
    daemon = pwd.getpwnam(USER)
    assert out["argv"] == ["4", "one", "two", "one two"]
    assert out["env"] == {
        "PATH": runner.MANAGER_PATH,
        **dict(runner.locale_environment()[0]),
        "USER": USER,
        "LOGNAME": USER,
        "HOME": "/nonexistent-home",
        "A": "one two",
        "B": "from-file",
        "PROBE_MODE": "",
        "FROM_FILE": "file value",
    }
    assert (out["cwd"], out["uid"], out["gid"]) == (str(world), daemon.pw_uid, daemon.pw_gid)
    assert out["groups"] == sorted(os.getgrouplist(USER, daemon.pw_gid))
    assert (out["umask"], out["nofile"], out["stdin"]) == (0o027, [4096, 8192], "/dev/null")
    assert out["sid"] == out["pid"]  # a session (and process group) of its own
    assert (world / "run/probe@4.pid").read_text().strip() == str(out["pid"])
    assert "pre-start 4 one two" in log.read_text()  # ExecStartPre= ran first, with $A split
    status = run(world, "status", str(unit), "4", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["active"]
    assert run(world, "start", str(unit), "4").returncode == 2  # already running
    stop = run(world, "stop", str(unit), "4", "--json")
    assert stop.returncode == 0, stop.stdout + stop.stderr
    result = json.loads(stop.stdout)
    assert (result["exit_code"], result["exit_status"], result["result"]) == ("killed", signal.SIGTERM, "success")
    assert not result["timed_out"] and result["stop_took"] < 5
    assert result["left_behind_killed"] == out["kids"]  # KillMode=mixed: SIGKILL to the rest once main is gone
    assert not [pid for pid in out["kids"] + [out["pid"]] if runner.alive(pid, None)]
    status = run(world, "status", str(unit), "4")
    assert status.returncode == 3 and "inactive (dead)" in status.stdout
    assert not (world / "run/probe@4.pid").exists()


@needs_root
def test_load_credential_hands_root_only_files_to_the_unit_user_only_while_it_runs(world, monkeypatch):
    monkeypatch.setenv("GPULXC_UNITS_CREDENTIALS_DIR", str(world / "credentials"))
    secret = world / "secret-key"
    secret.write_text("s3cret\n")
    secret.chmod(0o600)  # root's only, as sglang_router writes its key files
    unit = probe_unit(world, extra=f"LoadCredential=api-key:{secret}\nLoadCredential=admin:{secret}\n")
    assert "LoadCredential" not in " ".join(runner.plan(str(unit), "7")["not_applied"])
    assert run(world, "start", str(unit), "7").returncode == 0
    out = probe_output(world / "run/probe@7.log")
    uid = pwd.getpwnam(USER).pw_uid
    assert out["env"]["CREDENTIALS_DIRECTORY"] == str(world / "credentials/probe@7.service")
    assert out["credentials"] == {
        "dir": ["0o500", uid],
        "files": {"admin": ["s3cret\n", "0o400", uid], "api-key": ["s3cret\n", "0o400", uid]},
    }
    assert run(world, "stop", str(unit), "7").returncode == 0
    assert not (world / "credentials/probe@7.service").exists()  # gone with the unit, as systemd removes it
    secret.unlink()  # a credential that cannot be read fails the start, as systemd's 243/CREDENTIALS
    started = run(world, "start", str(unit), "7")
    assert started.returncode == 1 and "CREDENTIALS (status=243)" in started.stderr, started.stderr


@needs_root
def test_stop_kills_the_whole_unit_when_timeout_stop_sec_runs_out(world):
    unit = probe_unit(world, mode="ignore escape")
    assert run(world, "start", str(unit), "5").returncode == 0
    out = probe_output(world / "run/probe@5.log")
    stop = run(world, "stop", str(unit), "5", "--json")
    result = json.loads(stop.stdout)
    assert result["timed_out"] and 1 <= result["main_exited_after"] < 5
    assert set(result["sigkill_sent_to"]) == {out["pid"], *out["kids"]}  # the escaped grandchild too
    assert (result["exit_code"], result["exit_status"], result["result"]) == ("killed", signal.SIGKILL, "success")
    assert not [pid for pid in out["kids"] + [out["pid"]] if runner.alive(pid, None)]
    unit = probe_unit(world, mode="ignore", extra="SuccessExitStatus=\n")  # SIGKILL no longer counts as success
    unit.write_text(unit.read_text().replace("SuccessExitStatus=SIGKILL 137\n", ""))
    assert run(world, "start", str(unit), "5").returncode == 0
    probe_output(world / "run/probe@5.log")
    assert json.loads(run(world, "stop", str(unit), "5", "--json").stdout)["result"] == "signal"


@needs_root
def test_a_failing_start_is_reported_and_runs_nothing_more(world):
    unit = probe_unit(world, extra="ExecStartPre=/bin/false\n")
    started = run(world, "start", str(unit), "6")
    assert started.returncode == 1 and "failed to start: start-pre" in started.stderr, started.stderr
    assert "PROBE" not in (world / "run/probe@6.log").read_text()
    unit = probe_unit(world, extra="ExecStartPre=-/bin/false\n")  # '-': the failure is ignored
    assert run(world, "start", str(unit), "6").returncode == 0
    probe_output(world / "run/probe@6.log")
    assert run(world, "stop", str(unit), "6").returncode == 0
    unit.write_text(unit.read_text().replace(f"ExecStart={SYSTEM_PYTHON}", "ExecStart=/nonexistent/python"))
    started = run(world, "start", str(unit), "6")
    assert started.returncode == 1 and "failed to start: EXEC (status=203)" in started.stderr, started.stderr
    unit.write_text(unit.read_text().replace(f"WorkingDirectory={world}", "WorkingDirectory=/nonexistent"))
    started = run(world, "start", str(unit), "6")
    assert started.returncode == 1, started.stderr  # the first ExecStartPre= already fails, in its chdir()
    assert "failed to start: start-pre CHDIR (status=200)" in started.stderr, started.stderr
    assert "not running" in run(world, "stop", str(unit), "6").stdout


def test_a_limit_above_the_hard_limit_without_cap_sys_resource_is_named_and_can_be_clamped(tmp_path, monkeypatch):
    """The lent GPU machine: root without CAP_SYS_RESOURCE cannot raise LimitNOFILE=65535 (systemd: 205/LIMITS)."""
    hard = runner.resource.getrlimit(runner.resource.RLIMIT_NOFILE)[1]
    unit = write_unit(tmp_path, f"LimitNOFILE={hard + 1}\nLimitCORE=0\nExecStart=/bin/true\n")
    monkeypatch.setattr(runner, "has_capability", lambda bit: False)
    p = runner.plan(str(unit), "1")
    assert any(
        f"LimitNOFILE={hard + 1}:{hard + 1} is above this machine's hard limit {hard}" in w for w in p["warnings"]
    )
    clamped, notes = runner.clamp_limits(p["limits"])
    assert clamped == {"NOFILE": [hard, hard], "CORE": [0, 0]}
    assert notes == [f"LimitNOFILE={hard + 1}:{hard + 1} lowered to {hard}:{hard}"]
    monkeypatch.setattr(runner, "has_capability", lambda bit: True)
    assert not [w for w in runner.plan(str(unit), "1")["warnings"] if "hard limit" in w]


@pytest.mark.parametrize(
    ("fact", "python"),
    [
        (
            {"venv": "/opt/sglang/venv", "stack": "/opt/sglang/stacks/0123456789abcdef"},
            "/opt/sglang/stacks/0123456789abcdef/bin/python",
        ),
        ({"venv": "/srv/other-venv", "stack": "/srv/stacks/x"}, "/opt/sglang/venv/bin/python"),  # another venv's fact
        ({"venv": "/opt/sglang/venv"}, "/opt/sglang/venv/bin/python"),  # a fact from before stacks
        ({}, "/opt/sglang/venv/bin/python"),
    ],
)
def test_the_servers_start_from_the_stacks_own_directory_not_the_venv_link(tmp_path, fact, python):
    """A server keeps the stack it started with when sglang_stack switches the venv link (issue 23)."""
    local = {"gpulxc_stack": {"attention_backends": {"9.0": ["fa3"]}, "fallback_attention_backend": "triton", **fact}}
    facts = role_facts(tmp_path, ansible_local=local)
    unit = render(ROLE / "templates/sglang@.service.j2", facts)
    (exec_start,) = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    assert exec_start.split()[0] == f"ExecStart={python}", exec_start
