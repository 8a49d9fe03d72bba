"""site.yml as a user meets it, on a lab CT (ct990; ports 36000 + i, the router on 8990: lab CTs share the
host's network): from an empty node to 8 healthy servers behind the router in one run, ending with the
summary and its curl line (which works); `--check --diff` on the converged CT changes nothing; then the drift
suite: each of the recipe's eight fixes broken by hand, plus a stopped unit, an edited unit file and a removed
devN line, all repaired by one re-run that reports each repair; then a run reports changed=0; the model staged again,
and a node reboot bringing the CT, its 8 servers and the router back unattended; the removal last.
"""

import json
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import (
    REPO,
    TEMPLATE,
    changed_tasks,
    conf_text,
    ct_state,
    destroy,
    in_ct,
    main_pids,
    pct,
    run_playbook,
    run_site,
    task_output,
)

# a node reboot; the removal's node unit, which goes only when no other CT passes GPUs
pytestmark = pytest.mark.lab_alone

VMID = 990
ROUTER = "http://127.0.0.1:8990"
ENV = "set -a; . /etc/sglang/cuda.env; set +a; "
UV = "/usr/local/bin/uv"
PY = "/opt/sglang/venv/bin/python"
SMG_SITE = "/opt/smg/venv/lib/python3.11/site-packages"
SMG_SO = f"{SMG_SITE}/smg/smg_rs.abi3.so"
FLASHINFER_CCCL = "/opt/sglang/venv/lib/python3.11/site-packages/flashinfer/data/cccl/libcudacxx/include"


@pytest.fixture(scope="module")
def first_run(lab_ready, tmp_path_factory):
    destroy(VMID)
    # an empty node: without the node unit too, which the first run's node steps must write
    subprocess.run(["systemctl", "disable", "gpulxc-nvidia-nodes.service"], capture_output=True, check=False)
    Path(NODE_UNIT).unlink(missing_ok=True)
    path = tmp_path_factory.mktemp("inv") / "ct990.yml"
    path.write_text(
        json.dumps(
            {
                "sglang_containers": {
                    "hosts": {
                        "ct990": {
                            "proxmox_vmid": VMID,
                            "pct_container_node": "lab-pve",
                            "sglang_services_port_base": 36000,
                            "sglang_services_nccl_port_base": 37000,
                            "sglang_router_port": 8990,
                            "sglang_router_prometheus_port": 29990,
                            # a drop-in the role writes (declared), beside which the drift test adds one by hand
                            "sglang_services_unit_drop_ins": {"declared": "[Service]\nEnvironment=GPULXC_DECLARED=1\n"},
                        }
                    }
                }
            }
        )
    )
    proc, changed = run_site(path, "ct990")
    yield path, proc, changed
    destroy(VMID)


@pytest.fixture
def inventory(first_run):
    path, proc, _ = first_run
    assert proc.returncode == 0, proc.stdout[-3000:]
    return path


def readiness():
    with urllib.request.urlopen(ROUTER + "/readiness", timeout=10) as response:
        return json.loads(response.read())


def summary(proc):
    """The summary's lines, from the last task's output."""
    block = proc.stdout.rsplit("TASK [Summary]", 1)[1].split("PLAY RECAP", 1)[0]
    return json.loads(block.split("=>", 1)[1])["msg"]


