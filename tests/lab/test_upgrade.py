"""A container converged by the collection as it was before issue 50 (its roles' decisions in Jinja, the stack
published twice and rolled back by another role) converges with today's in one run: no server, router or front
restarted, only what the collection publishes or ships rewritten in its new shape; the run after it changes nothing."""

import json
import os
import subprocess

import pytest
from conftest import FAST_CLOCK, REPO, changed_tasks, destroy, in_ct, main_pids, run_site

OLD = "5775e4c"  # main before issue 50 (0.2.0 and issue 49's test changes)
VMID = 985
NAME = f"ct{VMID}"
ROUTER_UNITS = "smg.service smg-front.service"


@pytest.fixture(scope="module")
def old_checkout(tmp_path_factory):
    """The collection at OLD, in a worktree of this clone, with the collection path a checkout makes."""
    where = tmp_path_factory.mktemp("old") / "checkout"
    git = ["git", "-C", str(REPO), "worktree"]
    subprocess.run([*git, "add", "--detach", str(where), OLD], check=True, capture_output=True)
    link = where / ".ansible/collections/ansible_collections/gpulxc/sglang"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        link.symlink_to("../../../..")
    yield where
    subprocess.run([*git, "remove", "--force", str(where)], capture_output=True, check=False)


@pytest.fixture(scope="module")
def inventory(lab_ready, old_checkout, tmp_path_factory):
    destroy(VMID)
    path = tmp_path_factory.mktemp("inv") / f"{NAME}.yml"
    path.write_text(
        json.dumps(
            {
                "sglang_containers": {
                    "hosts": {
                        NAME: {
                            "proxmox_vmid": VMID,
                            "pct_container_node": "lab-pve",
                            "sglang_services_port_base": 40000,
                            "sglang_services_nccl_port_base": 41000,
                            "sglang_router_port": 8985,
                            "sglang_router_prometheus_port": 29985,
                        }
                    }
                }
            }
        )
    )
    argv = [
        str(REPO / ".venv/bin/ansible-playbook"),
        "site.yml",
        "-i",
        str(old_checkout / "inventories/lab"),
        "-i",
        str(FAST_CLOCK),
        "-i",
        str(path),
        "-l",
        NAME,
    ]
    # its own collection path: tools/test gives the lab's pytests one (ANSIBLE_COLLECTIONS_PATH) naming today's
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(old_checkout / "ansible.cfg"),
        ANSIBLE_FORCE_COLOR="false",
        ANSIBLE_COLLECTIONS_PATH=str(old_checkout / ".ansible/collections"),
    )
    old = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=old_checkout, env=env)
    assert old.returncode == 0, old.stdout[-3000:]
    yield path
    destroy(VMID)


def router_pids():
    return in_ct(VMID, f"systemctl show -p MainPID --value {ROUTER_UNITS}").stdout.split()


def test_todays_collection_restarts_nothing_on_a_container_the_last_one_built_then_changes_nothing(inventory):
    servers, router = main_pids(VMID), router_pids()
    assert len(servers) == 8 and "0" not in servers and "0" not in router, (servers, router)
    kept = in_ct(VMID, "cat /etc/ansible/facts.d/gpulxc_stack.fact").stdout
    assert "profile_source" not in json.loads(kept), kept  # the old collection made the container

    proc, changed = run_site(inventory, NAME)
    assert proc.returncode == 0, proc.stdout[-3000:]
    print(changed_tasks(proc))
    assert main_pids(VMID) == servers and router_pids() == router, changed_tasks(proc)
    # what the first run rewrites, and only that: the stack object kept in its new shape (its CUDA wheels, flag names,
    # the profile as chosen); the stack's input files relabelled with the renamed CUDA settings (no resolve, no
    # install: the lock is the same); the libcuda stub's generator, reformatted (one formatter for the tree)
    assert set(changed_tasks(proc)) == {
        "gpulxc.sglang.sglang_stack : Keep the stack object as a local fact",
        "gpulxc.sglang.gpulxc : Collect the result of sglang_stack: keeping /opt/sglang/venv at"
        " /etc/sglang/stack/stack.lock",
        "gpulxc.sglang.cuda_surgery : Fix the CUDA layout (lib64, the unversioned library links, the libcuda stub)",
    }, changed_tasks(proc)
    assert "Resolved again" not in proc.stdout, proc.stdout[-3000:]
    now = json.loads(in_ct(VMID, "cat /etc/ansible/facts.d/gpulxc_stack.fact").stdout)
    assert {key: value for key, value in now.items() if key in json.loads(kept)} == json.loads(kept)
    assert now["profile_source"] == "sglang-0.5.12" and now["cuda"]["runtime"] == "13.2.75", now

    proc, changed = run_site(inventory, NAME)
    assert proc.returncode == 0 and changed == 0, changed_tasks(proc)
