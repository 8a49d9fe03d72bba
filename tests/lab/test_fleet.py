"""A fleet in one run: three CTs on the lab's two nodes - ct940 and ct941 on lab-pve, sharing the node's uv cache
(an mpN bind mount of one node directory), ct942 on lab-pve2 (lab/setup 5b: the same machine through an sshd that
answers as the cluster's second node) with that node's own cache - converged by one `site.yml` run, side by side.

- The node's own steps (the boot unit, its device nodes) are done by one container a node (the first of the run on
  it), the nodes' side by side. (That such a step writes what is missing: test_drift.py's first run, on an empty
  node; here the unit is already there, as every other lab CT's run leaves it.)
- Each node downloads each file once: its containers resolve and install one after another (uv_stack cache_lock),
  the first filling the cache. Counted from the log of the fleet's own package index (conftest.private_index).
- One gateway in front of every container's servers: ct940's router (the others name it,
  sglang_services_router_container, and run none of their own); the servers bound beyond loopback with one key
  (an extra-vars file), published at the lab machine's address. Each drain runs at the gateway.
- `rolling.yml` moves a new stack through the fleet one container at a time under streams through the gateway,
  none cut or refused: the first whole before the second begins, whose canary fails (a lab fault) and is rolled
  back, which stops the run with the third untouched; a whole run (site.yml, side by side) moves the rest, and the
  next changes nothing.
Lab CTs share the host's network: each has its own ports. Two GPUs each, apart (the stand-in shares /dev/nvidia*).
"""

import concurrent.futures
import json
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from pathlib import Path

import pytest
from conftest import REPO, Streams, destroy, pct, playbook_command, private_index, standin_environment, task_output

STATE = Path("/var/lib/gpulxc-lab")
CACHES = STATE / "test-fleet-caches"
INDEX_PORT = 3142  # the fleet's own package index (its downloads are counted)
NODE2 = (STATE / "node2").read_text().strip() if (STATE / "node2").exists() else "lab-pve2"
NEW_STACK = {"sglang_stack_extra_packages": ["pycountry==24.6.1"]}  # one more package: a lock of its own
# the new stack's stand-in crashes at start on ct941's first GPU (2): its canary, sglang@2 (instances are named and
# ported by GPU index)
PLAN = {"2": {"fault": "crash_at_start", "only_with": "pycountry==24.6.1"}}
CTS = {
    940: {"node": "lab-pve", "gpus": [0, 1], "port": 38000},
    941: {"node": "lab-pve", "gpus": [2, 3], "port": 38100},
    942: {"node": NODE2, "gpus": [4, 5], "port": 38200},
}
UNIT_TASK = "Install the node unit that creates the NVIDIA device nodes at boot"
GATEWAY = "http://127.0.0.1:8940"  # ct940's router (sglang_router_port 8000 + vmid), in front of all 6 servers
# the servers' address beyond loopback: the lab machine's own (lab CTs share its network)
ADDRESS = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=False).stdout.split()[0]
LIMIT = ",".join(f"ct{vmid}" for vmid in CTS)


def node2_pid():
    return (STATE / "ssh/sshd-node2.pid").read_text().strip()