def test_from_an_empty_node_to_8_healthy_servers_behind_the_router_in_one_run(first_run):
    _, proc, changed = first_run
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert re.search(r"ct990\s*:\s*ok=\d+\s+changed=\d+\s+unreachable=0\s+failed=0", proc.stdout)
    # the node's steps, done by the CT's run (the node's leader: a fleet's is test_fleet.py's) wrote the node unit
    unit = task_output(
        proc, "gpulxc.sglang.pct_container : Install the node unit that creates the NVIDIA device nodes at boot"
    )
    assert "changed: [ct990 -> lab-pve" in unit and Path(NODE_UNIT).exists(), unit
    lines = summary(proc)
    assert lines[0] == "CT 990 on lab-pve"
    assert lines[1] == "GPUs: 8 x NVIDIA RTX PRO 6000 Blackwell Server Edition, SM 12.0 (indexes 0,1,2,3,4,5,6,7)"
    assert lines[2].startswith("stack: sglang 0.5.12, torch 2.11.0, flashinfer-python 0.6.11.post1, ")
    assert "nvidia-cuda-nvcc 13.2.78" in lines[2] and "smg 1.13.0" in lines[2]
    assert lines[4] == "endpoint: http://127.0.0.1:8990 (SGLang model gateway, this container only, no key, plain HTTP)"
    ports = ", ".join(str(36000 + n) for n in range(8))
    assert lines[6:] == [
        "router metrics: http://127.0.0.1:8990/metrics, this container only, no key, plain HTTP",
        f"servers: 8 on 127.0.0.1 port {ports}, this container only, no key",
    ]
    assert readiness() == {"status": "ready", "healthy_workers": 8, "total_workers": 8}
    curl = lines[5].removeprefix("try: ")
    answer = subprocess.run(["/bin/bash", "-c", curl], capture_output=True, text=True, check=True, timeout=60)
    reply = json.loads(answer.stdout)
    assert reply["choices"][0]["message"]["role"] == "assistant", answer.stdout


def test_check_and_diff_on_the_converged_container_change_nothing(inventory):
    proc, changed = run_site(inventory, "ct990", "--check", "--diff")
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]


BREAKS = {
    # the recipe's fixes, in its order
    "1 sglang 0.5.12 + torch 2.11.0": f"{UV} pip install -q --python {PY} --no-deps sglang==0.5.11"
    f" && {UV} pip uninstall -q --python {PY} torch",
    "2 sglang-kernel 0.4.2.post2": f"{UV} pip uninstall -q --python {PY} sglang-kernel",
    "3 the nvcc 13.2 family": f"{UV} pip install -q --python {PY} --no-deps nvidia-nvvm==13.5.37",
    "4 ninja-build": "dpkg -r ninja-build >/dev/null",
    "5 LD_LIBRARY_PATH": "sed -i 's#^LD_LIBRARY_PATH=.*#LD_LIBRARY_PATH=/nowhere#' /etc/sglang/cuda.env",
    "6 lib64, libcudart.so, the libcuda stub": ENV
    + "rm $CUDA_HOME/lib64 $CUDA_HOME/lib/libcudart.so $CUDA_HOME/lib/stubs/libcuda.so",
    "7 the CCCL headers": ENV + "rm $CUDA_HOME/include/nv/target",
    "8 --attention-backend flashinfer": "sed -i 's/^attention-backend: .*/attention-backend: triton/'"
    " /etc/sglang/instance-3.yaml",
    # and the services' own state
    "a stopped unit": "systemctl stop sglang@5.service",
    "an edited unit file": "echo 'Environment=EDITED_BY_HAND=1' >>/etc/systemd/system/sglang@.service",
    # a tool deleted while its package still reads as installed (g++ is a link to g++-12's binary)
    "a deleted compiler": "rm /usr/bin/g++-12 && dpkg-query -W -f='${Status}' g++-12 | grep -q 'ok installed'",
    # a wheel's files deleted while its dist-info stays: smg's native library (the real wheel), FlashInfer's CCCL
    "a wheel's files": f"rm {SMG_SO} && test -e {SMG_SITE}/smg-1.13.0.dist-info/RECORD"
    f" && rm -r {FLASHINFER_CCCL}/cuda/__barrier",
    "a link replaced by a file": ENV
    + "cp --remove-destination $CUDA_HOME/lib/libnvrtc.so.13 $CUDA_HOME/lib/libnvrtc.so",
    "a mode and an owner": "chmod 0644 /etc/sglang/instance-6.yaml && chown nobody:nogroup /etc/sglang/instance-1.env",
    "a drop-in added by hand": "mkdir -p /etc/systemd/system/sglang@.service.d && printf '[Service]\\nEnvironment="
    "DROPPED_IN=1\\n' >/etc/systemd/system/sglang@.service.d/override.conf && systemctl daemon-reload",
}


