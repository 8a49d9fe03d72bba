"""Air-gapped: a wheelhouse built on the lab host (the connected machine) from the lab's index for ct950's stack
(`playbooks/wheelhouse.yml`), then ct950 converges with `site.yml` from it. ct950 has no network at all: no
netN, so LXC gives it a network namespace of its own with only loopback (the lab realises a CT without netN as
`lxc.net.0.type = empty`); the wheelhouse is an mpN bind mount, read-only; its template already has
jit_toolchain's packages (no Debian mirror is reachable either: a site's own template). While the run installs,
requests from inside the CT to the lab's index and to PyPI fail, and the index serves nothing: the wheelhouse is built
from an index of this file's own (conftest.private_index), whose log no other lab CT writes to."""

import hashlib
import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import (
    JIT_TEMPLATE,
    REPO,
    ct_state,
    destroy,
    pct,
    playbook_command,
    private_index,
    run_playbook,
    run_site,
)

VMID = 950
WHEELHOUSE = Path("/var/lib/gpulxc-lab/test-wheelhouse")
INDEX_PORT = 3143  # this file's own package index: the offline CT's converge must leave nothing in its log
INDEX_URL = f"http://127.0.0.1:{INDEX_PORT}"
HOST = {
    "proxmox_vmid": VMID,
    "pct_container_node": "lab-pve",
    "pct_container_net0": "",
    "pct_container_ostemplate": JIT_TEMPLATE,
    "pct_container_gpus": [0, 1],
    "pct_container_mounts": [
        {"host_path": "/var/lib/gpulxc-lab/models", "ct_path": "/mnt/models", "read_only": True},  # as inventories/lab
        {"host_path": str(WHEELHOUSE), "ct_path": "/mnt/wheelhouse", "read_only": True},
    ],
    "uv_venv_wheelhouse": "/mnt/wheelhouse",
    "uv_venv_index_url": f"{INDEX_URL}/simple",
    "uv_venv_uv_wheel_url": f"{INDEX_URL}/files/uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    # ports of its own: the lab's other CTs run beside it (their servers on the host's network)
    "sglang_services_port_base": 39000,
    "sglang_services_nccl_port_base": 39100,
    "sglang_router_port": 8950,
    "sglang_router_prometheus_port": 29950,
}
# Run inside the CT: a request to the lab's index (on the host's loopback) and to PyPI; prints what each raised.
REACH = (
    "import urllib.request\n"
    f"for url in ('{INDEX_URL}/simple/', 'http://127.0.0.1:3141/simple/', 'https://pypi.org/simple/'):\n"
    "    try:\n"
    "        urllib.request.urlopen(url, timeout=10)\n"
    "        print(url, 'REACHED')\n"
    "    except OSError as error:\n"
    "        print(url, 'failed:', error)\n"
)


def run_wheelhouse(inventory, *args):
    """`ansible-playbook playbooks/wheelhouse.yml -l ct950`: the process and the recap's changed count."""
    return run_playbook("playbooks/wheelhouse.yml", inventory, f"ct{VMID}", *args)


