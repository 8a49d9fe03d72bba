# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that decide for role cuda_surgery: its settings' errors, the toolkit's layout to fix (from module
gpulxc.sglang.cuda_toolkit_info's result) and what the validation program's libraries resolve to."""

from __future__ import annotations

import re

_ROOT = {"owner": "root", "group": "root"}


def cuda_surgery_errors(venv, validate_archs):
    """The role's settings: an absolute venv, SM numbers to validate."""
    errors = []
    if not re.match(r"^/", str(venv)):
        errors.append(f"cuda_surgery: cuda_surgery_venv must be an absolute path (now {venv}).")
    if len(validate_archs) == 0 or any(not re.match(r"^[0-9]+[af]?$", str(arch)) for arch in validate_archs):
        errors.append(
            'cuda_surgery: cuda_surgery_validate_archs must list SM numbers such as "90" or "120" (now'
            f" {validate_archs})."
        )
    return errors


def cuda_surgery_toolkit_errors(toolkit, venv):
    """No nvcc in the venv (or no venv's Python to find it with): the stack must be installed first."""
    if toolkit["nvcc"]:
        return []
    home = toolkit["cuda_home"]
    what = f"no nvcc at {home}/bin/nvcc" if home else f"the venv's Python does not run ({toolkit['error']})"
    return [f"cuda_surgery: {what}: run gpulxc.sglang.sglang_stack first (cuda_surgery_venv = {venv})."]


def cuda_surgery_layout(toolkit, bin_dir, stub_generator):
    """The toolkit's layout for module gpulxc.sglang.file_set: lib64 -> lib, the unversioned libcudart.so and
    libnvrtc.so, the stubs directory with the driver's libcuda.so.1 linked in, or without a driver the stub's
    generator (`stub_generator`, its content) in `bin_dir` unless a stub is already there."""
    home, libcuda = toolkit["cuda_home"], toolkit["libcuda"]
    directories = [{"path": f"{home}/lib/stubs", **_ROOT, "mode": "0755"}]
    files = []
    if not libcuda["cached"]:
        directories.append({"path": bin_dir, **_ROOT, "mode": "0755"})
        files.append({"path": f"{bin_dir}/make_libcuda_stub.py", **_ROOT, "mode": "0644", "content": stub_generator})
    links = [
        {"path": f"{home}/lib64", "src": "lib"},
        {"path": f"{home}/lib/libcudart.so", "src": "libcudart.so.13"},
        {"path": f"{home}/lib/libnvrtc.so", "src": "libnvrtc.so.13"},
    ]
    if libcuda["driver"]:
        links.append({"path": f"{home}/lib/stubs/libcuda.so", "src": libcuda["driver"]})
    return {"directories": directories, "files": files, "links": links}


def cuda_surgery_link_errors(rebuilt, built, *, cuda_home, validate_dir, env_file):
    """What the validation program's libraries resolve to (module gpulxc.sglang.cuda_toolkit_info's `libraries`,
    read after the rebuild, or by the up-to-date check when nothing was rebuilt): the toolkit's libcudart, a real
    libcuda (never the stub), a loading libnvrtc."""
    found = built if rebuilt.get("skipped") else rebuilt
    libraries = found.get("libraries") or {}
    cudart, libcuda = libraries.get("libcudart.so.13") or "", libraries.get("libcuda.so.1") or ""
    checks = [
        (found.get("ldd_error"), lambda: f"cuda_surgery: ldd {validate_dir}/validate failed: {found['ldd_error']}"),
        (
            not cudart.startswith(f"{cuda_home}/lib"),
            lambda: (
                f"cuda_surgery: the validation program links libcudart.so.13 from {cudart or 'nowhere'}, not from"
                f" {cuda_home}/lib: check LD_LIBRARY_PATH in {env_file}."
            ),
        ),
        (
            "/stubs/" in libcuda,
            lambda: (
                f"cuda_surgery: the validation program loads libcuda.so.1 from the stubs directory ({libcuda}):"
                " the stubs must never be on the loader path."
            ),
        ),
        (
            not found.get("nvrtc_loads"),
            lambda: f"cuda_surgery: libnvrtc.so.13 does not load in the environment of {env_file}.",
        ),
    ]
    return [message() for failed, message in checks if failed]


class FilterModule:
    def filters(self):
        return {
            "cuda_surgery_errors": cuda_surgery_errors,
            "cuda_surgery_toolkit_errors": cuda_surgery_toolkit_errors,
            "cuda_surgery_layout": cuda_surgery_layout,
            "cuda_surgery_link_errors": cuda_surgery_link_errors,
        }