def assert_repaired():
    """What BREAKS broke works again: each tool, file, link, mode, unit and drop-in, the router's 8 workers."""
    freeze = in_ct(VMID, f"{UV} pip freeze --python {PY}").stdout
    for pin in ("sglang==0.5.12", "torch==2.11.0", "sglang-kernel==0.4.2.post2", "nvidia-nvvm==13.2.78"):
        assert pin in freeze, pin
    assert in_ct(VMID, "command -v ninja").returncode == 0
    assert in_ct(VMID, "g++ --version").returncode == 0
    assert "/nowhere" not in in_ct(VMID, "cat /etc/sglang/cuda.env").stdout
    assert (
        in_ct(
            VMID,
            ENV + "test -L $CUDA_HOME/lib64 && test -e $CUDA_HOME/lib/libcudart.so"
            " && test -e $CUDA_HOME/lib/stubs/libcuda.so && test -e $CUDA_HOME/include/nv/target",
        ).returncode
        == 0
    )
    assert 'attention-backend: "flashinfer"' in in_ct(VMID, "cat /etc/sglang/instance-3.yaml").stdout
    assert "EDITED_BY_HAND" not in in_ct(VMID, "cat /etc/systemd/system/sglang@.service").stdout
    assert "dev6: /dev/nvidia3" in conf_text(VMID)
    assert in_ct(VMID, f"test -s {SMG_SO} && test -d {FLASHINFER_CCCL}/cuda/__barrier").returncode == 0
    assert in_ct(VMID, ENV + "test -L $CUDA_HOME/lib/libnvrtc.so").returncode == 0
    modes = in_ct(VMID, "stat -c '%a %U:%G' /etc/sglang/instance-6.yaml /etc/sglang/instance-1.env").stdout.split("\n")
    assert modes[:2] == ["640 root:sglang", "644 root:root"], modes
    assert in_ct(VMID, "test -e /etc/systemd/system/sglang@.service.d/override.conf").returncode != 0
    declared = "/etc/systemd/system/sglang@.service.d/declared.conf"  # the role's own stays
    assert in_ct(VMID, "systemctl show -P DropInPaths sglang@0.service").stdout.strip() == declared
    environ = in_ct(VMID, "tr '\\0' '\\n' </proc/$(systemctl show -P MainPID sglang@0.service)/environ").stdout
    assert "DROPPED_IN" not in environ and "GPULXC_DECLARED=1" in environ.splitlines()
    assert in_ct(VMID, "systemctl is-active sglang@{0..7}.service").stdout.split() == ["active"] * 8
    assert readiness() == {"status": "ready", "healthy_workers": 8, "total_workers": 8}


