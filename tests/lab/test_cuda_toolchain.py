"""uv_venv, cuda_wheels, jit_toolchain and cuda_surgery (playbooks/cuda_toolchain.yml) on a lab CT,
with the real pip CUDA 13.2 wheels and a real validation compile: converge, no recompile on a second
run, drift repaired, each fix of the recipe shown necessary by the recipe's own error, bad input.
"""

import json
import os
import re
import subprocess

import pytest
from conftest import REPO, destroy, pct

VMID = 960
PLAYBOOK = str(REPO / ".venv/bin/ansible-playbook")
VALIDATE = "/var/lib/gpulxc/validate"
ENV = "set -a; . /etc/sglang/cuda.env; set +a; "


@pytest.fixture(scope="module")
def inventory(lab_ready, tmp_path_factory):
    destroy(VMID)
    path = tmp_path_factory.mktemp("inv") / "ct960.yml"
    host = {"proxmox_vmid": VMID, "pct_container_node": "lab-pve"}
    path.write_text(json.dumps({"sglang_containers": {"hosts": {"ct960": host}}}))
    proc, _ = play(path, "site.yml")
    assert proc.returncode == 0, proc.stdout[-3000:]
    yield path
    destroy(VMID)


def play(inventory, playbook, *extra):
    proc = subprocess.run(
        [PLAYBOOK, playbook, "-i", "inventories/lab", "-i", str(inventory), "-l", "ct960", *extra],
        capture_output=True, text=True, check=False, cwd=REPO,
        env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="false"),
    )  # fmt: skip
    recap = re.search(r"ct960\s*:\s*ok=\d+\s+changed=(\d+)", proc.stdout)
    return proc, int(recap.group(1)) if recap else None


def toolchain(inventory, *extra):
    return play(inventory, "playbooks/cuda_toolchain.yml", *extra)


def in_ct(script):
    return pct("exec", VMID, "--", "/bin/bash", "-c", script, check=False)


def cuda_home():
    return in_ct(ENV + "echo $CUDA_HOME").stdout.strip()


def rebuild():
    """Build the validation program as FlashInfer's JIT does: nvcc -c, then the host linker."""
    return in_ct(ENV + f"nvcc -gencode arch=compute_120,code=sm_120 -c -o /tmp/v.o {VALIDATE}/validate.cu && "
                 "c++ -o /tmp/v /tmp/v.o -L$CUDA_HOME/lib64 -L$CUDA_HOME/lib64/stubs -lcudart -lcuda")  # fmt: skip


def test_check_mode_on_a_fresh_container_changes_nothing(inventory):
    proc, changed = toolchain(inventory, "--check")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert changed > 0
    assert in_ct("ls /opt/sglang /opt/gpulxc /usr/local/bin/uv").returncode != 0  # nothing was made


def test_converges_compiles_and_does_not_recompile(inventory):
    proc, changed = toolchain(inventory)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert changed > 0
    assert (
        "libcudart.so.13 => " + cuda_home() + "/lib/libcudart.so.13" in in_ct(ENV + f"ldd {VALIDATE}/validate").stdout
    )
    assert "SONAME" in in_ct(ENV + "readelf -d $CUDA_HOME/lib/stubs/libcuda.so | grep 'libcuda.so.1'").stdout
    mtime = in_ct(f"stat -c %Y {VALIDATE}/validate").stdout
    proc, changed = toolchain(inventory)
    assert proc.returncode == 0 and changed == 0, proc.stdout[-3000:]
    assert in_ct(f"stat -c %Y {VALIDATE}/validate").stdout == mtime
    proc, changed = toolchain(inventory, "--check")
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
    toolchain(inventory)
    assert in_ct(ENV + break_it).returncode == 0
    proc = rebuild()
    assert proc.returncode != 0
    assert error in proc.stdout + proc.stderr  # the recipe's own error
    in_ct("rm -rf /tmp/cccl.off /tmp/nv.off")
    proc, changed = toolchain(inventory)
    assert proc.returncode == 0 and changed > 0, proc.stdout[-3000:]
    assert rebuild().returncode == 0


def test_drift_repaired(inventory):
    toolchain(inventory)
    in_ct("/usr/local/bin/uv pip install --python /opt/sglang/venv/bin/python nvidia-nvvm==13.5.37")
    in_ct("sed -i 's#^LD_LIBRARY_PATH=.*#LD_LIBRARY_PATH=/nowhere#' /etc/sglang/cuda.env")
    proc, changed = toolchain(inventory)
    assert proc.returncode == 0 and changed >= 2, proc.stdout[-3000:]
    freeze = in_ct("/usr/local/bin/uv pip freeze --python /opt/sglang/venv/bin/python").stdout
    assert "nvidia-nvvm==13.2.78" in freeze
    assert "LD_LIBRARY_PATH=/nowhere" not in in_ct("cat /etc/sglang/cuda.env").stdout
    proc, changed = toolchain(inventory)
    assert changed == 0


def test_a_cuda_family_with_mixed_minors_fails_before_any_change(inventory):
    family = {"nvidia-cuda-nvcc": "13.2.78", "nvidia-nvvm": "13.5.37", "nvidia-cuda-crt": "13.2.78",
              "nvidia-cuda-cccl": "13.2.75"}  # fmt: skip
    proc, changed = toolchain(inventory, "-e", json.dumps({"cuda_wheels_family": family}))
    assert proc.returncode != 0 and changed == 0
    assert "cuda_wheels_family mixes CUDA minors ['13.2', '13.5']" in " ".join(proc.stdout.split())