def lock_pins(path):
    """{name: version} of a hashed lock's pins."""
    return dict(re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", path.read_text(), flags=re.MULTILINE))


@pytest.fixture(scope="module")
def index(lab_ready):
    with private_index("offline", INDEX_PORT) as index:
        yield index


@pytest.fixture(scope="module")
def inventory(index, tmp_path_factory):
    destroy(VMID)
    shutil.rmtree(WHEELHOUSE, ignore_errors=True)
    path = tmp_path_factory.mktemp("inv") / "offline.yml"
    path.write_text(json.dumps({"sglang_containers": {"hosts": {f"ct{VMID}": HOST}}}))
    yield path
    destroy(VMID)
    shutil.rmtree(WHEELHOUSE, ignore_errors=True)


@pytest.fixture(scope="module")
def wheelhouse(inventory):
    proc, changed = run_wheelhouse(inventory, "-e", f"wheelhouse_dest={WHEELHOUSE}")
    assert proc.returncode == 0 and changed == 1, proc.stdout[-3000:]
    return WHEELHOUSE


def test_bad_wheelhouse_input_is_refused_naming_the_variable_before_anything_is_written(inventory, tmp_path):
    dest = tmp_path / "never"
    cases = [
        (["-e", "wheelhouse_platform=linux"], "wheelhouse_platform linux must be <arch>-manylinux_2_<glibc minor>"),
        (
            ["-e", "wheelhouse_python_version=3.9"],
            "does not support (it has wheels for 3.10, 3.11, 3.12, 3.13): choose"
            " another Python (wheelhouse_python_version)",
        ),
        (["-e", "sglang_router_version=latest"], "sglang_router_version latest must be an exact smg version"),
    ]
    for args, message in cases:
        proc, _ = run_wheelhouse(inventory, "-e", f"wheelhouse_dest={dest}", *args)
        assert proc.returncode != 0 and message in proc.stdout, (args, proc.stdout[-2000:])
        assert not dest.exists(), args
    proc, _ = run_wheelhouse(inventory)
    assert proc.returncode != 0 and "wheelhouse_dest must be the absolute path" in proc.stdout, proc.stdout[-2000:]
    # two containers that install different stacks cannot share one run (the module runs once)
    two = tmp_path / "two.yml"
    hosts = {f"ct{VMID}": HOST, "ct951": dict(HOST, proxmox_vmid=951, sglang_router_version="1.12.0")}
    two.write_text(json.dumps({"sglang_containers": {"hosts": hosts}}))
    proc, _ = run_playbook("playbooks/wheelhouse.yml", two, f"ct{VMID},ct951", "-e", f"wheelhouse_dest={dest}")
    assert proc.returncode != 0 and "but the containers ct951 ask for another one than ct950" in proc.stdout, (
        proc.stdout[-2000:]
    )
    assert not dest.exists()
    # check mode says it would build, and writes nothing
    proc, changed = run_wheelhouse(inventory, "--check", "--diff", "-e", f"wheelhouse_dest={dest}")
    assert proc.returncode == 0 and changed == 1 and not dest.exists(), proc.stdout[-2000:]


def test_the_wheelhouse_holds_every_locked_wheel_with_its_sha256_and_a_rebuild_changes_nothing(inventory, wheelhouse):
    files = {p.name for p in wheelhouse.glob("*.whl")}
    for lock in ("stack.lock", "router.lock"):
        for name, version in lock_pins(wheelhouse / lock).items():
            stem = re.sub(r"[-_.]+", "_", name).lower() + "-" + version + "-"
            assert any(f.lower().startswith(stem) for f in files), (lock, name, version)
    stack = lock_pins(wheelhouse / "stack.lock")
    assert stack["sglang"] == "0.5.12" and stack["nvidia-cuda-runtime"] == "13.2.75"  # the declared override
    assert stack["nvidia-cuda-nvcc"] == "13.2.78" and "smg" in lock_pins(wheelhouse / "router.lock")
    assert "uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl" in files
    sums = dict(reversed(line.split("  ", 1)) for line in (wheelhouse / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == files
    for name in ("uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", *sorted(files)[:5]):
        assert hashlib.sha256((wheelhouse / name).read_bytes()).hexdigest() == sums[name], name
    proc, changed = run_wheelhouse(inventory, "-e", f"wheelhouse_dest={wheelhouse}")
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]


def test_the_offline_ct_converges_from_the_wheelhouse_and_reaches_no_index(inventory, index, wheelhouse):
    offset = index.log.stat().st_size
    argv, env = playbook_command("site.yml", inventory, f"ct{VMID}")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env)
    reach = None
    try:
        # during the run, once uv is set up in the CT (the stack is being installed from the wheelhouse)
        while proc.poll() is None and reach is None:
            if pct("exec", VMID, "--", "test", "-e", "/etc/uv/uv.toml", check=False).returncode == 0:
                reach = pct("exec", VMID, "--", "python3", "-c", REACH, check=False).stdout
                links = pct("exec", VMID, "--", "ip", "-o", "link", check=False).stdout
            time.sleep(1)
        out, _ = proc.communicate(timeout=1800)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-3000:]
    assert reach is not None, "the run ended before uv was set up in the CT"
    print(reach, links)
    assert "REACHED" not in reach and reach.count("failed:") == 3, reach
    assert re.findall(r"^\d+: (\S+?)[:@]", links, flags=re.MULTILINE) == ["lo"], links
    with index.log.open("rb") as log:
        log.seek(offset)
        served = log.read().decode()
    assert served == "", served[:2000]
    # the CT's uv reads only the wheelhouse, and the stack is exactly the wheelhouse's lock
    uv_toml = pct("exec", VMID, "--", "cat", "/etc/uv/uv.toml").stdout
    assert "no-index = true" in uv_toml and 'find-links = ["/mnt/wheelhouse"]' in uv_toml and "index-url" not in uv_toml
    freeze = pct("exec", VMID, "--", "/usr/local/bin/uv", "pip", "freeze", "--python", "/opt/sglang/venv/bin/python")
    installed = dict(line.split("==", 1) for line in freeze.stdout.split() if "==" in line)
    assert installed == lock_pins(wheelhouse / "stack.lock"), set(installed.items()) ^ set(
        lock_pins(wheelhouse / "stack.lock").items()
    )
    active = pct(
        "exec", VMID, "--", "systemctl", "is-active", "sglang@0.service", "sglang@1.service", "smg.service", check=False
    )
    assert active.stdout.split() == ["active"] * 3, active.stdout
    proc, changed = run_site(inventory, f"ct{VMID}")
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]


