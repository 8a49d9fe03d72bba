"""Bad input is refused before any change (issue 49): every class of bad value the lab's refused runs checked, as data
- the variables a case gives with -e and the fragments its refusal must say - run on the lab's inventory, with the
lab's node and containers answering as data (the read-only modules' results). preflight.refusal() is the one adapter
between these cases and the roles' checks; the lab keeps one combined refused run per playbook, which proves that a
refusal changes nothing, byte for byte.

Every case can fail: each group's control (the same inventory and answers, no bad variable) reaches the first change,
and a case whose refusal needs another answer of the node or the container passes with the usual one."""

import json

import pytest
import yaml
from ansible_collections.gpulxc.sglang.plugins.modules.pve_cluster_info import decide
from preflight import REPO, lab_inventory, refusal

# -- what the lab's node and containers answer: the read-only modules' results -----------------------------------

DRIVER = "580.95.05"  # the lab node's simulated NVIDIA driver, with 8 simulated GPUs
GPUS = list(range(8))
PROFILE = yaml.safe_load((REPO / "profiles/sglang-0.5.12.yml").read_text())


def probe(status="absent", **changes):
    """gpulxc.sglang.pct_info on the lab node (Proxmox VE 9.0.3, pve-container 6.1.10) for a container that runs,
    or does not exist yet (then the template and the rootfs storage are read); `changes` replace keys, or the keys
    of a key that holds a mapping."""
    found = {
        "changed": False,
        "status": status,
        "template": {},
        "storage": {},
        "unprivileged": False,
        "device_nodes": [],
        "gpu_indexes": GPUS,
        "gpu_users": {},
        "nvidia_users": [],
        "char_devices": [],
        "driver": {"version": DRIVER, "open": True},
        "files": {"/usr/bin/nvidia-modprobe": {"exists": True, "mode": "0755"}},
        "units": {},
        "pve": {"version": "9.0.3", "container": "6.1.10", "error": ""},
        "container": {"nvidia_userspace": DRIVER, "boot_state": "running"},
    }
    if status == "absent":
        found.update(unprivileged=None, container={})
        found["template"] = {"path": "/var/lib/vz/template/cache/debian-12.tar.zst", "exists": True, "error": ""}
        found["storage"] = {
            "name": "local-lvm",
            "exists": True,
            "rootdir": True,
            "status": "active",
            "type": "lvmthin",
            "avail_kib": 350 * 1024 * 1024,
            "rootdir_storages": ["local-lvm"],
            "error": "",
        }
    for key, value in changes.items():
        found[key] = {**found[key], **value} if isinstance(value, dict) and found[key] else value
    return found


def container(**changes):
    """gpulxc.sglang.container_info in a lab CT (Debian 12: glibc 2.36, Python 3.11); `changes` replace keys."""
    python = {"path": "/usr/bin/python3", "version": "3.11", "error": ""}
    found = {"changed": False, "glibc": "2.36", "arch": "x86_64", "python": python, "wheelhouse": None}
    return {**found, "cache_mounted": None, **changes}


def local_facts(port_base=None):
    """ansible.builtin.setup's local facts in a converged CT: its stack and GPUs and, where its services run, their
    instances (one a GPU, on port_base + GPU)."""
    stack = {key: PROFILE[key] for key in ("attention_backends", "fallback_attention_backend")}
    gpus = {
        "indexes": GPUS,
        "capabilities": ["12.0"],
        "gpus": [{"index": i, "compute_capability": "12.0"} for i in GPUS],
    }
    facts = {"gpulxc_stack": {"profile": "sglang-0.5.12", "venv": "/opt/sglang/venv", **stack}, "gpulxc_gpus": gpus}
    if port_base:
        facts["gpulxc_services"] = {"instances": [instance(i, port_base + i) for i in GPUS]}
    return {"ansible.builtin.setup": {"changed": False, "ansible_facts": {"ansible_local": facts}}}


def instance(gpu, port):
    """An instance as sglang_services publishes it (its fact), one a GPU."""
    name, url = f"sglang@{gpu}", f"http://127.0.0.1:{port}"
    return {"name": name, "index": gpu, "gpu": gpu, "unit": f"{name}.service", "port": port, "url": url}


