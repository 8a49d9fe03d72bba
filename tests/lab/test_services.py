"""sglang_services through site.yml on a lab CT (ct970): one systemd instance of the stand-in server
per simulated GPU (ports 32000 + i: lab CTs share the host's network, and CT 200 may serve on 30000 + i),
health-checked and smoke-tested by sglang_health; one JIT build on a cold cache;
a crash named with its journal; kill -9 and a stopped unit repaired; the GPU list shrunk; bad input
refused before any change.
"""

import json
import time

import pytest
from conftest import destroy, pct, run_site

VMID = 970
BUILDS = "/var/cache/sglang/.cache/flashinfer/0.6.11.post1/120a/gpulxc-standin-builds.log"
HEALTH = (
    "import urllib.request, urllib.error\n"
    "for i in range(8):\n"
    "    try:\n"
    "        print(i, urllib.request.urlopen(f'http://127.0.0.1:{32000 + i}/health', timeout=5).status)\n"
    "    except (urllib.error.HTTPError, OSError) as e:\n"
    "        print(i, getattr(e, 'code', 'refused'))\n"
)
SNAPSHOT = (
    "md5sum /etc/sglang/instance-*.yaml /etc/systemd/system/sglang@.service;"
    " systemctl is-enabled sglang@{0..7}.service; systemctl is-active sglang@{0..7}.service"
)


@pytest.fixture(scope="module")
def inventory(lab_ready, tmp_path_factory):
    destroy(VMID)
    path = tmp_path_factory.mktemp("inv") / "ct970.yml"
    path.write_text(json.dumps({"sglang_containers": {"hosts": {"ct970": {
        "proxmox_vmid": VMID, "pct_container_node": "lab-pve",
        "sglang_services_port_base": 32000, "sglang_services_nccl_port_base": 33000}}}}))  # fmt: skip
    proc, _ = play(path, whole=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    yield path
    destroy(VMID)


def play(inventory, *extra, whole=False):
    tags = [] if whole else ["--tags=services"]
    return run_site(inventory, "ct970", *tags, *extra)


def in_ct(script):
    return pct("exec", VMID, "--", "/bin/bash", "-c", script, check=False)


def health():
    return dict(line.split() for line in in_ct(f'python3 -c "{HEALTH}"').stdout.splitlines())


def test_eight_servers_healthy_one_jit_build_and_a_second_run_changes_nothing(inventory):
    assert in_ct("systemctl is-active sglang@{0..7}.service").stdout.split() == ["active"] * 8
    assert health() == {str(i): "200" for i in range(8)}
    assert len(in_ct(f"cat {BUILDS}").stdout.splitlines()) == 1  # cold cache: instance 0 built, the rest loaded
    assert in_ct("ps -o user= -C python | sort -u").stdout.split() == ["sglang"]  # not root
    config = in_ct("cat /etc/sglang/instance-5.yaml").stdout
    for line in ("port: 32005", "nccl-port: 33005", "attention-backend: flashinfer", "mem-fraction-static: 0.88"):
        assert line in config.splitlines(), line
    assert "--config /etc/sglang/instance-" in in_ct("systemctl cat sglang@5.service").stdout
    proc, changed = play(inventory, whole=True)
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]


def test_a_crash_at_start_is_named_with_its_state_and_journal(inventory):
    plan = {"sglang_services_environment": {"GPULXC_LAB_STANDIN_PLAN": json.dumps({"5": {"fault": "crash_at_start"}})},
            "sglang_services_health_deadline": 15}  # fmt: skip
    try:
        proc, _ = play(inventory, "-e", json.dumps(plan))
        assert proc.returncode != 0
        out = proc.stdout
        assert "1 of 8 SGLang servers not healthy after 15 s: sglang@5 (http://127.0.0.1:32005): loading" in out
        assert "unit sglang@5.service is " in out
        assert "RuntimeError: gpulxc lab fault injection: crash at start" in out  # the journal tail
    finally:
        proc, changed = play(inventory)
        assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert health() == {str(i): "200" for i in range(8)}


def test_kill_9_is_restarted_by_systemd_and_a_stopped_unit_by_a_rerun(inventory):
    pid = in_ct("systemctl show -p MainPID --value sglang@2.service").stdout.strip()
    assert in_ct(f"kill -9 {pid}").returncode == 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and health().get("2") != "200":
        time.sleep(1)
    assert health()["2"] == "200"
    assert in_ct("systemctl show -p MainPID --value sglang@2.service").stdout.strip() != pid
    in_ct("systemctl stop sglang@3.service")
    assert health()["3"] == "refused"
    proc, changed = play(inventory)
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert health()["3"] == "200"


def test_shrinking_the_gpu_list_stops_and_disables_the_rest(inventory):
    proc, _ = play(inventory, "-e", json.dumps({"sglang_services_gpus": [0, 1]}))
    assert proc.returncode == 0, proc.stdout[-3000:]
    states = in_ct("systemctl is-active sglang@{0..7}.service; systemctl is-enabled sglang@{0..7}.service").stdout
    assert states.split() == ["active"] * 2 + ["inactive"] * 6 + ["enabled"] * 2 + ["disabled"] * 6
    proc, changed = play(inventory)
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert health() == {str(i): "200" for i in range(8)}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"sglang_services_port_base": 65530},
         "sglang_services_port_base 65530 (and sglang_services_nccl_port_base 33000) plus the highest GPU index 7"),
        ({"sglang_services_gpus": [0, 9]}, "sglang_services_gpus [0, 9] names GPUs the container does not have: [9]"),
        ({"sglang_services_attention_backend": "fa5"}, "sglang_services_attention_backend fa5 is not an attention"),
        ({"sglang_services_mem_fraction_static": 1.5}, "sglang_services_mem_fraction_static is 1.5; it must be"),
    ],
)  # fmt: skip
def test_bad_input_fails_before_any_change(inventory, extra, message):
    before = in_ct(SNAPSHOT).stdout
    proc, changed = play(inventory, "-e", json.dumps(extra))
    assert proc.returncode != 0 and changed == 0, proc.stdout[-3000:]
    assert message in " ".join(proc.stdout.split())
    assert in_ct(SNAPSHOT).stdout == before
