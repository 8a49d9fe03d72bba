#!/usr/bin/python
# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: jit_cache
short_description: Find the finished JIT builds in a shared cache and remove builds that were killed half-way
version_added: 0.2.0
description:
  - Walks a JIT cache (FlashInfer's C($FLASHINFER_WORKSPACE_BASE/.cache/flashinfer), tvm-ffi's cache) for
    ninja build directories - a directory holding a C(build.ninja) - and sorts each into V(finished),
    V(building) or V(unfinished).
  - V(finished) - every output that C(build.ninja) declares exists and is recorded in the directory's
    C(.ninja_log), which ninja writes only after a command completed. Outputs named through ninja
    variables are not matched; their directory counts as finished once its log has an entry.
  - V(building) - not finished, and another process holds the build's lock (FlashInfer's
    C(cached_ops/tmp/<op>.lock), tvm-ffi's C(<build dir>/lock)); a build in progress is never touched.
  - V(unfinished) - not finished and nobody holds its lock - a build killed half-way (a SIGKILL during
    the link leaves a truncated library that a loader takes for a finished one, flashinfer#972). These
    directories are removed while the module holds their locks (taken without waiting), so that no build
    starts in them meanwhile; the next start builds them again.
  - Reports whether the cache is warm (at least one finished build).
author:
  - gpulxc.sglang developers (@gpulxc)
extends_documentation_fragment:
  - gpulxc.sglang.attributes
attributes:
  check_mode:
    support: full
    details: Reports the directories it would remove and removes nothing.
  diff_mode:
    support: full
    details: The unfinished build directories, before (present) and after (absent).
options:
  path:
    description: The root of the JIT cache. A missing root is an empty (cold) cache.
    type: path
    required: true
"""

EXAMPLES = r"""
- name: Remove builds killed half-way; is the FlashInfer cache warm?
  gpulxc.sglang.jit_cache:
    path: /var/cache/sglang/.cache/flashinfer
  register: jit_cache_result

- name: Start the first instance alone on a cold cache
  ansible.builtin.systemd_service:
    name: sglang@0.service
    state: started
  when: not jit_cache_result.warm
"""

RETURN = r"""
warm:
  description: At least one finished build is in the cache.
  returned: always
  type: bool
  sample: true
finished:
  description: The finished build directories.
  returned: always
  type: list
  elements: str
  sample: [/var/cache/sglang/.cache/flashinfer/0.6.11.post1/120a/cached_ops/batch_decode]
building:
  description: Unfinished build directories whose lock another process holds (left alone).
  returned: always
  type: list
  elements: str
  sample: []
removed:
  description: The unfinished build directories removed (in check mode, those that would be).
  returned: always
  type: list
  elements: str
  sample: [/var/cache/sglang/.cache/flashinfer/0.6.11.post1/120a/cached_ops/batch_prefill]
"""

import errno
import fcntl
import os
import shutil
from contextlib import contextmanager

from ansible.module_utils.basic import AnsibleModule


def ninja_outputs(build_file):
    """The explicit outputs of every `build` statement (ninja's `$ ` and `$:` escapes undone)."""
    outputs = []
    with open(build_file, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.startswith("build "):
                continue
            head = line[len("build ") :].replace("$ ", "\0").replace("$:", "\1")
            explicit = head.split(":", 1)[0].split("|", 1)[0]
            outputs.extend(word.replace("\0", " ").replace("\1", ":") for word in explicit.split())
    return outputs


def ninja_log_outputs(build_dir):
    """The outputs that ninja recorded as built (its log: start, end, mtime, output, command hash)."""
    try:
        with open(os.path.join(build_dir, ".ninja_log"), encoding="utf-8", errors="replace") as handle:
            return {fields[3] for fields in (line.rstrip("\n").split("\t") for line in handle) if len(fields) >= 5}
    except FileNotFoundError:
        return set()


def is_finished(build_dir):
    logged = ninja_log_outputs(build_dir)
    outputs = ninja_outputs(os.path.join(build_dir, "build.ninja"))
    literal = [out for out in outputs if "$" not in out]
    if not logged or not outputs:
        return False
    return all(out in logged and os.path.exists(os.path.join(build_dir, out)) for out in literal)


def lock_files(build_dir):
    parent, name = os.path.split(build_dir)
    return [os.path.join(parent, "tmp", name + ".lock"), os.path.join(build_dir, "lock")]


@contextmanager
def build_locks(build_dir):
    """Take each existing lock of the build without waiting (flock, as filelock takes them); yields False when
    another process holds one. Held while the caller looks again and removes, so no build starts meanwhile."""
    handles = []
    try:
        for lock in lock_files(build_dir):
            try:
                handles.append(os.open(lock, os.O_RDONLY))
            except OSError:
                continue
            try:
                fcntl.flock(handles[-1], fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                if error.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                yield False
                return
        yield True
    finally:
        for handle in handles:
            os.close(handle)  # releases its lock


def build_dirs(root):
    for current, dirs, files in os.walk(root):
        if "build.ninja" in files:
            dirs[:] = []  # a build directory's own subdirectories are its objects
            yield current
        dirs.sort()


def main():
    module = AnsibleModule(argument_spec={"path": {"type": "path", "required": True}}, supports_check_mode=True)
    root = module.params["path"]
    finished, building, removed = [], [], []
    for build_dir in build_dirs(root):
        if is_finished(build_dir):
            finished.append(build_dir)
            continue
        with build_locks(build_dir) as free:
            if not free:
                building.append(build_dir)
            elif is_finished(build_dir):  # finished while we looked
                finished.append(build_dir)
            else:
                removed.append(build_dir)
                if not module.check_mode:
                    try:
                        shutil.rmtree(build_dir)
                    except OSError as error:
                        module.fail_json(msg=f"Cannot remove the unfinished JIT build {build_dir}: {error}")
    result = {
        "changed": bool(removed),
        "warm": bool(finished),
        "finished": finished,
        "building": building,
        "removed": removed,
    }
    if module._diff and removed:
        result["diff"] = {"before": "".join(f"{d}/ (unfinished build)\n" for d in removed), "after": ""}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
