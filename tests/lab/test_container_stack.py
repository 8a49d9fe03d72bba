"""The container's software stack through site.yml on a lab CT (ct960): uv_venv,
sglang_stack (one resolve against the lab package index: stand-ins with the real metadata, the real
CUDA wheels), jit_toolchain and cuda_surgery with a real validation compile. Converge, no recompile on
a second run (its drift repaired: test_drift.py's BREAKS), each fix of the recipe shown necessary by the
recipe's own error, the runtime without its override failing to resolve, bad input refused before any change,
and a Debian 11 CT (glibc 2.31, ct961) refused before anything is installed in it. Its CTs install from a package
index of this file's own (conftest.private_index), whose wheels a test takes away or tampers with, and whose speed
one throttles.
"""

import itertools
import json
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from conftest import (
    assert_refused,
    byte_size,
    changed_tasks,
    ct_state,
    destroy,
    in_ct,
    job_lines,
    private_index,
    refused_side_by_side,
    run_site,
    task_output,
)

REPO = Path(__file__).resolve().parents[2]
VMID = 960
OLD_VMID = 961
VALIDATE = "/var/lib/gpulxc/validate"
ENV = "set -a; . /etc/sglang/cuda.env; set +a; "
UV = "/usr/local/bin/uv"
PY = "/opt/sglang/venv/bin/python"
OLD_TEMPLATE = "local:vztmpl/debian-11-gpulxclab_11.0-1_amd64.tar.zst"
INDEX_PORT = 3144  # this file's own package index
INDEX_URL = f"http://127.0.0.1:{INDEX_PORT}/simple"
INSTALL = "sglang_stack: keeping /opt/sglang/venv at /etc/sglang/stack/stack.lock"  # the install job's progress lines
# what must not change when input is refused: the CT's software and its config
SNAPSHOT = (
    "find /opt/sglang /opt/gpulxc /etc/sglang /etc/uv /var/lib/gpulxc -maxdepth 2 2>/dev/null | sort;"
    " md5sum /etc/sglang/stack/* /etc/sglang/cuda.env 2>/dev/null;"
    f" {UV} pip freeze --python {PY} 2>/dev/null | md5sum"
)


def write_inventory(path, name, vmid, **host):
    host = {"proxmox_vmid": vmid, "pct_container_node": "lab-pve", "uv_venv_index_url": INDEX_URL, **host}
    path.write_text(json.dumps({"sglang_containers": {"hosts": {name: host}}}))
    return path


@pytest.fixture(scope="module")
def index(lab_ready):
    with private_index("container-stack", INDEX_PORT) as index:
        yield index


@pytest.fixture(scope="module")
def inventory(index, tmp_path_factory):
    destroy(VMID)
    path = write_inventory(tmp_path_factory.mktemp("inv") / "ct960.yml", "ct960", VMID)
    proc, _ = play(path, "--skip-tags", "stack,services")  # the container, without its software
    assert proc.returncode == 0, proc.stdout[-3000:]
    yield path
    destroy(VMID)


def play(inventory, *extra, limit="ct960", whole=False):
    """site.yml on the CT; only its stack play (--tags=stack) unless `whole`: the container itself is
    pct_container's suite, and skipping its no-op run keeps this suite's many runs short."""
    tags = ["--skip-tags=services"] if whole else [] if "--skip-tags" in extra else ["--tags=stack"]
    return run_site(inventory, limit, *tags, *extra)


def cuda_home():
    return in_ct(VMID, ENV + "echo $CUDA_HOME").stdout.strip()


def freeze():
    return in_ct(VMID, f"{UV} pip freeze --python {PY}").stdout


def rebuild():
    """Build the validation program as FlashInfer's JIT does: nvcc -c, then the host linker."""
    return in_ct(
        VMID,
        ENV + f"nvcc -gencode arch=compute_120,code=sm_120 -c -o /tmp/v.o {VALIDATE}/validate.cu && "
        "c++ -o /tmp/v /tmp/v.o -L$CUDA_HOME/lib64 -L$CUDA_HOME/lib64/stubs -lcudart -lcuda",
    )