def pct_at(vmid, *args, check=True):
    """`pct` on the CT's node: lab-pve2's through its namespaces (its host name and its /etc/pve links)."""
    if CTS[vmid]["node"] == "lab-pve":
        return pct(*args, check=check)
    argv = ["nsenter", "-t", node2_pid(), "-m", "-u", "--", "/usr/sbin/pct", *map(str, args)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert not check or proc.returncode == 0, (argv, proc.stderr)
    return proc


def in_ct(vmid, script):
    return pct_at(vmid, "exec", vmid, "--", "/bin/bash", "-c", script, check=False).stdout


def write_inventory(path, index, faults=None):
    """The fleet's inventory; faults: {vmid: stand-in plan} for those CTs' servers."""
    hosts = {}
    for vmid, ct in CTS.items():
        cache = CACHES / ct["node"]
        hosts[f"ct{vmid}"] = {
            "proxmox_vmid": vmid,
            "pct_container_node": ct["node"],
            "pct_container_gpus": ct["gpus"],
            "pct_container_mounts": [
                {"host_path": str(STATE / "models"), "ct_path": "/mnt/models", "read_only": True},  # as inventories/lab
                {"host_path": str(cache), "ct_path": "/var/cache/uv-shared", "read_only": False},
            ],
            "uv_venv_cache_dir": "/var/cache/uv-shared",
            "uv_venv_index_url": index.url,
            "sglang_services_port_base": ct["port"],
            "sglang_services_nccl_port_base": ct["port"] + 50,
            "sglang_router_port": 8000 + vmid,
            "sglang_router_prometheus_port": 29000 + vmid,
            "sglang_services_host": "0.0.0.0",
            "sglang_services_advertise_host": ADDRESS,
            "sglang_services_enable_metrics": False,  # keyed servers beyond loopback serve /metrics keyless
            **({"sglang_services_router_container": "ct940"} if vmid != 940 else {}),
            **({"sglang_services_environment": standin_environment(faults[vmid])} if faults and vmid in faults else {}),
        }
        if ct["node"] != "lab-pve":
            hosts[f"ct{vmid}"]["ansible_port"] = 2223  # the CT is reached through its node's sshd
    path.write_text(json.dumps({"sglang_containers": {"hosts": hosts}}))
    return path


def destroy_all():
    for vmid in CTS:
        if CTS[vmid]["node"] == "lab-pve":
            destroy(vmid)
        elif Path(f"/etc/pve/nodes/{NODE2}/lxc/{vmid}.conf").exists():
            pct_at(vmid, "destroy", vmid, "--force", "1")


@pytest.fixture(scope="module")
def index(lab_ready):
    with private_index("fleet", INDEX_PORT) as index:
        yield index


@pytest.fixture(scope="module")
def inventory(index, tmp_path_factory):
    assert node2_pid(), "lab/setup starts the sshd of the second node"
    destroy_all()
    shutil.rmtree(CACHES, ignore_errors=True)
    for node in {ct["node"] for ct in CTS.values()}:
        (CACHES / node).mkdir(parents=True, mode=0o755)
    yield write_inventory(tmp_path_factory.mktemp("inv") / "fleet.yml", index)
    destroy_all()
    shutil.rmtree(CACHES, ignore_errors=True)


def play(playbook, inventory, *extra):
    """The run's process and its recap lines {host: "ok=..."}; its output kept beside the inventory (docs quote it).
    The servers' key comes from an extra-vars file beside the inventory, as docs/secrets.md says."""
    secrets = inventory.parent / "secrets.json"
    secrets.write_text(json.dumps({"sglang_services_api_key": "fleet-" + "k" * 40}))
    argv, env = playbook_command(playbook, inventory, LIMIT, "-e", f"@{secrets}", *extra)
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=REPO, env=env)
    runs = sorted(inventory.parent.glob("run-*.txt"))
    (inventory.parent / f"run-{len(runs)}-{Path(playbook).stem}.txt").write_text(f"$ {' '.join(argv)}\n{proc.stdout}")
    recap = dict(re.findall(r"^(ct9\d\d)\s*:\s*(ok=.*)$", proc.stdout, re.M))
    return proc, recap


def healthy(vmid):
    codes = []
    for gpu in CTS[vmid]["gpus"]:  # instance N serves GPU N on port_base + N
        try:
            url = f"http://{ADDRESS}:{CTS[vmid]['port'] + gpu}/health"
            codes.append(urllib.request.urlopen(url, timeout=5).status)
        except (urllib.error.URLError, OSError):
            codes.append(0)
    return codes == [200, 200]


def main_pids(vmid):
    units = " ".join(f"sglang@{gpu}.service" for gpu in CTS[vmid]["gpus"])
    return in_ct(vmid, f"systemctl show -p MainPID --value {units}").split()


def stack(vmid):
    return in_ct(vmid, "readlink -f /opt/sglang/venv").strip()


def fleet_state():
    """{vmid: (its stack, its servers' main PIDs, its servers' configurations' checksums)}."""
    return {vmid: (stack(vmid), main_pids(vmid), in_ct(vmid, "md5sum /etc/sglang/instance-*.yaml")) for vmid in CTS}


def wheels_fetched(index, offset):
    """{wheel path: full downloads} the fleet's index served after `offset` (a 304 revalidation sends nothing)."""
    with index.log.open("rb") as log:
        log.seek(offset)
        lines = log.read().decode().splitlines()
    return Counter(
        path
        for path, status, size in (line.rsplit(" ", 2) for line in lines)
        if path.endswith(".whl") and status == "200" and int(size) > 0
    )


