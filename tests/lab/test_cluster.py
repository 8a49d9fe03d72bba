"""pct_container on a node of a cluster: the lab's second node (lab/setup 3b) shares /etc/pve, and the API
stand-in (lab/pve/api.py, started here on a free port) answers /cluster/status and /cluster/resources from it,
as pveproxy does from pmxcfs. A vmid a guest on the other node has, a CT migrated to the other node and a node
that is not a member are each refused in the preflight, before any change: no CT is created here and the other
node's config stays byte-identical. No container is started; each case costs one preflight."""

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
from conftest import destroy, run_site

STATE = Path("/var/lib/gpulxc-lab")
NODE2 = Path("/etc/pve/nodes") / (STATE / "node2").read_text().strip() if (STATE / "node2").exists() else None
HOST = "ct930"  # the inventory host: its hostname is ct930 (pct_container_hostname's default)
TAKEN, MIGRATED, FREE = 931, 932, 933


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def api(lab_ready):
    if NODE2 is None or not (STATE / "api/token").exists():
        pytest.fail("the lab has no second node: run lab/setup (its step 3b)")
    port = free_port()
    server = subprocess.Popen(
        [
            "/usr/bin/python3",
            "-m",
            "pve.api",
            "--port",
            str(port),
            "--cert",
            str(STATE / "api/pve-ssl.pem"),
            "--key",
            str(STATE / "api/pve-ssl.key"),
            "--token-file",
            str(STATE / "api/token"),
        ],
        env=dict(os.environ, PYTHONPATH="/usr/local/lib/gpulxc-lab"),
    )
    for _ in range(50):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    user_token, secret = (STATE / "api/token").read_text().strip().split("=", 1)
    user, token_id = user_token.split("!", 1)
    yield {
        "pct_container_api_port": port,
        "pct_container_api_user": user,
        "pct_container_api_token_id": token_id,
        "pct_container_api_token_secret": secret,
        "pct_container_api_ca_path": str(STATE / "api/pve-ssl.pem"),
    }
    server.terminate()
    server.wait(10)


@pytest.fixture(scope="module")
def inventory(api, tmp_path_factory):
    for vmid in (TAKEN, MIGRATED, FREE):
        destroy(vmid)
    path = tmp_path_factory.mktemp("inv") / "ct930.yml"
    path.write_text(json.dumps({"sglang_containers": {"hosts": {HOST: {"pct_container_node": "lab-pve"}}}}))
    (NODE2 / "qemu-server" / f"{TAKEN}.conf").write_text("boot: order=scsi0\nmemory: 2048\nname: build\n")
    (NODE2 / "lxc" / f"{MIGRATED}.conf").write_text(
        f"arch: amd64\ncores: 2\nhostname: {HOST}\nmemory: 65536\nostype: debian\n"
        f"rootfs: local:{MIGRATED}/subvol-{MIGRATED}-disk-0.subvol,size=16G\nunprivileged: 0\n"
    )
    yield path
    (NODE2 / "qemu-server" / f"{TAKEN}.conf").unlink()
    (NODE2 / "lxc" / f"{MIGRATED}.conf").unlink()
    for vmid in (TAKEN, MIGRATED, FREE):
        destroy(vmid)


def preflight(inventory, api, vmid, *args, **extra):
    return run_site(
        inventory, HOST, "--skip-tags=stack,services", *args, "-e", json.dumps({**api, "proxmox_vmid": vmid, **extra})
    )


@pytest.mark.parametrize(
    ("vmid", "extra", "message"),
    [
        (
            TAKEN,
            {},
            f"vmid {TAKEN} is already used on node lab-pve2 by VM 'build' (pct_container_hostname is '{HOST}')",
        ),
        (
            MIGRATED,
            {},
            f"CT {MIGRATED} ('{HOST}') is on node lab-pve2, not on {os.uname().nodename.split('.')[0]}:"
            " it was migrated there",
        ),
        (
            FREE,
            {"pct_container_pve_node": "lab-pve3"},
            "pct_container_node 'lab-pve' (Proxmox node 'lab-pve3', pct_container_pve_node) is not a member of the"
            " cluster gpulxc-lab that the API answers for (members: lab-pve2, ",
        ),
    ],
    ids=["vmid-on-another-node", "migrated", "not-a-member"],
)
def test_refused_before_any_change(inventory, api, vmid, extra, message):
    other = sorted((p, p.read_bytes()) for p in NODE2.rglob("*.conf"))
    proc, changed = preflight(inventory, api, vmid, **extra)
    assert proc.returncode != 0
    assert message in " ".join(proc.stdout.split()), proc.stdout[-3000:]
    assert changed == 0
    assert not Path(f"/etc/pve/lxc/{vmid}.conf").exists()
    assert sorted((p, p.read_bytes()) for p in NODE2.rglob("*.conf")) == other


def test_a_free_vmid_passes_the_cluster_check(inventory, api):
    proc, _ = preflight(inventory, api, FREE, "--check", "--tags=pct_container_preflight")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "Check that the node is a cluster member" in proc.stdout
    assert not Path(f"/etc/pve/lxc/{FREE}.conf").exists()