def test_check_mode_on_a_fresh_container_changes_nothing(inventory):
    proc, changed = play(inventory, "--check", whole=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert changed > 0
    assert "gpulxc.sglang.sglang_stack : Resolve the stack once" in proc.stdout
    assert in_ct(VMID, "ls /opt/sglang /opt/gpulxc /usr/local/bin/uv /etc/sglang").returncode != 0  # nothing was made


def test_converges_in_one_resolve_compiles_and_does_not_recompile(inventory):
    proc, changed = play(inventory)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert changed > 0
    installed = freeze()
    for pin in (
        "sglang==0.5.12",
        "torch==2.11.0",
        "sglang-kernel==0.4.2.post2",
        "flashinfer-python==0.6.11.post1",
        "flashinfer-cubin==0.6.11.post1",
        "nvidia-cuda-nvcc==13.2.78",
        "nvidia-nvvm==13.2.78",
        "nvidia-cuda-crt==13.2.78",
        "nvidia-cuda-cccl==13.2.75",
        "nvidia-cuda-runtime==13.2.75",
        "nvidia-cuda-nvrtc==13.0.88",
    ):
        assert pin in installed.splitlines(), pin
    lock = in_ct(VMID, "cat /etc/sglang/stack/stack.lock").stdout
    locked = sorted(line.split()[0] for line in lock.splitlines() if "==" in line and not line.startswith((" ", "#")))
    assert locked == sorted(installed.splitlines())  # the venv is exactly the one lock
    assert lock.count("--hash=sha256:") >= len(locked)  # each pin with its files' sha256
    assert len(locked) > 150  # the real graph of sglang 0.5.12, not just the pins
    # the stand-ins are marked as such; the CUDA wheels are real (nvcc runs)
    site_packages = "/opt/sglang/venv/lib/python3.11/site-packages"
    assert in_ct(VMID, f"ls {site_packages}/sglang-0.5.12.dist-info/GPULXC_LAB_STAND_IN").returncode == 0
    assert "release 13.2" in in_ct(VMID, ENV + "nvcc --version").stdout
    # the shared JIT caches on one local directory, in the environment every build and service reads
    env = in_ct(VMID, "cat /etc/sglang/cuda.env").stdout
    caches = {
        "FLASHINFER_WORKSPACE_BASE": "",
        "TVM_FFI_CACHE_DIR": "/tvm-ffi",
        "TRITON_CACHE_DIR": "/triton",
        "TORCHINDUCTOR_CACHE_DIR": "/torchinductor",
    }
    for key, below in caches.items():
        assert f"{key}=/var/cache/sglang{below}" in env.splitlines(), key
    assert in_ct(VMID, "test -d /var/cache/sglang").returncode == 0
    assert in_ct(VMID, f"{UV} pip check --python {PY}").returncode == 0
    ldd = in_ct(VMID, ENV + f"ldd {VALIDATE}/validate").stdout
    assert "libcudart.so.13 => " + cuda_home() + "/lib/libcudart.so.13" in ldd
    assert "SONAME" in in_ct(VMID, ENV + "readelf -d $CUDA_HOME/lib/stubs/libcuda.so | grep 'libcuda.so.1'").stdout
    stamps = f"stat -c %Y {VALIDATE}/validate /etc/sglang/stack/stack.lock"
    mtime = in_ct(VMID, stamps).stdout
    proc, changed = play(inventory, whole=True)
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]
    assert in_ct(VMID, stamps).stdout == mtime  # no recompile, no resolve
    proc, changed = play(inventory, "--check", "--diff", whole=True)
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]


@pytest.mark.parametrize(
    ("break_it", "error"),
    [
        ("rm $CUDA_HOME/lib64", "cannot find -lcudart"),
        ("rm $CUDA_HOME/lib/libcudart.so", "cannot find -lcudart"),
        ("rm $CUDA_HOME/lib/stubs/libcuda.so", "cannot find -lcuda"),
        # the CCCL headers nvidia-cuda-cccl installs (include/cccl, found through nvcc.profile, and the
        # include/nv shim): without them, the recipe's error
        (
            "mv $CUDA_HOME/include/cccl /tmp/cccl.off && mv $CUDA_HOME/include/nv /tmp/nv.off",
            "nv/target: No such file or directory",
        ),
    ],
)
def test_each_fix_is_needed_and_a_rerun_repairs_it(inventory, break_it, error):
    play(inventory)
    assert in_ct(VMID, ENV + break_it).returncode == 0
    proc = rebuild()
    assert proc.returncode != 0
    assert error in proc.stdout + proc.stderr  # the recipe's own error
    in_ct(VMID, "rm -rf /tmp/cccl.off /tmp/nv.off")
    proc, changed = play(inventory)
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert rebuild().returncode == 0


