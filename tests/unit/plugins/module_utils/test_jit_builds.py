"""_jit_builds: the FlashInfer JIT builds running now, from a /proc tree - the op from ninja's command line as
FlashInfer's run_ninja writes it, the unit from the cgroup (cgroup v2 and the v1/v2 hybrid), the age from the
start time; anything else in /proc is not a build."""

import os

import pytest
from ansible_collections.gpulxc.sglang.plugins.module_utils import _jit_builds

TICKS = os.sysconf("SC_CLK_TCK")
JIT = "/var/cache/sglang/.cache/flashinfer/0.6.11/120a/cached_ops"


def process(proc, pid, argv, cgroup, *, started_s, comm="ninja"):
    """A /proc/PID with its cmdline, cgroup and stat (field 22: the start in clock ticks since boot)."""
    pid_dir = proc / str(pid)
    pid_dir.mkdir()
    (pid_dir / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (pid_dir / "cgroup").write_text(cgroup)
    fields = ["S", "1", *["0"] * 17, str(int(started_s * TICKS)), "0"]
    (pid_dir / "stat").write_text(f"{pid} ({comm}) " + " ".join(fields) + "\n")


V2 = "0::/system.slice/system-sglang.slice/sglang@{}.service\n"
HYBRID = (  # the lab host's v1/v2 hybrid: the unit in the v1 hierarchies, the v2 one at the root
    "12:memory:/system.slice/sglang@{0}.service\n1:name=systemd:/system.slice/system-sglang.slice/sglang@{0}.service\n"
    "0::/\n"
)


@pytest.fixture
def proc(tmp_path):
    root = tmp_path / "proc"
    root.mkdir()
    (root / "self").mkdir()  # not a pid
    return root


def test_flashinfers_ninja_in_a_servers_cgroup_is_its_build_with_its_age(proc):
    process(
        proc,
        101,
        ["ninja", "-v", "-C", JIT, "-f", f"{JIT}/batch_decode_bf16/build.ninja", "-j", "8"],
        V2.format(0),
        started_s=1000,
    )
    process(proc, 102, ["/usr/bin/ninja", "-C", f"{JIT}/gpulxc_standin_decode"], HYBRID.format(3), started_s=1100)
    assert _jit_builds.running_builds(str(proc), now=1130.0) == {
        "sglang@0.service": [("batch_decode_bf16", 130.0)],
        "sglang@3.service": [("gpulxc_standin_decode", 30.0)],
    }


@pytest.mark.parametrize(
    ("argv", "cgroup"),
    [
        (["python3", "-m", "sglang.launch_server", "-C", JIT], V2.format(0)),  # not ninja
        (["ninja", "-C", JIT + "/op"], "0::/user.slice/session-1.scope\n"),  # not a service's: a shell's build
        (["ninja", "--version"], V2.format(0)),  # no build named
        ([], V2.format(0)),  # a kernel thread: an empty command line
    ],
)
def test_anything_else_is_not_a_build(proc, argv, cgroup):
    process(proc, 200, argv, cgroup, started_s=1)
    assert _jit_builds.running_builds(str(proc), now=10.0) == {}


def test_a_process_that_ends_while_read_is_skipped(proc):
    process(proc, 300, ["ninja", "-C", JIT + "/op"], V2.format(1), started_s=5)
    (proc / "300" / "stat").unlink()
    (proc / "301").mkdir()  # gone before its files were read
    assert _jit_builds.running_builds(str(proc), now=10.0) == {}


def test_a_comm_with_parentheses_and_spaces_reads_the_right_start(proc):
    process(proc, 400, ["ninja", "-C", JIT + "/op"], V2.format(2), started_s=40, comm="nin ja) (x")
    assert _jit_builds.running_builds(str(proc), now=100.0) == {"sglang@2.service": [("op", 60.0)]}


def test_the_real_proc_reads_without_error():
    assert isinstance(_jit_builds.running_builds(), dict)
