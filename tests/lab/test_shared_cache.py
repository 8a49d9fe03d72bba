"""Download once: two CTs on one lab node share a uv cache through an mpN bind mount of one node directory
(uv_venv_cache_dir). The first (ct950, GPUs 0-5) fills it; the second (ct951, GPUs 6 and 7, its own ports:
lab CTs share the host's network) must fetch at most 1 % of the first one's bytes from the package index.
What is counted: every byte the lab's package index (lab/index/serve, the only index the lab's CTs reach)
sent while each CT converged, from its log (`<path> <status> <bytes>` per response)."""

import json
import shutil
from pathlib import Path

import pytest
from conftest import destroy, pct, run_site

CACHE = Path("/var/lib/gpulxc-lab/test-uv-cache")
PY = "/opt/sglang/venv/bin/python"
INDEX_LOG = Path("/var/lib/gpulxc-lab/index.log")
MOUNTS = [
    {"host_path": "/var/lib/gpulxc-lab/models", "ct_path": "/mnt/models", "read_only": True},  # as inventories/lab
    {"host_path": str(CACHE), "ct_path": "/var/cache/uv-shared", "read_only": False},
]
CTS = {
    950: {"pct_container_gpus": [0, 1, 2, 3, 4, 5], "sglang_services_port_base": 40000,
          "sglang_services_nccl_port_base": 41000, "sglang_router_port": 8950, "sglang_router_prometheus_port": 29950},
    951: {"pct_container_gpus": [6, 7], "sglang_services_port_base": 42000,
          "sglang_services_nccl_port_base": 43000, "sglang_router_port": 8951, "sglang_router_prometheus_port": 29951},
}  # fmt: skip


def served_since(offset):
    """(bytes, responses) the index logged after `offset`, and the new offset."""
    with INDEX_LOG.open("rb") as log:
        log.seek(offset)
        lines = log.read().decode().splitlines()
        end = log.tell()
    sizes = [int(line.rsplit(" ", 1)[1]) for line in lines if line.rsplit(" ", 1)[-1].isdigit()]
    return sum(sizes), len(lines), end


@pytest.fixture(scope="module")
def inventory(lab_ready, tmp_path_factory):
    for vmid in CTS:
        destroy(vmid)
    shutil.rmtree(CACHE, ignore_errors=True)
    CACHE.mkdir(mode=0o755)
    path = tmp_path_factory.mktemp("inv") / "shared-cache.yml"
    hosts = {f"ct{vmid}": {"proxmox_vmid": vmid, "pct_container_node": "lab-pve", "pct_container_mounts": MOUNTS,
                           "uv_venv_cache_dir": "/var/cache/uv-shared", **settings}
             for vmid, settings in CTS.items()}  # fmt: skip
    path.write_text(json.dumps({"sglang_containers": {"hosts": hosts}}))
    yield path
    for vmid in CTS:
        destroy(vmid)
    shutil.rmtree(CACHE, ignore_errors=True)


def test_a_second_ct_downloads_at_most_1_percent_of_the_first(inventory):
    offset = INDEX_LOG.stat().st_size if INDEX_LOG.exists() else 0
    proc, _ = run_site(inventory, "ct950")
    assert proc.returncode == 0, proc.stdout[-3000:]
    first, first_n, offset = served_since(offset)
    proc, _ = run_site(inventory, "ct951")
    assert proc.returncode == 0, proc.stdout[-3000:]
    second, second_n, _ = served_since(offset)
    print(f"package index: first CT {first} bytes in {first_n} responses, second CT {second} bytes in"
          f" {second_n} responses ({100 * second / first:.2f} %)")  # fmt: skip
    assert first > 100_000_000, first  # the real CUDA wheels (nvcc, nvrtc ...) came through the index
    assert second <= first / 100, (second, first)
    # the second CT got the same stack, and serves its 2 GPUs
    for vmid in CTS:
        freeze = pct(
            "exec", vmid, "--", "/usr/local/bin/uv", "pip", "freeze", "--python", "/opt/sglang/venv/bin/python"
        )
        assert "sglang==0.5.12" in freeze.stdout and "nvidia-cuda-nvcc==13.2.78" in freeze.stdout, freeze.stdout
    active = pct("exec", 951, "--", "systemctl", "is-active", "sglang@6.service", "sglang@7.service", check=False)
    assert active.stdout.split() == ["active", "active"], active.stdout
    # the cache is the node's directory, not each CT's own
    assert any(CACHE.glob("*/")), list(CACHE.iterdir())
    for vmid in CTS:
        assert pct("exec", vmid, "--", "test", "-d", "/root/.cache/uv", check=False).returncode != 0, vmid


def test_a_cache_dir_that_is_not_a_mount_fails_before_any_change(inventory):
    proc, changed = run_site(inventory, "ct951", "-e", "uv_venv_cache_dir=/var/cache/not-mounted")
    assert proc.returncode != 0 and changed == 0, proc.stdout[-3000:]
    assert "uv_venv_cache_dir /var/cache/not-mounted is not a mount point in the container" in proc.stdout