def test_the_recipes_cccl_overlay_from_flashinfer_is_an_option(inventory):
    """cuda_surgery_cccl_source=flashinfer: nv/ and cuda/ of FlashInfer's bundled CCCL (the stand-in
    carries them at FlashInfer's path) are copied into $CUDA_HOME/include and serve the compile alone."""
    play(inventory)
    overlay = ("-e", "cuda_surgery_cccl_source=flashinfer")
    assert in_ct(VMID, ENV + "mv $CUDA_HOME/include/cccl /tmp/cccl.off && rm -rf $CUDA_HOME/include/nv").returncode == 0
    assert "nv/target: No such file or directory" in rebuild().stderr
    proc, changed = play(inventory, *overlay)
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert "gpulxc.sglang.cuda_surgery : Copy FlashInfer's bundled CCCL into the toolkit" in " ".join(
        changed_tasks(proc)
    )
    bundle = "/opt/sglang/venv/lib/python3.11/site-packages/flashinfer/data/cccl/libcudacxx/include"
    assert (
        in_ct(
            VMID, ENV + f"diff -r {bundle}/nv $CUDA_HOME/include/nv && diff -r {bundle}/cuda $CUDA_HOME/include/cuda"
        ).returncode
        == 0
    )
    # the overlay alone serves the compile
    assert in_ct(VMID, ENV + "test ! -e $CUDA_HOME/include/cccl").returncode == 0
    assert rebuild().returncode == 0
    proc, changed = play(inventory, *overlay)
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]
    in_ct(VMID, "rm -rf /tmp/cccl.off")
    proc, changed = play(inventory)  # back to the wheel's headers: the missing include/cccl is reinstalled
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert in_ct(VMID, ENV + "test -e $CUDA_HOME/include/cccl/nv/target").returncode == 0


def test_an_index_failing_during_an_install_installs_nothing_and_a_rerun_converges(inventory, index):
    """Two locked wheels gone from the venv and from uv's cache; the index then lacks one (404), then serves it
    with other bytes (its sha256 no longer the lock's): each run fails naming the file and installs neither
    (uv installs once every file is downloaded and checked); with the index whole again, a run converges."""
    play(inventory)
    lock = in_ct(VMID, "cat /etc/sglang/stack/stack.lock").stdout
    versions = {name: re.search(rf"^{name}==(\S+)", lock, re.M).group(1) for name in ("filelock", "idna")}
    wheel = next(index.files.glob(f"idna-{versions['idna']}-*.whl"))
    aside = wheel.with_name(wheel.name + ".gpulxc-test")
    uninstall = f"{UV} pip uninstall -q --python {PY} filelock idna && {UV} cache clean filelock idna"
    assert in_ct(VMID, uninstall).returncode == 0
    wheel.rename(aside)
    try:
        proc, _ = play(inventory)  # the index answers 404 for it
        out = " ".join(proc.stdout.split())
        assert proc.returncode != 0 and "stops it before anything is installed" in out, proc.stdout[-3000:]
        assert wheel.name in out
        assert not re.search(r"^(filelock|idna)==", freeze(), re.M)  # filelock, downloaded fine, not installed
        shutil.copy(aside, wheel)
        with zipfile.ZipFile(wheel, "a") as tampered:  # a valid wheel still, with other bytes
            tampered.writestr("idna/gpulxc_tampered.py", "")
        proc, _ = play(inventory)
        out = " ".join(proc.stdout.split())
        assert proc.returncode != 0 and "Hash mismatch" in out and f"idna=={versions['idna']}" in out, out[-3000:]
        assert not re.search(r"^(filelock|idna)==", freeze(), re.M)
    finally:
        wheel.unlink(missing_ok=True)
        aside.rename(wheel)
    proc, changed = play(inventory)
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert {f"{name}=={version}" for name, version in versions.items()} <= set(freeze().splitlines())