def staging(stderr=None):
    """The staging script's --dry-run in the CT (roles/sglang_services/files/sglang-stage-model): it passes, or exits
    1 saying why on stderr (test_stage_model.py tests the script itself, on real directories)."""
    if stderr is None:
        return {"ansible.builtin.script": {"changed": False, "rc": 0, "stdout": '{"changed": true}', "stderr": ""}}
    failed = {"failed": True, "rc": 1, "msg": "non-zero return code", "stderr": f"sglang-stage-model: {stderr}\n"}
    return {"ansible.builtin.script": {"changed": False, **failed, "stdout": ""}}


# The cluster the lab's API stand-in answers for (lab/pve/api.py, from node2's /etc/pve): the lab host answers, and
# the other member, lab-pve2, holds VM 931 'build' and CT 932 'ct930'.
HERE = "labhost"
CLUSTER_STATUS = [
    {"type": "cluster", "name": "gpulxc-lab", "nodes": 2, "quorate": 1},
    {"type": "node", "name": HERE, "nodeid": 1, "local": 1, "online": 1},
    {"type": "node", "name": "lab-pve2", "nodeid": 2, "local": 0, "online": 1},
]
CLUSTER_RESOURCES = [
    {"id": "qemu/931", "vmid": 931, "node": "lab-pve2", "type": "qemu", "name": "build", "status": "stopped"},
    {"id": "lxc/932", "vmid": 932, "node": "lab-pve2", "type": "lxc", "name": "ct930", "status": "stopped"},
]


def cluster_api(arguments):
    """gpulxc.sglang.pve_cluster_info's own decision on the lab cluster's answers, for the arguments the role gives."""
    decided = decide(CLUSTER_STATUS, CLUSTER_RESOURCES, arguments["vmid"], arguments["node"], arguments["hostname"])
    return {"changed": False, **decided}


NEW_NODE = {"pct_container_probe_result": probe(), "pct_container_installer_stat_result": {"stat": {"exists": True}}}
CONVERGED_NODE = {"pct_container_probe_result": probe("running")}
CONVERGED_CT = {"uv_venv_container_result": container(), **local_facts()}
FITTING = {"has_uv": True, "fits": True, "target": {"python": "3.11", "platform": "x86_64-manylinux_2_36"}}

# -- the lab tests' hosts (tests/lab/test_*.py), each in the lab inventory's sglang_containers --------------------


def ports(servers, nccl, router, metrics):
    """A lab CT's own ports: the lab's CTs share the host's network."""
    return {
        "sglang_services_port_base": servers,
        "sglang_services_nccl_port_base": nccl,
        "sglang_router_port": router,
        "sglang_router_prometheus_port": metrics,
    }


NODE = {"pct_container_node": "lab-pve"}
INDEX = {"uv_venv_index_url": "http://127.0.0.1:3144/simple"}  # test_container_stack.py's own package index
DEBIAN_11 = {"pct_container_ostemplate": "local:vztmpl/debian-11-gpulxclab_11.0-1_amd64.tar.zst"}
AIR_GAPPED = {  # test_offline.py's CT, its wheelhouse bind-mounted
    "proxmox_vmid": 950,
    **NODE,
    "pct_container_net0": "",
    "pct_container_gpus": [0, 1],
    "pct_container_mounts": [
        {"host_path": "/var/lib/gpulxc-lab/models", "ct_path": "/mnt/models", "read_only": True},
        {"host_path": "/var/lib/gpulxc-lab/test-wheelhouse", "ct_path": "/mnt/wheelhouse", "read_only": True},
    ],
    "uv_venv_wheelhouse": "/mnt/wheelhouse",
    "uv_venv_index_url": "http://127.0.0.1:3143/simple",
    "uv_venv_uv_wheel_url": "http://127.0.0.1:3143/files/uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    **ports(39000, 39100, 8950, 29950),
}
CT920 = lab_inventory(ct920={"proxmox_vmid": 920, **NODE})
CT930 = lab_inventory(ct930=NODE)
CT950 = lab_inventory(ct950=AIR_GAPPED)
CT960 = lab_inventory(ct960={"proxmox_vmid": 960, **NODE, **INDEX})
CT961 = lab_inventory(ct961={"proxmox_vmid": 961, **NODE, **INDEX, **DEBIAN_11})
CT970 = lab_inventory(
    ct970={"proxmox_vmid": 970, **NODE, **ports(32000, 33000, 8970, 29970), "sglang_services_restart_batch": 0}
)
CT980 = lab_inventory(ct980={"proxmox_vmid": 980, **NODE, **ports(34000, 35000, 8980, 29980)})
CT990 = lab_inventory(ct990={"proxmox_vmid": 990, **NODE, **ports(36000, 37000, 8990, 29990)})
API = {  # test_cluster.py's read-only token
    "pct_container_api_port": 8006,
    "pct_container_api_user": "audit@pve",
    "pct_container_api_token_id": "lab",
    "pct_container_api_token_secret": "s",
    "pct_container_api_ca_path": "/x.pem",
}