def test_a_wheelhouse_without_the_uv_wheel_is_refused_before_anything_changes(inventory, wheelhouse):
    before = ct_state(VMID)
    proc, _ = run_site(inventory, f"ct{VMID}", "-e", "uv_venv_wheelhouse=/mnt/models")
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "uv_venv_wheelhouse /mnt/models has no uv-0.13.9-" in proc.stdout, proc.stdout[-3000:]
    assert "ansible-playbook gpulxc.sglang.wheelhouse -l ct950" in proc.stdout, proc.stdout[-3000:]
    assert ct_state(VMID) == before


def test_a_wheelhouse_built_for_another_target_is_refused_before_anything_changes(inventory, wheelhouse):
    stack_in = wheelhouse / "stack.in"
    text = stack_in.read_text()
    before = ct_state(VMID)
    stack_in.write_text(text.replace("Python 3.11, x86_64-manylinux_2_36", "Python 3.12, x86_64-manylinux_2_39", 1))
    try:
        proc, _ = run_site(inventory, f"ct{VMID}")
    finally:
        stack_in.write_text(text)
    assert proc.returncode != 0, proc.stdout[-2000:]
    expected = (
        "uv_venv_wheelhouse /mnt/wheelhouse was built for Python 3.12, x86_64-manylinux_2_39; this container runs"
        " Python 3.11 (uv_venv_python) with glibc 2.36 on x86_64: build it again for it"
        " (wheelhouse_python_version=3.11, wheelhouse_platform=x86_64-manylinux_2_36)."
    )
    assert expected in proc.stdout, proc.stdout[-3000:]
    assert ct_state(VMID) == before


def test_an_air_gapped_ct_without_a_debian_package_is_told_where_it_must_come_from(inventory, wheelhouse):
    """Last in this module: it leaves ct950 without ninja-build (the module's teardown destroys it)."""
    pct("exec", VMID, "--", "dpkg", "-r", "ninja-build")
    proc, _ = run_site(inventory, f"ct{VMID}")
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "jit_toolchain: apt could not install ninja-build in the container" in proc.stdout, proc.stdout[-3000:]
    assert "The container is air-gapped (uv_venv_wheelhouse)" in proc.stdout, proc.stdout[-3000:]