def test_an_install_from_a_throttled_index_prints_its_progress_every_interval(inventory, index):
    """flashinfer-python (8 MiB) gone from the venv and from uv's cache, and the index serving wheels at 256 KiB/s:
    the repair's install takes half a minute, and its wait prints a line every 5 s (sglang_stack_progress_interval)
    with uv's cache growing as the wheel comes in, the last one saying it ended; then the run converges."""
    play(inventory)
    uninstall = f"{UV} pip uninstall -q --python {PY} flashinfer-python && {UV} cache clean -q flashinfer-python"
    assert in_ct(VMID, uninstall).returncode == 0
    index.throttle.write_text(str(256 * 1024))  # lab/index/serve's: the bytes a second it serves wheels at
    try:
        proc, changed = play(inventory, "-e", "sglang_stack_progress_interval=5")
    finally:
        index.throttle.unlink(missing_ok=True)
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    lines = job_lines(proc, INSTALL)
    print(lines)
    assert len(lines) >= 4 and lines[-1][0].endswith("(ended)"), proc.stdout[-3000:]
    waited = [0] + [seconds for _, seconds in lines]
    assert max(b - a for a, b in itertools.pairwise(waited)) <= 8, waited  # 5 s slices, a round trip between
    caches = [byte_size(re.search(r"uv's cache ([0-9.]+ [KMG]?i?B)", line).group(1)) for line, _ in lines]
    assert caches[-1] - caches[0] >= 4 << 20, lines  # the wheel came in while it printed
    assert any(line.startswith("flashinfer-python==") for line in freeze().splitlines())
    proc, changed = play(inventory)
    assert proc.returncode == 0 and changed == 0, changed_tasks(proc)


REPORT = "gpulxc.sglang.sglang_stack : Report what the stack run repaired"
# Run from the old stack's python, as a server is (its ExecStart names the stack's directory): every change of what
# the venv link points to, and whether that stack was whole (its completion marker) when it did.
WATCH_THE_LINK = """
import os, time
seen, stop = None, time.monotonic() + 600
while time.monotonic() < stop and not os.path.exists("/root/gpulxc-stop-watching"):
    target = os.path.realpath("/opt/sglang/venv")
    now = (target, os.path.exists(os.path.join(target, ".gpulxc-stack-complete")))
    if now != seen:
        seen = now
        print(*now, flush=True)
    time.sleep(0.002)
"""