def test_each_fix_broken_by_hand_is_repaired_and_reported_by_one_rerun(inventory):
    for name, command in BREAKS.items():
        assert in_ct(VMID, command).returncode == 0, name
    path = f"/etc/pve/lxc/{VMID}.conf"  # and a devN line removed from the CT's config on the node
    with open(path) as handle:
        kept = [line for line in handle if not line.startswith("dev6:")]
    with open(path, "w") as handle:
        handle.writelines(kept)
    assert "dev6:" not in conf_text(VMID)
    assert in_ct(VMID, "command -v ninja").returncode != 0
    assert in_ct(VMID, "g++ --version").returncode != 0

    proc, changed = run_site(inventory, "ct990", "--diff")
    assert proc.returncode == 0, proc.stdout[-3000:]
    reported = changed_tasks(proc)
    text = " ".join(proc.stdout.split())
    layout = "gpulxc.sglang.cuda_surgery : Fix the CUDA layout (lib64, the unversioned library links, the libcuda stub)"
    env = "gpulxc.sglang.cuda_surgery : Write the CUDA environment file and make the shared JIT cache directory"
    services = (
        "gpulxc.sglang.sglang_services : Write the shared cache directory, each instance's configuration,"
        " the units and the services' fact"
    )
    # the install is a job: its result, collected after its progress lines, reports the repair
    stack = (
        "gpulxc.sglang.gpulxc : Collect the result of sglang_stack: keeping /opt/sglang/venv at"
        " /etc/sglang/stack/stack.lock"
    )
    cccl = "gpulxc.sglang.cuda_surgery : Put the CCCL headers back (reinstall the installed nvidia-cuda-cccl)"
    start = "gpulxc.sglang.sglang_services : Start and enable every instance not running or not enabled"
    router_stack = "gpulxc.sglang.sglang_router : Install smg at its pin, its dependencies from one lock"
    # fix: (the task that reports it, the path its diff names where one task keeps several paths)
    expected = {
        "1, 2, 3": (stack, None),
        "4": ("gpulxc.sglang.jit_toolchain : Install ninja, the host C++ compiler and the Python headers", None),
        "5": (env, "/etc/sglang/cuda.env"),
        "6 lib64": (layout, "/nvidia/cu13/lib64"),
        "6 libcudart.so": (layout, "/nvidia/cu13/lib/libcudart.so"),
        "7": (cccl, None),
        "8": (services, "/etc/sglang/instance-3.yaml"),
        "stopped unit": (start, None),
        "edited unit": (services, "/etc/systemd/system/sglang@.service"),
        "deleted compiler": ("gpulxc.sglang.jit_toolchain : Reinstall the packages whose tool no longer runs", None),
        "devN": ("gpulxc.sglang.pct_container : Create the container or bring its config to what is asked", None),
        "wheel files (smg)": (router_stack, None),
        "wheel files (flashinfer)": (stack, None),
        "link replaced": (layout, "/nvidia/cu13/lib/libnvrtc.so"),
        "mode": (services, "/etc/sglang/instance-6.yaml"),
        "owner": (services, "/etc/sglang/instance-1.env"),
        "drop-in": ("gpulxc.sglang.sglang_services : Remove the unit drop-ins added by hand", None),
    }
    missing = {fix: task for fix, (task, _) in expected.items() if task not in reported}
    assert not missing, (missing, reported)
    for fix, (task, path) in expected.items():  # each path the one task repaired is in its diff
        assert path is None or re.search(rf"^--- before: \S*{re.escape(path)}$", task_output(proc, task), re.M), fix
    unchanged = [p for p in ("instance-2.yaml", "instance-4.yaml") if p in task_output(proc, services)]
    assert not unchanged, unchanged  # and only those
    assert any(name.startswith("gpulxc.sglang.cuda_surgery : ") and "libcuda" in name for name in reported), reported
    # the stack's repair names each package it put back (installed -> locked)
    for drifted in (
        "sglang 0.5.11 -> 0.5.12",
        "torch absent -> 2.11.0",
        "sglang-kernel absent -> 0.4.2.post2",
        "nvidia-nvvm 13.5.37 -> 13.2.78",
    ):
        assert drifted in text, drifted
    assert re.search(
        r"flashinfer-python 0\.6\.11\.post1 reinstalled \(\d+ of its files gone or changed, such as "
        + re.escape(FLASHINFER_CCCL + "/cuda/__barrier/"),
        text,
    ), text[-3000:]
    assert "smg==1.13.0 (1 files gone or changed)" in task_output(proc, router_stack)

    assert_repaired()  # not only reported

    proc, changed = run_site(inventory, "ct990")
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]