# -- the groups: one lab run each - the playbook (--tags picks it), the hosts, their answers, the -e all its cases give

GROUPS = {
    # site.yml -l ct920 --skip-tags=stack,services -e proxmox_vmid=921: a container that does not exist yet
    "new-ct": {"play": "site", "inventory": CT920, "state": NEW_NODE, "extra": {"proxmox_vmid": 921}},
    # the same on the converged CT 920
    "converged-ct": {"play": "site", "inventory": CT920, "state": CONVERGED_NODE},
    # site.yml -l ct930 with the cluster's API, for CT 933 (an id free on the cluster)
    "cluster": {
        "play": "site",
        "inventory": CT930,
        "state": {**NEW_NODE, "pct_container_cluster_result": cluster_api},
        "extra": {**API, "proxmox_vmid": 933},
    },
    # site.yml -l ct960 --tags=stack on the converged CT
    "stack": {"play": "stack", "inventory": CT960, "state": CONVERGED_CT},
    # site.yml -l ct970 --tags=services,router on the converged CT (its servers on 32000 + GPU)
    "services": {"play": "services", "inventory": CT970, "state": {**local_facts(32000), **staging()}},
    # the same with --skip-tags=router
    "services-without-router": {
        "play": "services",
        "inventory": CT970,
        "state": {**local_facts(32000), **staging()},
        "skip_tags": ("router",),
    },
    # site.yml -l ct980 --tags=services,router on the converged CT (its servers on 34000 + GPU)
    "router": {"play": "services", "inventory": CT980, "state": {**local_facts(34000), **staging()}},
    # remove.yml -l ct990 on the converged CT
    "remove": {"play": "remove", "inventory": CT990, "state": {"remove_container_result": probe("running")}},
    # wheelhouse.yml -l ct950 -e wheelhouse_dest=<tmp>/never (nothing is read from the CT)
    "wheelhouse": {"play": "wheelhouse", "inventory": CT950, "state": {}, "extra": {"wheelhouse_dest": "/tmp/never"}},
    # site.yml -l ct950 on the air-gapped CT, converged from its wheelhouse: its stack play, which refuses (the plays
    # before it change nothing on a converged CT, but the walk stops at their first task that may)
    "offline": {
        "play": "stack",
        "inventory": CT950,
        "state": {**CONVERGED_CT, "uv_venv_container_result": container(wheelhouse=FITTING)},
    },
}


def not_a(kind, variable):
    """Ansible's refusal at a role's entry point when the argument spec's type does not take the value."""
    return f"argument '{variable}' is of type str and we were unable to convert to {kind}"


# -- the cases: (-e variables, the fragment or fragments the refusal says[, answers of the node or the container over
#    the group's]); the lab's own value first, then others of its class ---------------------------------------------