def test_a_new_lock_is_installed_beside_the_running_stack_and_switched_to_in_one_rename(inventory):
    """An older pin of one package makes a new lock: it is installed in its own directory under /opt/sglang/stacks
    while the venv still links to the running stack, then the link is switched in one rename; a process of the old
    stack, watching the link every 2 ms, never sees it point at a stack that is not whole, and keeps its own. Back to
    the old lock, the venv is switched back to the stack that stayed, with nothing installed."""
    play(inventory)
    old = in_ct(VMID, "readlink -f /opt/sglang/venv").stdout.strip()
    assert in_ct(VMID, "test -L /opt/sglang/venv").returncode == 0 and old.startswith("/opt/sglang/stacks/"), old
    in_ct(VMID, f"rm -f /root/gpulxc-stop-watching && touch {old}/gpulxc-test-planted")  # gone if it were made again
    watcher = subprocess.Popen(
        ["/usr/sbin/pct", "exec", str(VMID), "--", f"{old}/bin/python", "-c", WATCH_THE_LINK],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        proc, changed = play(inventory, "-e", json.dumps({"sglang_stack_extra_packages": ["pycountry==24.6.1"]}))
    finally:
        in_ct(VMID, "touch /root/gpulxc-stop-watching")
        seen = watcher.communicate(timeout=30)[0].splitlines()
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    new = in_ct(VMID, "readlink -f /opt/sglang/venv").stdout.strip()
    assert new != old and new.startswith("/opt/sglang/stacks/"), (old, new)
    assert seen == [f"{old} True", f"{new} True"], seen  # one switch, from a whole stack to a whole stack
    assert "pycountry==24.6.1" in freeze().splitlines()
    kept = in_ct(VMID, f"{UV} pip freeze --python {old}/bin/python").stdout.splitlines()
    assert "pycountry==26.2.16" in kept  # as it was
    out = " ".join(task_output(proc, REPORT).split())
    assert f"in its own stack {new}, then switched /opt/sglang/venv to it (from {old})" in out, proc.stdout[-9000:]
    assert rebuild().returncode == 0  # cuda_surgery's work is on the new stack too

    proc, changed = play(inventory)  # the lock it had: its stack is there, whole
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert in_ct(VMID, "readlink -f /opt/sglang/venv").stdout.strip() == old
    assert in_ct(VMID, f"test -e {old}/gpulxc-test-planted").returncode == 0  # switched back to, not made again
    assert "pycountry==26.2.16" in freeze().splitlines()
    out = " ".join(task_output(proc, REPORT).split())
    assert f"in its own stack {old}, then switched /opt/sglang/venv to it (from {new}), over what differed" in out, out
    proc, changed = play(inventory)
    assert proc.returncode == 0 and changed == 0, changed_tasks(proc)


def test_every_uv_run_in_the_container_uses_the_proxy_and_ca_settings(inventory):
    """uv_venv_proxy and uv_venv_ca_bundle reach every uv run (the stack's resolve and installs, an
    operator's), loopback excepted: a proxy that refuses connections breaks an index elsewhere only."""
    proxy = {"uv_venv_proxy": "http://127.0.0.1:9", "uv_venv_ca_bundle": "/etc/ssl/certs/ca-certificates.crt"}
    proc, changed = play(inventory, "-e", json.dumps(proxy))
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]  # the lab index is on loopback: no proxy
    show = "import os; print(*(os.environ[k] for k in ('HTTPS_PROXY', 'SSL_CERT_FILE', 'NO_PROXY')))"
    seen = in_ct(VMID, f'{UV} run --no-project --python /usr/bin/python3 -- python3 -c "{show}"')
    assert seen.stdout.split() == [proxy["uv_venv_proxy"], proxy["uv_venv_ca_bundle"], "127.0.0.1,localhost,::1"]
    elsewhere = in_ct(VMID, f"{UV} pip compile --no-cache --index-url https://pypi.org/simple - <<< 'six'")
    assert elsewhere.returncode != 0  # through the refusing proxy
    proc, changed = play(inventory)
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert in_ct(VMID, f"{UV} pip compile --no-cache --index-url https://pypi.org/simple - <<< 'six'").returncode == 0