def test_a_server_running_with_a_drifted_environment_file_is_restarted_once_the_file_is_repaired(inventory):
    # systemd restarts a crashed server with the environment file as it is then: here a drifted one
    assert in_ct(VMID, "sed -i 's#^NO_PROXY=.*#NO_PROXY=drifted#' /etc/sglang/cuda.env").returncode == 0
    assert in_ct(VMID, "systemctl restart sglang@2.service").returncode == 0
    health = "import urllib.request as u; u.urlopen('http://127.0.0.1:36002/health', timeout=5)"
    for _ in range(60):
        if in_ct(VMID, f'python3 -c "{health}"').returncode == 0:
            break
        time.sleep(1)
    before = main_pids(VMID)
    assert "NO_PROXY=drifted" in in_ct(VMID, f"tr '\\0' '\\n' </proc/{before[2]}/environ").stdout

    proc, changed = run_site(inventory, "ct990", "--diff")
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    reported = changed_tasks(proc)
    assert "gpulxc.sglang.sglang_services : Restart sglang@2" in reported, reported
    assert not [
        name
        for name in reported
        if name.startswith("gpulxc.sglang.sglang_services : Restart sglang@")
        and name != "gpulxc.sglang.sglang_services : Restart sglang@2"
    ], reported
    after = main_pids(VMID)
    assert after[2] != before[2]
    assert [pid for i, pid in enumerate(after) if i != 2] == [pid for i, pid in enumerate(before) if i != 2]
    environ = in_ct(VMID, f"tr '\\0' '\\n' </proc/{after[2]}/environ").stdout.splitlines()
    assert "NO_PROXY=127.0.0.1,localhost,::1" in environ
    assert readiness() == {"status": "ready", "healthy_workers": 8, "total_workers": 8}

    proc, changed = run_site(inventory, "ct990")
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]


