#!/usr/bin/python
# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cuda_toolkit_info
short_description: Read the pip CUDA toolkit's layout in a virtual environment, before and after it is fixed
version_added: 0.2.0
description:
  - Runs in the container and changes nothing. Reads, in one call, what C(gpulxc.sglang.cuda_surgery) decides on.
  - C(CUDA_HOME) (O(cuda_subdir) under the venv's C(purelib)) and whether its C(nvcc) is there.
  - The driver's C(libcuda.so.1) in the loader cache (C(ldconfig -p)).
  - Which of the CCCL headers JIT builds include are missing, and with O(flashinfer_cccl) which of the trees
    C(nv/) and C(cuda/) of FlashInfer's bundled CCCL are missing or differ from C($CUDA_HOME/include).
  - With O(packages), the installed versions of those distributions in the venv; with O(nvcc_release), the
    C(X.Y) release C($CUDA_HOME/bin/nvcc --version) reports.
  - With O(ninja_dir), whether ninja has work to do there; with O(binary), what its libraries resolve to
    (C(ldd)) and whether C(libnvrtc.so.13) loads - both in the environment of O(env_file).
author:
  - gpulxc.sglang developers (@gpulxc)
extends_documentation_fragment:
  - gpulxc.sglang.attributes
  - gpulxc.sglang.attributes.info_module
options:
  venv:
    description: The virtual environment holding the CUDA wheels.
    type: path
    required: true
  cuda_subdir:
    description: C(CUDA_HOME) relative to the venv's C(purelib).
    type: str
    default: nvidia/cu13
  flashinfer_cccl:
    description:
      - Compare FlashInfer's bundled CCCL (C(flashinfer/data/cccl/libcudacxx/include)) with C($CUDA_HOME/include).
    type: bool
    default: false
  packages:
    description: Distributions whose installed versions to read from the venv's C(*.dist-info).
    type: list
    elements: str
    default: []
  nvcc_release:
    description: Run C($CUDA_HOME/bin/nvcc --version) and report its release.
    type: bool
    default: false
  env_file:
    description: C(KEY=value) lines (absolute values) for O(ninja_dir) and O(binary); a missing file is no change.
    type: path
  ninja_dir:
    description: A ninja build directory to dry-run (C(ninja -n)).
    type: path
  binary:
    description: A program whose libraries to resolve with C(ldd).
    type: path
"""

EXAMPLES = r"""
- name: Read the CUDA toolkit
  gpulxc.sglang.cuda_toolkit_info:
    venv: /opt/sglang/venv
  register: toolkit

- name: Say where CUDA_HOME is
  ansible.builtin.debug:
    msg: "{{ toolkit.cuda_home }} (nvcc: {{ toolkit.nvcc }}, driver libcuda: {{ toolkit.libcuda.driver or 'none' }})"
"""

RETURN = r"""
purelib:
  description: >-
    The venv's C(purelib), links resolved (a stack's own directory); empty when its Python does not run (see
    RV(error)).
  returned: always
  type: str
cuda_home:
  description: C(CUDA_HOME); empty without RV(purelib).
  returned: always
  type: str
error:
  description: Why the venv's Python did not run.
  returned: always
  type: str
nvcc:
  description: Whether C($CUDA_HOME/bin/nvcc) exists.
  returned: always
  type: bool
libcuda:
  description: The C(libcuda.so.1) of the loader cache.
  returned: always
  type: dict
  contains:
    cached:
      description: Whether the cache has a C(libcuda.so.1) (any architecture).
      type: bool
    driver:
      description: The path of its x86-64 one; empty when there is none.
      type: str
versions:
  description: The installed version of each of O(packages) found in the venv (names as pip normalizes them).
  returned: always
  type: dict
  sample: {nvidia-cuda-nvcc: 13.2.78, nvidia-cuda-cccl: 13.2.75}
nvcc_release:
  description: The C(X.Y) release nvcc reports; empty without O(nvcc_release) or when nvcc does not run.
  returned: always
  type: str
  sample: "13.2"
cccl_missing:
  description:
    - The headers of C(nv/target), C(cccl/nv/target), C(cccl/cuda/std/type_traits) missing in C($CUDA_HOME/include).
  returned: always
  type: list
  elements: str
flashinfer_cccl:
  description: FlashInfer's bundled CCCL against C($CUDA_HOME/include) (empty without O(flashinfer_cccl)).
  returned: always
  type: dict
  contains:
    path:
      description: Its include directory.
      type: str
    missing:
      description: The trees of C(nv), C(cuda) it does not have.
      type: list
      elements: str
    differs:
      description: The trees it has that differ from C($CUDA_HOME/include)'s.
      type: list
      elements: str
ninja_up_to_date:
  description: Whether C(ninja -n) in O(ninja_dir) said C(no work to do) (false without O(ninja_dir)).
  returned: always
  type: bool
libraries:
  description: Per library C(ldd) lists for O(binary), the path it resolves to (empty when not found).
  returned: always
  type: dict
  sample: {libcudart.so.13: /opt/sglang/venv/lib/python3.11/site-packages/nvidia/cu13/lib/libcudart.so.13}
ldd_error:
  description: What C(ldd) said when it failed; empty otherwise.
  returned: always
  type: str
nvrtc_loads:
  description: Whether C(libnvrtc.so.13) loads in the environment of O(env_file) (false without O(binary)).
  returned: always
  type: bool