def test_the_runtime_without_its_declared_override_does_not_resolve(inventory):
    play(inventory)
    before = in_ct(VMID, SNAPSHOT).stdout
    # under the name it had before 0.3.0 (the role cuda_wheels): still read, with a deprecation warning
    proc, _ = play(inventory, "-e", "cuda_wheels_runtime_override=false")
    assert proc.returncode != 0
    out = " ".join(proc.stdout.split())
    assert "The resolve failed, nothing was installed or changed." in out
    assert "sglang_stack_cuda_runtime_override" in out and "sglang_stack_profile" in out  # the variables to fix
    warned = " ".join(proc.stderr.split())
    assert "cuda_wheels_runtime_override is renamed sglang_stack_cuda_runtime_override" in warned, warned[-2000:]
    assert "No solution found" in out and "nvidia-cuda-runtime" in out  # uv's own account of torch's pin
    # the lock, its inputs and the venv are as they were
    after = in_ct(VMID, SNAPSHOT).stdout
    changed_lines = set(after.splitlines()) ^ set(before.splitlines())
    assert all("overrides.d" in line for line in changed_lines) or not changed_lines, changed_lines
    proc, _ = play(inventory)
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_the_second_profile_resolves_against_its_real_metadata_and_brings_its_own_flag_table(inventory):
    """sglang-0.5.23 (profiles/): its pins and its real graph from the lab index (recorded from PyPI, extras and
    all), fix 3 still needed (torch 2.14.1's cuda-toolkit 13.0.3 pins the runtime at 13.0.96), and the stand-in
    server of that wheel parsing 0.5.23's flags: the reference's --mamba-scheduler-strategy is gone; then back."""
    second = ("-e", "sglang_stack_profile=sglang-0.5.23")
    proc, _ = play(inventory, *second, "-e", "sglang_stack_cuda_runtime_override=false")
    out = " ".join(proc.stdout.split())
    assert proc.returncode != 0 and "No solution found" in out and "nvidia-cuda-runtime" in out, out[-3000:]
    proc, changed = play(inventory, *second)
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    installed = freeze().splitlines()
    for pin in (
        "sglang==0.5.23",
        "torch==2.14.1",
        "sglang-kernel==0.4.10",
        "flashinfer-python==0.7.2",
        "transformers==5.19.0",
        "nvidia-cuda-nvcc==13.2.78",
        "nvidia-cuda-runtime==13.2.75",
        "nvidia-cuda-nvrtc==13.0.88",
    ):
        assert pin in installed, pin
    assert "flashinfer-cubin" not in " ".join(installed) and len(installed) > 190  # its own graph, not 0.5.12's
    assert in_ct(VMID, f"{UV} pip check --python {PY}").returncode == 0
    launch = f"{PY} -m sglang.launch_server --model-path /nonexistent"
    gone = in_ct(VMID, f"{launch} --mamba-scheduler-strategy extra_buffer")
    assert gone.returncode == 2 and "unrecognized arguments: --mamba-scheduler-strategy" in gone.stderr, gone.stderr
    bad = in_ct(VMID, f"{launch} --mamba-radix-cache-strategy lazy")
    assert bad.returncode == 2 and "invalid choice: 'lazy'" in bad.stderr, bad.stderr
    proc, changed = play(inventory, *second)
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]
    proc, _ = play(inventory)  # back to the default for the tests after this one
    assert proc.returncode == 0 and "sglang==0.5.12" in freeze().splitlines(), proc.stdout[-3000:]


SECOND = ("-e", "sglang_stack_profile=sglang-0.5.23")
# one stand-in server of the CT's stack on GPU 0, as a unit starts it (the CUDA environment file, the model's
# config.json), until /health answers 200 (then its /server_info's attention backend) or it exits; its output
SERVE = r"""
import json, subprocess, sys, time, urllib.request
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
deadline = time.monotonic() + 120
while time.monotonic() < deadline and proc.poll() is None:
    try:
        if urllib.request.urlopen("http://127.0.0.1:30990/health", timeout=5).status == 200:
            info = json.load(urllib.request.urlopen("http://127.0.0.1:30990/server_info", timeout=5))
            print("HEALTHY attention_backend=" + str(info["attention_backend"]))
            break
    except OSError:
        time.sleep(0.5)
proc.kill()
print(proc.communicate()[0])
"""


def serve(backend="flashinfer"):
    """A cold start (FlashInfer 0.7.2's JIT cache emptied, so the JIT build runs): its output."""
    flag = f" --attention-backend {backend}" if backend else ""
    in_ct(
        VMID,
        "mkdir -p /tmp/model && echo '{}' >/tmp/model/config.json && rm -rf /var/cache/sglang/.cache/flashinfer"
        f" && cat >/tmp/serve.py <<'EOF'\n{SERVE}\nEOF",
    )
    return in_ct(
        VMID,
        ENV + f"CUDA_VISIBLE_DEVICES=0 {PY} /tmp/serve.py {PY} -m sglang.launch_server"
        f" --model-path /tmp/model --host 127.0.0.1 --port 30990{flag}",
    ).stdout


@pytest.fixture(scope="module")
def second_profile(inventory):
    """The module's CT on sglang-0.5.23 for the tests that ask for it, and left there: the module's CT goes next (the
    way back to the default, under streams, is test_router.py's upgrade test)."""
    proc, _ = play(inventory, *SECOND)
    assert proc.returncode == 0 and "sglang==0.5.23" in freeze().splitlines(), proc.stdout[-3000:]