def test_three_containers_on_two_nodes_converge_in_one_run_each_node_doing_its_own_steps_and_downloads_once(
    inventory, index
):
    offset = index.log.stat().st_size
    proc, recap = play("site.yml", inventory, "-v")  # -v: why each host skipped a task
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert set(recap) == {"ct940", "ct941", "ct942"} and all("failed=0" in line for line in recap.values()), recap
    # each node's first container of the run does the node's steps; the node's other one skips them for not being its
    # leader. (The lab's other CTs keep the one unit file of the two lab nodes, one machine, written: a leader then
    # skips the write too, for the file being as it should; on an empty node it writes it: test_drift.py.)
    assert node_steps(task_output(proc, f"gpulxc.sglang.pct_container : {UNIT_TASK}")) == {
        "ct940": "leader of lab-pve",
        "ct941": "not the leader",
        "ct942": f"leader of {NODE2}",
    }
    # where each CT is: its config on its node, a running LXC container
    here = socket.gethostname().split(".")[0]
    assert {vmid for vmid in CTS if Path(f"/etc/pve/nodes/{here}/lxc/{vmid}.conf").exists()} == {940, 941}
    assert Path(f"/etc/pve/nodes/{NODE2}/lxc/942.conf").exists()
    assert "running" in pct_at(942, "status", 942).stdout
    assert all(healthy(vmid) for vmid in CTS)
    # Each node fetched each wheel as one install does; ct941's install read what ct940's fetched. One install fetches
    # a wheel k times, 1 or 2 (the lab index serves no PEP 658 metadata: uv's resolve fetches a wheel whole for its
    # metadata, then the install fetches it again), so two nodes make 2k (2 or 4); the node's two CTs installing side
    # by side without the lock would make 3k (3 or 6).
    fetched = wheels_fetched(index, offset)
    stack_wheels = {path: n for path, n in fetched.items() if "/uv-" not in path}  # uv itself: get_url, not locked
    assert stack_wheels and set(stack_wheels.values()) <= {2, 4}, sorted(fetched.items(), key=lambda kv: -kv[1])[:10]
    # one gateway: ct940's router lists every container's servers at the address they were published at, routes to
    # all 6; ct941 and ct942 run no router
    urls = {f"http://{ADDRESS}:{ct['port'] + gpu}" for ct in CTS.values() for gpu in ct["gpus"]}
    assert urls <= set(json.loads(in_ct(940, "cat /etc/smg/router-args.json")))
    assert gateway_ready() == {"status": "ready", "healthy_workers": 6, "total_workers": 6}
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        assert set(pool.map(gateway_chat, range(60))) == {f"gpu{gpu}" for ct in CTS.values() for gpu in ct["gpus"]}
    assert [in_ct(vmid, "systemctl is-active smg.service smg-front.service").split() for vmid in (941, 942)] == [
        ["inactive", "inactive"]
    ] * 2


def node_steps(output):
    """{CT: what it was for the node step whose output is given}: "leader of <node>" where it ran it (ok, changed) or
    skipped it for the file being as it should (-v's false_condition), "not the leader" where it skipped it for that."""
    found = {}
    for status, ct, node, result in re.findall(
        r"^(ok|changed|skipping): \[(ct9\d\d)(?: -> ([\w-]+))?[^\]]*\]"
        r"(?: => (\{.*\}))?$",
        output,
        re.M,
    ):
        condition = json.loads(result).get("false_condition", "") if result else ""
        if status != "skipping":
            found[ct] = f"leader of {node}"
        elif condition == "inventory_hostname == _pct_container_node_leader":
            found[ct] = "not the leader"
        else:
            found[ct] = f"leader of {CTS[int(ct[2:])]['node']}"  # skipped for its file's state, not for who it is
    return found