"""

import filecmp
import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpulxc.sglang.plugins.module_utils._dists import installed_versions

CCCL_HEADERS = ("nv/target", "cccl/nv/target", "cccl/cuda/std/type_traits")
FLASHINFER_CCCL = "flashinfer/data/cccl/libcudacxx/include"
CCCL_TREES = ("nv", "cuda")
PURELIB = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
NVRTC = 'import ctypes; ctypes.CDLL("libnvrtc.so.13")'


def parse_ldconfig(text):
    """(whether a libcuda.so.1 is cached, the path of the x86-64 one or '')."""
    cached, driver = False, ""
    for line in text.splitlines():
        name, _sep, rest = line.strip().partition(" ")
        if name != "libcuda.so.1":
            continue
        cached = True
        if "x86-64" in rest and "=> " in rest and not driver:
            driver = rest.split("=> ", 1)[1].strip()
    return cached, driver


def parse_nvcc_release(text):
    """'13.2' from nvcc's 'Cuda compilation tools, release 13.2, V13.2.78' line; '' without one."""
    match = re.search(r"^Cuda compilation tools, release ([0-9]+\.[0-9]+),", text, re.M)
    return match.group(1) if match else ""


def parse_ldd(text):
    """{library: resolved path ('' for 'not found')} from ldd's '<name> => <path> (<address>)' lines."""
    found = {}
    for line in text.splitlines():
        name, sep, rest = line.strip().partition(" => ")
        if sep:
            path = rest.rsplit(" (", 1)[0].strip()
            found[name] = "" if path == "not found" else path
    return found


def parse_env_file(path):
    env = {}
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                key, sep, value = line.strip().partition("=")
                if sep and key and not key.startswith("#"):
                    env[key] = value
    except OSError:
        pass
    return env


def trees_equal(left, right):
    """Like diff -rq finding nothing: the same names, recursively, and the same file contents."""
    compared = filecmp.dircmp(left, right)
    if compared.left_only or compared.right_only or compared.funny_files:
        return False
    _match, mismatch, errors = filecmp.cmpfiles(left, right, compared.common_files, shallow=False)
    if mismatch or errors:
        return False
    return all(trees_equal(os.path.join(left, d), os.path.join(right, d)) for d in compared.common_dirs)


def compare_flashinfer(purelib, cuda_home):
    source = os.path.join(purelib, FLASHINFER_CCCL)
    found = {"path": source, "missing": [], "differs": []}
    for tree in CCCL_TREES:
        ours = os.path.join(cuda_home, "include", tree)
        if not os.path.isdir(os.path.join(source, tree)):
            found["missing"].append(tree)
        elif not os.path.isdir(ours) or not trees_equal(os.path.join(source, tree), ours):
            found["differs"].append(tree)
    return found


def run(module, args, env=None):
    """run_command, with a command that is not there (no venv yet, no ninja yet) as rc 127 instead of a failure."""
    try:
        return module.run_command(args, environ_update=env, handle_exceptions=False)
    except OSError as error:
        return 127, "", str(error)


def main():
    module = AnsibleModule(
        argument_spec={
            "venv": {"type": "path", "required": True},
            "cuda_subdir": {"type": "str", "default": "nvidia/cu13"},
            "flashinfer_cccl": {"type": "bool", "default": False},
            "packages": {"type": "list", "elements": "str", "default": []},
            "nvcc_release": {"type": "bool", "default": False},
            "env_file": {"type": "path"},
            "ninja_dir": {"type": "path"},
            "binary": {"type": "path"},
        },
        supports_check_mode=True,
    )
    params = module.params
    result = {
        "changed": False,
        "purelib": "",
        "cuda_home": "",
        "error": "",
        "nvcc": False,
        "versions": {},
        "nvcc_release": "",
        "cccl_missing": [],
        "flashinfer_cccl": {},
        "ninja_up_to_date": False,
        "libraries": {},
        "ldd_error": "",
        "nvrtc_loads": False,
    }
    rc, out, err = run(module, [os.path.join(params["venv"], "bin/python"), "-c", PURELIB])
    if rc == 0 and out.strip():
        # the stack's own directory where the venv is a link to one (sglang_stack): a server keeps the toolkit of
        # the stack it started with when the link is switched
        result["purelib"] = os.path.realpath(out.strip())
        result["cuda_home"] = os.path.join(result["purelib"], params["cuda_subdir"])
    else:
        result["error"] = (err or out).strip() or "rc %s" % rc
    home = result["cuda_home"]
    if home:
        result["nvcc"] = os.path.exists(os.path.join(home, "bin/nvcc"))
        result["cccl_missing"] = [h for h in CCCL_HEADERS if not os.path.exists(os.path.join(home, "include", h))]
        if params["packages"]:
            result["versions"] = installed_versions([result["purelib"]], params["packages"])
        if params["nvcc_release"] and result["nvcc"]:
            rc, out, _err = run(module, [os.path.join(home, "bin/nvcc"), "--version"])
            result["nvcc_release"] = parse_nvcc_release(out) if rc == 0 else ""
        if params["flashinfer_cccl"]:
            result["flashinfer_cccl"] = compare_flashinfer(result["purelib"], home)
    cached, driver = parse_ldconfig(run(module, ["/sbin/ldconfig", "-p"])[1])
    result["libcuda"] = {"cached": cached, "driver": driver}
    env = parse_env_file(params["env_file"]) if params["env_file"] else {}
    if params["ninja_dir"]:
        rc, out, err = run(module, ["ninja", "-C", params["ninja_dir"], "-n"], env)
        result["ninja_up_to_date"] = rc == 0 and "no work to do" in out
    if params["binary"]:
        rc, out, err = run(module, ["ldd", params["binary"]], env)
        result["libraries"] = parse_ldd(out) if rc == 0 else {}
        result["ldd_error"] = "" if rc == 0 else (err or out).strip() or "rc %s" % rc
        result["nvrtc_loads"] = run(module, ["python3", "-c", NVRTC], env)[0] == 0
    module.exit_json(**result)


if __name__ == "__main__":
    main()