# The recipe's fixes against sglang 0.5.23, each broken on a CT of that profile: (fix, the break, where the
# failure shows - the stand-in server's cold start or `uv pip check` -, the error, or None where 0.5.23 still
# serves without the fix). Sources: the PyPI wheels sglang-0.5.23 (sglang:), flashinfer_python-0.7.2
# (flashinfer:), as tagged v0.5.23 and v0.7.2. Fix 3 (the runtime >= 13.2 as an override of torch's pin): the
# test above, which fails the resolve without the override.
FIXES_0_5_23 = [
    # 1: torch at sglang's ABI. sglang 0.5.23 states the pin itself (METADATA Requires-Dist torch==2.14.1), so a
    # resolve cannot pick another; another torch put in by hand breaks the venv's own consistency. (The stand-in
    # does not model sgl_kernel's undefined symbols of a torch of another ABI.)
    ("1 torch 2.14.1", f"{UV} pip install -q --python {PY} --no-deps torch==2.11.0", "check", "torch==2.14.1"),
    # 2: sglang-kernel. Checked at every launch (srt/entrypoints/engine.py:1960-1966, assert_pkg_version in
    # srt/utils/common.py:2422-2437), before a model loads.
    (
        "2 sglang-kernel",
        f"{UV} pip uninstall -q --python {PY} sglang-kernel",
        "serve",
        "sglang-kernel with minimum required version 0.4.9 is not installed",
    ),
    # 4: not needed. sglang 0.5.23 and flashinfer-python 0.7.2 require the pip `ninja` wheel (METADATA
    # Requires-Dist: ninja), its binary is the venv's bin/ninja, and FlashInfer runs `ninja` from PATH
    # (flashinfer:jit/cpp_ext.py:411-440, run_ninja), which the CUDA environment file starts with the venv's bin.
    # (The host compiler and Python headers jit_toolchain installs with it are still needed.)
    ("4 ninja-build", "dpkg -r ninja-build >/dev/null", "serve", None),
    # 5: not needed. libnvrtc.so.13 is loaded with torch's CUDA libraries from the venv's nvidia/cu13/lib (the
    # H200 served 0.5.12 without LD_LIBRARY_PATH: evidence/gpu/runs/2026-12-02-c); the stand-in models that.
    (
        "5 LD_LIBRARY_PATH",
        "sed -i 's#^LD_LIBRARY_PATH=.*#LD_LIBRARY_PATH=/nowhere#' /etc/sglang/cuda.env",
        "serve",
        None,
    ),
    # 6: needed. FlashInfer 0.7.2 links -L$cuda_home/lib64 -L$cuda_home/lib64/stubs -lcudart -lcuda
    # (flashinfer:jit/cpp_ext.py:272-278), sglang's own JIT kernels -L$cuda_home/lib64 -lcudart and the stub
    # directory lib64/stubs (sglang:kernels/jit/utils/compile/toolchain.py:43-68, 244).
    (
        "6 lib64, libcudart.so, the libcuda stub",
        ENV + "rm $CUDA_HOME/lib64 $CUDA_HOME/lib/stubs/libcuda.so",
        "serve",
        "cannot find -lcudart",
    ),
    # 7: needed. FlashInfer adds its vendored CCCL with -I (flashinfer:jit/cpp_ext.py:131-175, jit/env.py:407-411)
    # but sglang's own JIT kernels do not: their include path is tvm-ffi's only (toolchain.py:218-222), and they
    # include CCCL (<cub/...> in kernels/jit/csrc/mamba/causal_conv1d.cuh, a load_jit build) - the
    # stand-in's JIT build includes <nv/target> without FlashInfer's -I, as those builds do.
    (
        "7 the CCCL headers",
        ENV + "mv $CUDA_HOME/include/cccl /tmp/cccl.off && mv $CUDA_HOME/include/nv /tmp/nv.off",
        "serve",
        "nv/target: No such file or directory",
    ),
    # 8: not needed on SM 12.x. Without --attention-backend 0.5.23 picks flashinfer for an MHA model off Hopper and
    # SM100 where FlashInfer is importable (srt/arg_groups/overrides.py:1126-1139, model_override_base.py:331-334);
    # the Qwen3.5 hybrids' own default applies on SM100 only (arg_groups/model_overrides/qwen3_5.py:24-27).
    ("8 --attention-backend flashinfer", None, "serve", None),
]