def wait_ready(deadline_s):
    """Until the router admits all 8 servers (its readiness), or the deadline."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            if readiness()["healthy_workers"] == 8:
                return
        except OSError:
            pass  # the router is not back yet
        time.sleep(1)
    assert readiness() == {"status": "ready", "healthy_workers": 8, "total_workers": 8}


def test_the_model_is_staged_again_and_a_node_reboot_brings_the_container_and_its_8_servers_back_unattended(inventory):
    """The model gone from /dev/shm is staged again by a re-run. Then boot-node: every lab CT stopped, every
    /dev/nvidia* node gone (the .run driver's reboot), the units ordered before pve-guests run, then pve-guests starts
    the onboot CTs. Without the boot unit the start fails with Proxmox's own message (test_role_pct_container's
    negative control); with it, nobody runs Ansible: systemd stages the model (a reboot empties /dev/shm), then starts
    the 8 and the router, which admits them, and a whole re-run has nothing to change."""
    in_ct(VMID, "rm -rf /dev/shm/stand-in")
    proc, changed = run_site(inventory, "ct990", "--tags=services")
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    # the copy is a job: its result, collected after the progress lines, says it changed
    collected = "Collect the result of sglang_services: staging /mnt/models/stand-in in /dev/shm/stand-in] ***\nchanged"
    assert collected in proc.stdout, proc.stdout[-3000:]
    assert in_ct(VMID, "test -f /dev/shm/stand-in/config.json").returncode == 0
    proc = subprocess.run([str(REPO / "lab/boot-node")], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "nvidia-modprobe -c255" in proc.stdout and f"start CT {VMID}: OK" in proc.stdout, proc.stdout
    wait_ready(deadline_s=180)
    assert in_ct(VMID, "systemctl is-active sglang-model-stage.service").stdout.strip() == "active"
    assert in_ct(VMID, "cmp /mnt/models/stand-in/model.safetensors /dev/shm/stand-in/model.safetensors").returncode == 0
    proc, changed = run_site(inventory, "ct990")
    assert proc.returncode == 0 and changed == 0, changed_tasks(proc)


def test_bad_removal_input_fails_before_any_change(inventory):
    before = ct_state(VMID)
    for extra, message in [
        ("pct_container_remove_container=maybe", "pct_container_remove_container"),
        ("sglang_stack_venv=/opt", "sglang_stack_venv must be an absolute path"),
    ]:
        proc, _ = run_playbook("remove.yml", inventory, "ct990", "-e", extra)
        assert proc.returncode != 0 and message in proc.stdout, proc.stdout[-3000:]
        assert "changed: " not in proc.stdout
    assert ct_state(VMID) == before


# Removal (playbooks/remove.yml), the module's last test: it removes what the converge made and destroys ct990.
OTHER = 991  # another CT on the node that passes a GPU (created, not started): the node unit stays for it
NODE_UNIT = "/etc/systemd/system/gpulxc-nvidia-nodes.service"
LEFT_INSIDE = (
    "ls -d /opt/sglang /opt/smg /etc/sglang /etc/smg /var/cache/sglang /var/lib/gpulxc /opt/gpulxc/bin"
    " /dev/shm/stand-in /usr/local/lib/sglang-*.py /usr/local/lib/smg-*.py"
    " /etc/systemd/system/sglang* /etc/systemd/system/smg*"
    " /etc/ansible/facts.d/gpulxc_stack.fact /etc/ansible/facts.d/gpulxc_services.fact"
    " /etc/ansible/facts.d/gpulxc_router.fact 2>/dev/null;"
    " systemctl list-units --all --no-legend --plain 'sglang*' 'smg*' | grep -v ' not-found ';"
    " getent passwd sglang smg"
)


def nvidia_users():
    """The CT configs on the node other than ct990's and OTHER's that pass an NVIDIA device (someone else's CT)."""
    return [
        p.name
        for p in Path("/etc/pve/lxc").glob("*.conf")
        if p.stem not in (str(VMID), str(OTHER)) and "/dev/nvidia" in p.read_text()
    ]


def assert_no_other_nvidia_users():
    assert nvidia_users() == [], f"another CT passes NVIDIA devices (not this test's): {nvidia_users()}"


def test_removal_then_changed_0_the_node_unit_kept_while_another_ct_passes_gpus_and_the_ct_destroyed(inventory):
    assert_no_other_nvidia_users()
    destroy(OTHER)
    pct("create", OTHER, TEMPLATE, "--unprivileged", "0", "--rootfs", "local-lvm:1", "--dev0", "/dev/nvidia0")
    try:
        assert in_ct(VMID, LEFT_INSIDE).stdout.strip(), "nothing to remove: the converge did not run"
        # check mode predicts the removal and changes nothing
        before = ct_state(VMID)
        proc, changed = run_playbook("remove.yml", inventory, "ct990", "--check", "--diff")
        assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
        assert ct_state(VMID) == before

        proc, changed = run_playbook("remove.yml", inventory, "ct990")
        assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
        print(proc.stdout[-2500:])
        left = in_ct(VMID, LEFT_INSIDE)
        assert left.stdout.strip() == "", left.stdout
        assert pct("status", VMID).stdout.strip() == "status: running"
        assert Path(NODE_UNIT).exists(), "the node unit went while CT 991 passes a GPU"
        said = task_output(proc, "gpulxc.sglang.pct_container : Say why the node unit stays")
        assert "stays on lab-pve: CT 990, CT 991 pass NVIDIA devices" in " ".join(said.split()), said or proc.stdout

        # a second run, on the container stopped: it is started, finds nothing, and is stopped again
        pct("stop", VMID)
        proc, changed = run_playbook("remove.yml", inventory, "ct990")
        assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]
        assert pct("status", VMID).stdout.strip() == "status: stopped"
    finally:
        destroy(OTHER)

    # the container destroyed: no container passes a GPU any more, so the node unit goes; then changed=0
    assert_no_other_nvidia_users()
    proc, changed = run_playbook("remove.yml", inventory, "ct990", "-e", "pct_container_remove_container=true")
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    print(proc.stdout[-2500:])
    assert not Path(f"/etc/pve/lxc/{VMID}.conf").exists()
    assert not Path(NODE_UNIT).exists()
    proc, changed = run_playbook("remove.yml", inventory, "ct990", "-e", "pct_container_remove_container=true")
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]
    proc, changed = run_playbook("remove.yml", inventory, "ct990")
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]
