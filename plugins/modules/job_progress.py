#!/usr/bin/python
# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: job_progress
short_description: Wait a slice of time for an async job and say how far it got
version_added: 0.3.0
description:
  - Waits up to O(slice) seconds for a job started with C(async) and C(poll=0) to finish, then returns one
    RV(progress) line - what the job does, the size of each watched path (of a total, where given) and how long
    it has run - so that a loop of calls prints what a long install or copy is doing instead of a silent wait.
  - The job is finished when its results file holds the module's result, as M(ansible.builtin.async_status) reads
    it (a file that does not parse yet, or still has C(started), is a running job). Collect the result with
    M(ansible.builtin.async_status) afterwards; this module reads the file and changes nothing.
author:
  - gpulxc.sglang developers (@gpulxc)
extends_documentation_fragment:
  - gpulxc.sglang.attributes
  - gpulxc.sglang.attributes.info_module
options:
  results_file:
    description: The C(results_file) of the async task's registered result.
    type: path
    required: true
  what:
    description: What the job does, the start of the line (for example V(sglang_stack - installing stack.lock)).
    type: str
    required: true
  watch:
    description: Paths whose size (of every file under a directory, links not followed) says how far the job got.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: A file or directory; a missing one has size 0.
        type: path
        required: true
      name:
        description: What the path holds, in the line.
        type: str
        required: true
      total:
        description: A file or directory whose size is what O(watch[].path) reaches when the job is done.
        type: path
  slice:
    description: Return after at most this many seconds when the job has not finished.
    type: float
    default: 20
  resume:
    description: The previous slice's RV(resume) (when the wait began).
    type: dict
"""

EXAMPLES = r"""
- name: Copy a model (a job)
  ansible.builtin.command:
    argv: [cp, -a, /srv/models/Qwen3-8B, /dev/shm/Qwen3-8B]
  async: 3600
  poll: 0
  register: copy_job
  changed_when: true

- name: Wait for the copy, one line of progress every 20 s
  gpulxc.sglang.job_progress:
    results_file: "{{ copy_job.results_file }}"
    what: copying the model
    watch:
      - {path: /dev/shm/Qwen3-8B, name: copied, total: /srv/models/Qwen3-8B}
    resume: "{{ copy_wait.resume | default(omit) }}"
  loop: "{{ range(3600 // 20 + 2) | list }}"
  loop_control:
    label: "{{ copy_wait.progress | default('') }}"
    break_when: copy_wait.done
  register: copy_wait

- name: The copy's result
  ansible.builtin.async_status:
    jid: "{{ copy_job.ansible_job_id }}"
"""

RETURN = r"""
done:
  description: Whether the job has finished (successfully or not).
  returned: always
  type: bool
progress:
  description: What the job does, the watched sizes, and how long it has run.
  returned: always
  type: str
  sample: "copying the model: copied 12.3 GiB of 16.4 GiB after 1m20s"
resume:
  description: What the next slice passes as O(resume).
  returned: always
  type: dict
job_failed:
  description: Whether the job finished failed (the module failed, or the job ran out of its C(async) time).
  returned: always
  type: bool
job_msg:
  description: The failed job's message (for a job out of time, async_wrapper's), and the end of what a failed
    command wrote (its stderr, else its stdout).
  returned: always
  type: str
  sample: Job reached maximum time limit of 3600 seconds.
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule


def finished(results_file):
    """The job's result once it has finished, else None - as async_status decides (ansible-core
    lib/ansible/modules/async_status.py): the file parses, and has no `started` (async_wrapper's placeholder)."""
    try:
        with open(results_file, encoding="utf-8") as handle:
            data = json.loads(handle.read())
    except (OSError, ValueError):
        return None  # not written yet, or being written
    return data if isinstance(data, dict) and "started" not in data else None


def size(path):
    """Bytes of a file, or of every regular file under a directory (links not followed); 0 if missing."""
    try:
        if not os.path.isdir(path) or os.path.islink(path):
            return os.lstat(path).st_size
    except OSError:
        return 0
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue  # removed while walked
    return total


def human(count):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"


def duration(seconds):
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def main():
    module = AnsibleModule(
        argument_spec={
            "results_file": {"type": "path", "required": True},
            "what": {"type": "str", "required": True},
            "watch": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "path": {"type": "path", "required": True},
                    "name": {"type": "str", "required": True},
                    "total": {"type": "path"},
                },
            },
            "slice": {"type": "float", "default": 20},
            "resume": {"type": "dict"},
        },
        supports_check_mode=True,
    )
    params = module.params
    if params["slice"] < 0:
        module.fail_json(msg=f"slice is {params['slice']}: give 0 (look once) or more seconds.")
    started = float((params["resume"] or {}).get("started", time.time()))
    end = time.monotonic() + params["slice"]
    result = finished(params["results_file"])
    while result is None and time.monotonic() < end:
        time.sleep(min(0.2, max(0.0, end - time.monotonic())))
        result = finished(params["results_file"])
    done = result is not None
    parts = []
    for item in params["watch"]:
        part = f"{item['name']} {human(size(item['path']))}"
        if item["total"]:
            part += f" of {human(size(item['total']))}"
        parts.append(part)
    line = f"{params['what']}: {', '.join(parts) + ' ' if parts else ''}after {duration(time.time() - started)}"
    if done:
        line += " (ended)"
    failed = bool(done and result.get("failed"))
    message = ""
    if failed:  # a command's own words are in its output: its msg only says "non-zero return code"
        detail = str(result.get("stderr") or result.get("stdout") or "").strip()
        message = str(result.get("msg", "")) + (f": {detail[-2000:]}" if detail else "")
    module.exit_json(
        changed=False, done=done, progress=line, resume={"started": started}, job_failed=failed, job_msg=message
    )


if __name__ == "__main__":
    main()