@pytest.mark.parametrize("case", FIXES_0_5_23, ids=[case[0] for case in FIXES_0_5_23])
def test_the_second_profile_needs_each_fix_or_serves_without_it(inventory, second_profile, case):
    """sglang-0.5.23: each of the recipe's fixes broken; a needed one fails with the real 0.5.23's error and a re-run
    repairs it, one no longer needed leaves the server healthy (a re-run still puts it back)."""
    fix, break_it, probe, error = case

    def outcome():
        if probe == "check":
            proc = in_ct(VMID, f"{UV} pip check --python {PY}")
            return proc.stdout + proc.stderr
        return serve(None if break_it is None else "flashinfer")

    healthy = "HEALTHY attention_backend=flashinfer"
    if break_it is not None:
        assert in_ct(VMID, break_it).returncode == 0, fix
    out = outcome()
    in_ct(VMID, "rm -rf /tmp/cccl.off /tmp/nv.off")
    if error is None:
        assert healthy in out, out[-3000:]  # 0.5.23 serves without the fix
    else:
        assert healthy not in out and error in out, out[-3000:]  # its own error
    if break_it is None:
        return
    proc, changed = play(inventory, *SECOND)
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert "sglang==0.5.23" in freeze().splitlines()
    out = outcome()
    checked = probe == "check" and in_ct(VMID, f"{UV} pip check --python {PY}").returncode == 0
    assert checked or healthy in out, out[-3000:]


# Bad input: its breadth (every class of bad value) is tests/unit/roles/test_bad_input.py's; here, runs that several
# bad settings share, side by side, refused with every message and the CT left byte for byte as it was: the CUDA
# family's check, and the container's Python as the CT answers.
REFUSED = {
    "cuda settings": (
        {
            "sglang_stack_cuda_family": {
                "nvidia-cuda-nvcc": "13.2.78",
                "nvidia-nvvm": "13.5.37",
                "nvidia-cuda-crt": "13.2.78",
                "nvidia-cuda-cccl": "13.2.75",
            },
            "sglang_stack_cuda_runtime_version": "latest",
        },
        ["sglang_stack_cuda_family mixes CUDA minors ['13.2', '13.5']", "sglang_stack_cuda_runtime_version (latest)"],
    ),
    "no such python": (
        {"uv_venv_python": "/usr/bin/python3.99"},
        ["uv_venv_python /usr/bin/python3.99 does not run in the container"],
    ),
}


@pytest.fixture(scope="module")
def refused(inventory):
    """Each REFUSED run on the converged CT, side by side, and the CT before and after them all."""
    play(inventory)
    arguments = [(inventory, "-e", json.dumps(extra)) for extra, _ in REFUSED.values()]
    return refused_side_by_side(play, arguments, lambda: (in_ct(VMID, SNAPSHOT).stdout, ct_state(VMID)))


@pytest.mark.parametrize("case", list(REFUSED))
def test_bad_input_fails_before_any_change(refused, case):
    runs, before, after = refused
    assert_refused(runs[list(REFUSED).index(case)], REFUSED[case][1])
    assert after == before


def test_a_debian_11_container_is_refused_before_anything_is_installed(lab_ready, tmp_path):
    destroy(OLD_VMID)
    inventory = write_inventory(tmp_path / "ct961.yml", "ct961", OLD_VMID, pct_container_ostemplate=OLD_TEMPLATE)
    try:
        proc, _ = play(inventory, limit="ct961", whole=True)
        assert proc.returncode != 0
        out = " ".join(proc.stdout.split())
        assert "uv_venv: the container has glibc 2.31; sglang >= 0.5.11 wheels need glibc >= 2.34" in out
        assert "pct_container_ostemplate" in out
        assert in_ct(OLD_VMID, "ls /opt/gpulxc /opt/sglang /usr/local/bin/uv /etc/uv").returncode != 0
    finally:
        destroy(OLD_VMID)