NEW_CT = [  # test_role_pct_container.py, CT 921
    ({"proxmox_vmid": 99}, "pct_container_vmid: '99' is not a container id: Proxmox's pve-vmid is 100 to"),
    ({"proxmox_vmid": 0}, "pct_container_vmid: '0' is not a container id"),
    ({"proxmox_vmid": "ct921"}, not_a("int", "pct_container_vmid")),
    ({"pct_container_gpus": [0, 8]}, "pct_container_gpus asks for GPUs [8] but the node has 8 GPU(s)"),
    ({"pct_container_gpus": [9, 12]}, "pct_container_gpus asks for GPUs [9, 12] but the node has 8 GPU(s)"),
    ({"pct_container_gpus": [-1]}, "pct_container_gpus: '-1' is not a GPU index (0 to 253"),
    ({"pct_container_gpu_passthrough": "vfio"}, "value of pct_container_gpu_passthrough must be one of: devices, lxc,"),
    ({"pct_container_gpu_passthrough": ""}, "value of pct_container_gpu_passthrough must be one of: devices, lxc,"),
    ({"pct_container_memory_mb": 2048}, "pct_container_memory_mb (2048) must cover /dev/shm"),
    ({"pct_container_memory_mb": 3071}, "pct_container_memory_mb (3071) must cover /dev/shm"),
    ({"pct_container_memory_mb": "lots"}, not_a("int", "pct_container_memory_mb")),
    ({"pct_container_rootfs_size_gb": 100000}, "pct_container_rootfs_storage ('local-lvm') on lab-pve has"),
    ({"pct_container_rootfs_size_gb": 351}, "has 350.0 GiB available; pct_container_rootfs_size_gb asks for 351."),
    ({"pct_container_device_mode": "666"}, "pct_container_device_mode: '666' is not an octal mode such as '0666'"),
    ({"pct_container_device_mode": "rw"}, "pct_container_device_mode: 'rw' is not an octal mode such as '0666'"),
    (
        {"pct_container_driver_install": False},
        f"the NVIDIA userspace in CT 921 is 'not installed' but the kernel driver on lab-pve is {DRIVER}",
    ),
    ({"pct_container_driver_install": "maybe"}, not_a("bool", "pct_container_driver_install")),
    # the node answers: no such template; a storage that holds no containers; Proxmox VE 8.1, before devN
    (
        {"pct_container_ostemplate": "local:vztmpl/nope.tar.zst"},
        "the template pct_container_ostemplate ('local:vztmpl/nope.tar.zst') is not on lab-pve",
        {"pct_container_probe_result": probe(template={"exists": False, "error": "volume does not exist"})},
    ),
    (
        {"pct_container_rootfs_storage": "local"},
        "pct_container_rootfs_storage ('local') on lab-pve does not hold containers (Proxmox: storage 'local'"
        " does not support container directories",
        {"pct_container_probe_result": probe(storage={"name": "local", "rootdir": False, "type": "dir"})},
    ),
    (
        {},
        "lab-pve runs Proxmox VE 8.1.3 with pve-container 5.0.6, which has no devN passthrough",
        {"pct_container_probe_result": probe(pve={"version": "8.1.3", "container": "5.0.6"})},
    ),
]
CONVERGED = [  # test_role_pct_container.py, CT 920 (each class of the filter's: tests/unit/plugins/filter/test_pve.py)
    ({"pct_container_net0": "name=eth0,bridge=vmbr0,ip=dhcpx"}, "pct_container_net0: 'ip=dhcpx' net0.ip: invalid"),
    ({"pct_container_net0": "name=eth0,ip=10.0.0.300/24"}, "pct_container_net0: 'ip=10.0.0.300/24' net0.ip: invalid"),
    ({"pct_container_features": ["nesting=1", "nesting=0"]}, "pct_container_features: 'nesting=0' features.duplicate"),
    ({"pct_container_hostname": "ct_920"}, "pct_container_hostname: 'ct_920' is not a DNS label"),
    ({"pct_container_hostname": "-ct920"}, "pct_container_hostname: '-ct920' is not a DNS label"),
    ({"pct_container_rootfs_storage": "local lvm"}, "pct_container_rootfs_storage: 'local lvm' is not a storage ID"),
    (
        {"pct_container_rootfs_size_gb": 0, "pct_container_shm_size_gb": 0},
        ["pct_container_rootfs_size_gb: '0' must be a size in GiB above 0", "pct_container_shm_size_gb: '0' is out of"],
    ),
    (
        {"pct_container_cores": 8193, "pct_container_swap_mb": -1},
        ["pct_container_cores: '8193' is out of range; Proxmox's cores is 1 to 8192", "pct_container_swap_mb: '-1' is"],
    ),
    ({"pct_container_cores": 0}, "pct_container_cores: '0' is out of range; Proxmox's cores is 1 to 8192"),
    ({"pct_container_swap_mb": "x"}, not_a("int", "pct_container_swap_mb")),
    (
        {"pct_container_mounts": [{"host_path": "/srv/../etc", "ct_path": "/mnt/m,x"}]},
        [
            "pct_container_mounts: '/srv/../etc' entry 0: host_path: /srv/../etc contains illegal",
            "pct_container_mounts: '/mnt/m,x' entry 0: ct_path must not hold ','",
        ],
    ),
    (
        {
            "pct_container_gpus": [0, 0],
            "pct_container_mounts": [{"host_path": "/a", "ct_path": "/m"}, {"host_path": "/b", "ct_path": "/m"}],
        },
        ["pct_container_gpus: '0' is listed more than once", "pct_container_mounts: '/m' is the ct_path of more than"],
    ),
    (
        {"pct_container_device_mode": "0668", "pct_container_device_gid": "video"},
        ["pct_container_device_mode: '0668' is not an octal mode", "pct_container_device_gid: 'video' is not an int"],
    ),
    ({"pct_container_unprivileged": True}, "CT 920 exists and is privileged, but pct_container_unprivileged is true"),
    ({"pct_container_unprivileged": "yes"}, "CT 920 exists and is privileged, but pct_container_unprivileged is true"),
    # the node answers: another NVIDIA userspace installed in the CT; CT 922 passing GPU 2 through
    (
        {"pct_container_driver_install": False},
        f"the NVIDIA userspace in CT 920 is '580.82.07' but the kernel driver on lab-pve is {DRIVER}",
        {"pct_container_probe_result": probe("running", container={"nvidia_userspace": "580.82.07"})},
    ),
    (
        {"pct_container_gpus_shared": False},
        ["CT 920 (ct920) asks for GPU(s) 0, 1, 2, 3, 4, 5, 6, 7", "CT 922 (not in the inventory) passes GPU 2 through"],
        {"pct_container_probe_result": probe("running", gpu_users={"922": [2]})},
    ),
]
CLUSTER = [  # test_cluster.py
    (
        {"proxmox_vmid": 931},
        "vmid 931 is already used on node lab-pve2 by VM 'build' (pct_container_hostname is 'ct930')",
    ),
    ({"proxmox_vmid": 932}, f"CT 932 ('ct930') is on node lab-pve2, not on {HERE}: it was migrated there"),
    (
        {"pct_container_pve_node": "lab-pve3"},
        "pct_container_node 'lab-pve' (Proxmox node 'lab-pve3', pct_container_pve_node) is not a member of the cluster"
        f" gpulxc-lab that the API answers for (members: lab-pve2, {HERE})",
    ),
]
PYTHON_3_12_ONLY = "<the lab's PYTHON_3_12_ONLY: a copy of the profile for Python 3.12 only (the test writes it)>"
STACK = [  # test_container_stack.py
    (
        {"sglang_stack_profile": "sglang-9.9"},
        "sglang_stack_profile: there is no profile 'sglang-9.9'. This collection ships"
        " ['sglang-0.5.12', 'sglang-0.5.23']",
    ),
    ({"sglang_stack_profile": ""}, "sglang_stack_profile: there is no profile ''."),
    ({"sglang_stack_profile": PYTHON_3_12_ONLY}, "the virtual environment would use Python 3.11, which stack profile"),
    (
        {
            "sglang_stack_cuda_family": {
                "nvidia-cuda-nvcc": "13.2.78",
                "nvidia-nvvm": "13.5.37",
                "nvidia-cuda-crt": "13.2.78",
                "nvidia-cuda-cccl": "13.2.75",
            }
        },
        "sglang_stack_cuda_family mixes CUDA minors ['13.2', '13.5']",
    ),
    ({"sglang_stack_cuda_runtime_version": "latest"}, "sglang_stack_cuda_runtime_version (latest)"),
    (
        {"sglang_stack_cuda_runtime_version": "13"},
        "sglang_stack_cuda_runtime_version (13) and sglang_stack_cuda_nvrtc_version (13.0.88)",
    ),
    # the names of the role cuda_wheels (before 0.3.0) are still read, until 0.4.0
    ({"cuda_wheels_runtime_version": "latest"}, "sglang_stack_cuda_runtime_version (latest)"),
    ({"cuda_wheels_nvrtc_version": "13"}, "sglang_stack_cuda_runtime_version (13.2.75) and sglang_stack_cuda_nvrtc"),
    ({"cuda_surgery_cccl_source": "copy"}, "value of cuda_surgery_cccl_source must be one of: nvidia-cuda-cccl, flash"),
    ({"cuda_surgery_cccl_source": ""}, "value of cuda_surgery_cccl_source must be one of: nvidia-cuda-cccl, flash"),
    # the CT answers: no such interpreter
    (
        {"uv_venv_python": "/usr/bin/python3.99"},
        "uv_venv_python /usr/bin/python3.99 does not run in the container",
        {"uv_venv_container_result": container(python={"path": "/usr/bin/python3.99", "version": "", "error": "gone"})},
    ),
]
SERVICES = [  # test_services.py
    (
        {"sglang_services_port_base": 65530},
        "sglang_services_port_base 65530 (and sglang_services_nccl_port_base 33000) plus the highest GPU index 7",
    ),
    ({"sglang_services_gpus": [0, 9]}, "sglang_services_gpus [0, 9] names GPUs the container does not have: [9]"),
    ({"sglang_services_attention_backend": "fa5"}, "--attention-backend: 'fa5' is not one of its choices"),
    ({"sglang_services_mem_fraction_static": 1.5}, "sglang_services_mem_fraction_static is 1.5; it must be"),
    ({"sglang_services_model_source": ""}, "sglang_services_model_path /dev/shm/stand-in is under /dev/shm, which a"),
    ({"sglang_services_restart_batch": -1}, "sglang_services_restart_batch is -1; it must be 0"),
    ({"sglang_services_restart_batch": "x"}, not_a("int", "sglang_services_restart_batch")),
    ({"sglang_services_progress_interval": -20}, "sglang_services_progress_interval is -20; it must be 0 (one silent"),
    ({"sglang_services_progress_interval": -1}, "sglang_services_progress_interval is -1; it must be 0 (one silent"),
    ({"sglang_services_host": "0.0.0.0"}, "sglang_services_host 0.0.0.0 is reachable from other machines and the"),
    ({"sglang_services_model_stage_reserve_mb": -1}, "sglang_services_model_stage_reserve_mb is -1; it must be 0"),
    ({"sglang_services_model_stage_reserve_mb": "x"}, not_a("int", "sglang_services_model_stage_reserve_mb")),
    ({"sglang_services_restart_sec": -1}, "sglang_services_restart_sec is -1; it must be 0 or more (seconds)."),
    ({"sglang_services_restart_sec": "x"}, not_a("int", "sglang_services_restart_sec")),
    # the staging script's dry run in the CT refuses: no such directory there; a 2 GiB model for its 1 GiB /dev/shm
    (
        {"sglang_services_model_source": "/mnt/nothing"},
        "the model source /mnt/nothing is not a directory in the container",
        staging("the model source /mnt/nothing is not a directory in the container: is its storage mounted (for ...)"),
    ),
    (
        {"sglang_services_model_source": "/srv/big-model"},
        "not enough room in /dev/shm for the model: it needs 2.0 GiB",
        staging("not enough room in /dev/shm for the model: it needs 2.0 GiB plus a reserve of 0 MiB, 1.0 GiB are ..."),
    ),
]
SERVICES_WITHOUT_ROUTER = [  # test_services.py: the services' own check of the key, the router's left out
    ({"sglang_services_api_key": "plain-text-key"}, "sglang_services_api_key is written in plain text (an inventory,"),
]
ROUTER = [  # test_router.py: the router's preflight, which services.yml runs first
    ({"sglang_router_host": "0.0.0.0"}, "sglang_router_host 0.0.0.0 is reachable from other machines: set"),
    ({"sglang_router_host": "::"}, "sglang_router_host :: is reachable from other machines: set"),
    ({"sglang_router_host": "10.0.0.5"}, "sglang_router_host 10.0.0.5 is reachable from other machines: set"),
    ({"sglang_router_policy": "fastest"}, "value of sglang_router_policy must be one of: random, round_robin"),
    ({"sglang_router_policy": ""}, "value of sglang_router_policy must be one of: random, round_robin"),
    (
        {"sglang_router_host": "0.0.0.0", "sglang_router_api_keys": [{"tenant": "t", "key": "plain"}]},
        "sglang_router_api_keys holds a key written in plain text",
    ),
    ({"sglang_router_worker_api_key": "plain-worker-key"}, "sglang_router_worker_api_key is written in plain text"),
    ({"sglang_router_port": 34003}, "sglang_router_port 34003 is the port of an SGLang instance (published by"),
    ({"sglang_router_port": 34000}, "sglang_router_port 34000 is the port of an SGLang instance (published by"),
    ({"sglang_router_port": 70000}, "sglang_router_port 70000 is not a port (1 to 65535)"),
    ({"sglang_router_port": 0}, "sglang_router_port 0 is not a port (1 to 65535)"),
    ({"sglang_router_port": -1}, "sglang_router_port -1 is not a port (1 to 65535)"),
    ({"sglang_router_port": "x"}, not_a("int", "sglang_router_port")),
    ({"sglang_router_smg_port": 70000}, "sglang_router_smg_port 70000 is not a port (1 to 65535)"),
    ({"sglang_router_prometheus_port": 0}, "sglang_router_prometheus_port 0 is not a port (1 to 65535)"),
    ({"sglang_router_prometheus_port": 8980}, "sglang_router_port and sglang_router_prometheus_port are both 8980"),
    ({"sglang_router_smg_port": 29980}, "sglang_router_smg_port and sglang_router_prometheus_port are both 29980"),
    ({"sglang_router_prometheus_host": "0.0.0.0"}, "sglang_router_prometheus_host 0.0.0.0 is reachable from other"),
    ({"sglang_router_prometheus_host": "::"}, "sglang_router_prometheus_host :: is reachable from other"),
    (
        {"sglang_router_tls_certificate": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"},
        "sglang_router_tls_certificate and sglang_router_tls_private_key go together",
    ),
    (
        {"sglang_router_tls_private_key": "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----"},
        "sglang_router_tls_certificate and sglang_router_tls_private_key go together",
    ),
]
REMOVE = [  # test_drift.py
    ({"pct_container_remove_container": "maybe"}, not_a("bool", "pct_container_remove_container")),
    ({"pct_container_remove_container": "2"}, not_a("bool", "pct_container_remove_container")),
    ({"sglang_stack_venv": "/opt"}, "sglang_stack_venv must be an absolute path at least two levels deep"),
    ({"sglang_stack_venv": "/"}, "sglang_stack_venv must be an absolute path at least two levels deep"),
    ({"sglang_stack_venv": "opt/sglang"}, "sglang_stack_venv must be an absolute path at least two levels deep"),
    ({"sglang_stack_venv": ""}, "sglang_stack_venv must be an absolute path at least two levels deep"),
]
WHEELHOUSE = [  # test_offline.py
    ({"wheelhouse_platform": "linux"}, "wheelhouse_platform linux must be <arch>-manylinux_2_<glibc minor>"),
    ({"wheelhouse_platform": "x86_64-manylinux_2"}, "wheelhouse_platform x86_64-manylinux_2 must be <arch>-manylinux"),
    ({"wheelhouse_platform": "arm64-manylinux_2_36"}, "wheelhouse_platform arm64-manylinux_2_36 must be <arch>-"),
    (
        {"wheelhouse_python_version": "3.9"},
        "does not support (it has wheels for 3.10, 3.11, 3.12, 3.13): choose another Python"
        " (wheelhouse_python_version)",
    ),
    ({"wheelhouse_python_version": "3.14"}, "the virtual environment would use Python 3.14, which stack profile"),
    ({"wheelhouse_python_version": "3"}, "wheelhouse_python_version 3 must be the major.minor of the container Python"),
    ({"sglang_router_version": "latest"}, "sglang_router_version latest must be an exact smg version"),
    ({"sglang_router_version": ">=1.13"}, "sglang_router_version >=1.13 must be an exact smg version"),
    ({"wheelhouse_dest": ""}, "wheelhouse_dest must be the absolute path"),  # the role's default: the lab gave none
    ({"wheelhouse_dest": "never"}, "wheelhouse_dest must be the absolute path"),
]
OFFLINE = [  # test_offline.py: what the CT's wheelhouse mount holds
    (
        {"uv_venv_wheelhouse": "/mnt/models"},
        ["uv_venv_wheelhouse /mnt/models has no uv-0.13.9-", "ansible-playbook gpulxc.sglang.wheelhouse -l ct950"],
        {"uv_venv_container_result": container(wheelhouse={"has_uv": False, "fits": False, "target": None})},
    ),
    (  # its stack.in edited: built for another target
        {},
        "uv_venv_wheelhouse /mnt/wheelhouse was built for Python 3.12, x86_64-manylinux_2_39; this container runs"
        " Python 3.11 (uv_venv_python) with glibc 2.36 on x86_64: build it again for it"
        " (wheelhouse_python_version=3.11, wheelhouse_platform=x86_64-manylinux_2_36).",
        {
            "uv_venv_container_result": container(
                wheelhouse={**FITTING, "fits": False, "target": {"python": "3.12", "platform": "x86_64-manylinux_2_39"}}
            )
        },
    ),
]
CASES = {
    "new-ct": NEW_CT,
    "converged-ct": CONVERGED,
    "cluster": CLUSTER,
    "stack": STACK,
    "services": SERVICES,
    "services-without-router": SERVICES_WITHOUT_ROUTER,
    "router": ROUTER,
    "remove": REMOVE,
    "wheelhouse": WHEELHOUSE,
    "offline": OFFLINE,
}


def params(answered=False):
    """The cases as pytest parameters (group, variables, fragments, answers), each with a readable id; `answered`:
    only those whose node or container answers otherwise than their group's."""
    found = []
    for group, rows in CASES.items():
        for variables, expected, *answers in rows:
            if answers or not answered:
                label = ",".join(f"{k}={json.dumps(v)[:24]}" for k, v in variables.items()) or "answers"
                fragments = [expected] if isinstance(expected, str) else expected
                found.append(
                    pytest.param(group, variables, fragments, answers[0] if answers else {}, id=f"{group}:{label}")
                )
    return found


def run(group, variables, answers=None):
    """The group's run with these -e variables, the node and the containers answering `answers` over the group's."""
    setting = GROUPS[group]
    return refusal(
        setting["play"],
        {**setting.get("extra", {}), **variables},
        inventory=setting["inventory"],
        state={**setting["state"], **(answers or {})},
        skip_tags=setting.get("skip_tags", ()),
    )


def said(found):
    """A refusal's messages on one line, whitespace folded as the lab folds ansible-playbook's output."""
    return " ".join(" ".join(map(str, found[1])).split()) if found else ""


@pytest.fixture(scope="module")
def python_3_12_only(tmp_path_factory):
    path = tmp_path_factory.mktemp("profile") / "python-3.12-only.yml"
    path.write_text(json.dumps({**PROFILE, "pythons": ["3.12"]}))
    return str(path)


@pytest.mark.parametrize(("group", "variables", "fragments", "answers"), params())
def test_bad_input_is_refused_before_the_first_change(group, variables, fragments, answers, python_3_12_only):
    if variables.get("sglang_stack_profile") == PYTHON_3_12_ONLY:
        variables = {**variables, "sglang_stack_profile": python_3_12_only}
    found = run(group, variables, answers)
    assert found, "not refused"
    assert [fragment for fragment in fragments if fragment not in said(found)] == [], found


@pytest.mark.parametrize("group", GROUPS)
def test_the_same_run_without_bad_input_reaches_the_first_change(group):
    assert run(group, {}) is None


@pytest.mark.parametrize(("group", "variables", "fragments", "answers"), params(answered=True))
def test_where_the_node_or_container_answer_as_usual_the_same_variables_pass(group, variables, fragments, answers):
    """A case whose node or container answers otherwise: it is that answer that refuses its variables."""
    assert run(group, variables) is None


def test_two_containers_asking_for_different_wheelhouses_share_no_run():
    """test_offline.py: one wheelhouse a run (it is built once); ct951 pins another smg than ct950."""
    other = lab_inventory(
        ct950=AIR_GAPPED, ct951={**AIR_GAPPED, "proxmox_vmid": 951, "sglang_router_version": "1.12.0"}
    )
    found = refusal("wheelhouse", {"wheelhouse_dest": "/tmp/never"}, inventory=other)
    assert "but the containers ct951 ask for another one than ct950" in said(found), found
    same = lab_inventory(ct950=AIR_GAPPED, ct951={**AIR_GAPPED, "proxmox_vmid": 951})
    assert refusal("wheelhouse", {"wheelhouse_dest": "/tmp/never"}, inventory=same) is None


def test_a_debian_11_container_is_refused_before_anything_is_installed():
    """test_container_stack.py's ct961, made from the lab's Debian 11 template (glibc 2.31)."""
    old = {**CONVERGED_CT, "uv_venv_container_result": container(glibc="2.31")}
    found = refusal("stack", {}, inventory=CT961, state=old)
    assert "uv_venv: the container has glibc 2.31; sglang >= 0.5.11 wheels need glibc >= 2.34" in said(found), found
    assert "pct_container_ostemplate" in said(found)
    assert refusal("stack", {}, inventory=CT961, state=CONVERGED_CT) is None