def gateway_ready(deadline_s=30):
    """The gateway's /readiness once all its workers are healthy (smg probes each every 1 s: fast-clock.yml), or as
    it is then."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            with urllib.request.urlopen(GATEWAY + "/readiness", timeout=5) as response:
                ready = json.loads(response.read())
        except (urllib.error.URLError, OSError) as error:
            ready = {"error": str(error)}
        if ready.get("healthy_workers") == ready.get("total_workers") == 6 or time.monotonic() > deadline:
            return ready
        time.sleep(1)


def gateway_chat(n):
    """One chat through the gateway: the GPU of the server that answered (the stand-in's id names it)."""
    message = {"role": "user", "content": f"{uuid.uuid4().hex} request {n}"}
    body = json.dumps({"model": "stand-in", "max_tokens": 4, "messages": [message]}).encode()
    req = urllib.request.Request(
        GATEWAY + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as response:
        return json.loads(response.read())["id"].split("-")[2]


def restart_times(vmid, since):
    """(first, last) journal stamps of the CT's sglang@* stopping or starting since `since`."""
    out = in_ct(vmid, f"journalctl -u 'sglang@*' -o json --since @{since:.0f} --no-pager")
    entries = [
        (int(e["__REALTIME_TIMESTAMP"]) / 1e6, e.get("MESSAGE") or "") for e in map(json.loads, out.splitlines())
    ]
    stamps = [stamp for stamp, message in entries if stamp >= since and message.startswith(("Stopping ", "Started "))]
    return min(stamps), max(stamps)


def test_a_rolling_upgrade_moves_one_container_at_a_time_and_stops_at_the_first_whose_canary_fails(
    inventory, index, tmp_path
):
    """rolling.yml with a new stack whose stand-in crashes on ct941's GPU 2 (a lab fault), under 8 streams through
    the gateway: ct940 moves whole - its restarts over before ct941's begin - then ct941's canary fails and is rolled
    back, and the run stops there: ct942 keeps its stack and its servers. Every restart was drained at the gateway
    first: no stream cut or refused."""
    before = {vmid: (stack(vmid), main_pids(vmid)) for vmid in CTS}
    faulty = write_inventory(tmp_path / "fleet-faulty.yml", index, faults={941: PLAN})
    since = time.time()
    time.sleep(1)  # the journal is read from a whole second
    with Streams(GATEWAY) as streams:  # through the gateway, all along: each drain runs there
        proc, recap = play("rolling.yml", faulty, "-e", json.dumps(NEW_STACK))
    out = " ".join(proc.stdout.split())
    assert (streams.cut, streams.refused[:5]) == (0, []) and streams.done > 20, (streams.done, streams.cut)
    # (smg retries a request its worker refuses, so the streams alone would not tell where the drains ran)
    steps = re.findall(
        r"TASK \[gpulxc\.sglang\.sglang_services : (Drain at the router first|Back into the router's"
        r" rotation) - sglang@2\] \*+\n(\w+): \[(ct9\d\d)(?: -> (ct9\d\d))?",
        proc.stdout,
    )
    assert steps[0] == ("Drain at the router first", "changed", "ct941", "ct940"), steps
    assert ("Back into the router's rotation", "changed", "ct941", "ct940") in steps, steps
    assert streams.gpus == {f"gpu{gpu}" for ct in CTS.values() for gpu in ct["gpus"]}, streams.gpus
    assert proc.returncode != 0 and "failed on the canary sglang@2" in out, proc.stdout[-3000:]
    assert "failed=0" in recap["ct940"] and "failed=1" in recap["ct941"] and "ct942" not in recap, recap
    # ct940: on the new stack, both servers restarted, healthy; all of it before ct941 began
    assert stack(940) != before[940][0] and not set(main_pids(940)) & set(before[940][1]) and healthy(940)
    assert restart_times(940, since)[1] < restart_times(941, since)[0]
    # ct941: back on its stack, sglang@3 never stopped; ct942: never reached
    assert stack(941) == before[941][0] and main_pids(941)[1] == before[941][1][1] and healthy(941)
    assert (stack(942), main_pids(942)) == before[942] and healthy(942)


def test_a_whole_run_then_moves_the_rest_side_by_side_and_the_next_changes_nothing(inventory):
    before = {vmid: stack(vmid) for vmid in CTS}
    proc, recap = play("site.yml", inventory, "-e", json.dumps(NEW_STACK))
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert stack(941) == stack(942) == before[940] != before[941] and all(healthy(vmid) for vmid in CTS)
    proc, recap = play("site.yml", inventory, "-e", json.dumps(NEW_STACK))
    assert proc.returncode == 0 and all("changed=0" in line for line in recap.values()), (recap, proc.stdout[-3000:])
    # check mode through the gateway: the way back to the first stack is predicted for every container - its switch,
    # its servers' restarts onto it, ct941's drains at ct940 among them - and nothing moves: no stack, no server, no
    # configuration, none of the gateway's 6 workers
    after = fleet_state()
    proc, recap = play("rolling.yml", inventory, "--check", "--diff")
    predicted = [line for line in recap.values() if "changed=0" not in line]
    assert proc.returncode == 0 and len(predicted) == 3, (recap, proc.stdout[-3000:])
    drain = task_output(proc, "gpulxc.sglang.sglang_services : Drain at the router first - sglang@2")
    assert f"+http://{ADDRESS}:38102 draining" in drain and "changed: [ct941 -> ct940" in drain, proc.stdout[-3000:]
    restart = task_output(proc, "gpulxc.sglang.sglang_services : Restart sglang@2")
    assert "changed: [ct941] => (item=2)" in restart, proc.stdout[-3000:]
    assert fleet_state() == after
    assert gateway_ready(0) == {"status": "ready", "healthy_workers": 6, "total_workers": 6}
