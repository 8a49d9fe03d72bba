#!/usr/bin/python
# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: uv_stack
short_description: One uv resolve into a lock file, installed exactly and kept so
version_added: 0.1.0
description:
  - Writes the requirements of a Python stack (O(requirements)) and the declared overrides (O(overrides)) into
    O(dir)/requirements.in and O(dir)/overrides.txt (gpulxc.sglang.stack_requirements makes both from a stack
    profile).
  - When those inputs differ from the ones the lock was made from, or the lock lacks a file's hash, resolves them
    once with C(uv pip compile --override --generate-hashes) into O(dir)/stack.lock, every file of a version
    listed with its sha256. The input files and the lock are replaced only
    after the resolve succeeded, so a failing resolve changes nothing. Inputs that differ only in their
    C(# from) comments (O(label)) are rewritten without a resolve.
  - Compares the virtual environment (C(uv pip freeze)) with the lock on every run, and when anything
    differs (a package upgraded, downgraded, added or removed by hand) installs exactly the lock with
    C(uv pip sync --require-hashes), so a file the index serves changed or cut short is refused; uv installs
    only once every file is downloaded and checked, so a failed download leaves the environment as it was.
  - Checks every file each installed distribution's C(RECORD) lists (it exists and has the size installed;
    byte code left out), and reinstalls a distribution whose files are gone or changed while its C(dist-info)
    still reads as installed (C(uv pip sync --reinstall-package)); files matching O(unchecked) are left to the
    step that owns them.
  - Then runs C(uv pip check) and fails on any complaint that is not about a project with a declared
    override.
author:
  - gpulxc.sglang developers (@gpulxc)
extends_documentation_fragment:
  - gpulxc.sglang.attributes
attributes:
  check_mode:
    support: full
    details: Reports whether it would resolve and what it would install, and changes nothing.
  diff_mode:
    support: full
    details: Shows the packages that would change (installed versus locked) and changed inputs.
options:
  venv:
    description: The virtual environment (its C(bin/python) is the interpreter resolved for).
    type: path
    required: true
  dir:
    description: Where the inputs and the lock live (C(requirements.in), C(overrides.txt), C(stack.lock)).
    type: path
    required: true
  requirements:
    description: The caller's own requirements (PEP 508 strings).
    type: list
    elements: str
    default: []
  overrides:
    description: The caller's declared overrides (PEP 508 strings).
    type: list
    elements: str
    default: []
  extra_index_urls:
    description: Indexes besides uv's configured one; part of the resolve's inputs.
    type: list
    elements: str
    default: []
  uv:
    description: The uv program.
    type: path
    default: /usr/local/bin/uv
  unchecked:
    description:
      - C(RECORD) paths (fnmatch patterns, relative to site-packages) whose files another step replaces or checks,
        left out of the file check.
    type: list
    elements: str
    default: []
    version_added: 0.2.0
  stacks_dir:
    description:
      - Where each lock gets a virtual environment of its own, named by the lock's sha256 (C(<stacks_dir>/<16 hex>)),
        O(venv) being a link to the current one. A new lock is installed and checked in its own directory while
        the current one stays as it is, then O(venv) is switched to it in one C(rename) (an instance starting
        then finds either the whole old stack or the whole new one, never a half-installed one); the stack it
        replaced stays (with O(keep_stacks), the most recent ones), older ones are removed unless a process still
        runs from them or a unit names them. A lock whose directory is
        there already (a rollback) is switched to without installing it again. A drift of the current stack is
        repaired in place. O(venv) as a plain directory at the lock (before this option) is moved there as it is.
      - Unset, O(venv) is installed in place.
    type: path
    version_added: 0.2.0
  keep_stacks:
    description:
      - With O(stacks_dir), how many stacks stay on disk, the current one included - the current, the one it
        replaced, then the most recently used (switched to) others; older ones are removed at a switch and at any
        run that finds more (a lowered count). A stack a process runs from or a unit names stays anyway.
      - V(1) keeps only the current one (a rollback then installs the old lock again).
    type: int
    default: 2
    version_added: 0.3.0
  python:
    description: The interpreter a new stack's virtual environment is made from (C(uv venv --python)).
    type: path
    default: /usr/bin/python3
    version_added: 0.2.0
  cache_lock:
    description:
      - A file whose exclusive lock (C(flock)) every resolve and install holds while it runs. Containers that share
        a node's uv cache (a bind mount of one node directory) name the same file in it, so that side by side they
        download each file once, one after another - the first fills the cache, the others read it.
      - Unset, nothing is locked (a cache of the container's own).
    type: path
    version_added: 0.3.0
  failure_hint:
    description: A sentence added to a failed resolve's message, naming the variables that feed it.
    type: str
    default: ""
  label:
    description: Where O(requirements) and O(overrides) come from, as the input files name it.
    type: str
    default: the caller
"""

EXAMPLES = r"""
- name: Resolve and install the SGLang stack
  gpulxc.sglang.uv_stack:
    venv: /opt/sglang/venv
    dir: /etc/sglang/stack
    requirements: ["sglang==0.5.12", "torch==2.11.0"]
    overrides: ["nvidia-cuda-runtime==13.2.75"]
"""

RETURN = r"""
resolved:
  description: Whether the lock was made (again) in this run (in check mode, whether it would be).
  returned: always
  type: bool
synced:
  description: Whether the virtual environment was brought to the lock (in check mode, whether it would be).
  returned: always
  type: bool
drift:
  description: What differed from the lock before this run, by project - installed and locked version (null if absent).
  returned: always
  type: dict
  sample: {"sglang": {"installed": "0.5.11", "locked": "0.5.12"}}
damaged:
  description: >-
    Distributions at their locked version whose files were gone or changed before this run, by project - how
    many and the first paths; each reinstalled.
  returned: always
  type: dict
  sample: {"sglang": {"files": 2, "paths": ["/opt/sglang/venv/lib/python3.12/site-packages/sglang/launch_server.py"]}}
packages:
  description: The number of packages in the lock.
  returned: always
  type: int
locked:
  description: The lock's versions by canonical project name (empty in check mode before the first resolve).
  returned: always
  type: dict
  sample: {"sglang": "0.5.12", "torch": "2.11.0"}
accepted_check_complaints:
  description: C(uv pip check) complaints accepted because they concern declared overrides.
  returned: always
  type: list
  elements: str
lock:
  description: The lock file's path.
  returned: always
  type: str
stack:
  description: >-
    The directory of the stack O(venv) is (in check mode, would be) after this run; O(venv) without O(stacks_dir).
  returned: always
  type: str
  sample: /opt/sglang/stacks/3f2a9c1b0d4e5f60
switched:
  description: Whether O(venv) was (or would be) switched to another stack's directory.
  returned: always
  type: bool
previous:
  description: The stack O(venv) was before a switch (a plain directory moved into O(stacks_dir), or null).
  returned: always
  type: str
pruned:
  description: Older stacks (in check mode, that would be) removed, beyond O(keep_stacks).
  returned: always
  type: list
  elements: str
cache_wait:
  description: Seconds this run waited for O(cache_lock) (another container's resolve or install on the shared cache).
  returned: always
  type: float
"""

import contextlib
import fcntl
import os
import re
import shutil
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpulxc.sglang.plugins.module_utils._dists import canonical, damaged_files, site_dirs
from ansible_collections.gpulxc.sglang.plugins.module_utils._text_files import read_text, write_atomic
from ansible_collections.gpulxc.sglang.plugins.module_utils._uv_stack import (
    check_complaints,
    drift,
    fragment_text,
    lock_key,
    pins,
    requirement_name,
    unhashed,
    unlabelled,
)


COMPLETE = ".gpulxc-stack-complete"  # written into a stack once it is installed and checked
PROC = "/proc"  # where a stack in use is named: a process's command line, a systemd unit
UNIT_DIR = "/etc/systemd/system"
STACK_NAME = re.compile(r"(replaced-)?[0-9a-f]{16}")  # the directories this module makes under stacks_dir


class Stack:
    def __init__(self, module):
        self.module = module
        params = module.params
        self.dir = params["dir"]
        self.uv = params["uv"]
        self.venv = os.path.normpath(params["venv"])
        self.python = os.path.join(self.venv, "bin", "python")
        if params["stacks_dir"] and not os.path.isabs(params["stacks_dir"]):
            module.fail_json(
                msg=f"stacks_dir {params['stacks_dir']} is not an absolute path (sglang_stack_stacks_dir"
                " sets it): name one, or leave it empty to install the venv in place"
            )
        # compared with the venv link's real path, so without links of its own
        self.stacks = os.path.realpath(params["stacks_dir"]) if params["stacks_dir"] else None
        if self.stacks and (self.stacks + os.sep).startswith(os.path.realpath(self.venv) + os.sep):
            module.fail_json(msg=f"stacks_dir {self.stacks} is inside the venv {self.venv}: name a directory beside it")
        self.index_args = [arg for url in params["extra_index_urls"] for arg in ("--extra-index-url", url)]
        self.lock_path = os.path.join(self.dir, "stack.lock")
        self.requirements_path = os.path.join(self.dir, "requirements.in")
        self.overrides_path = os.path.join(self.dir, "overrides.txt")
        header = "".join(f"# extra index: {url}\n" for url in params["extra_index_urls"])
        self.want_requirements = header + fragment_text([(params["label"], params["requirements"])])
        self.want_overrides = fragment_text([(params["label"], params["overrides"])])
        self.overridden = {requirement_name(line) for line in self.want_overrides.splitlines()} - {None}
        self.cache_wait = 0.0  # seconds waited for cache_lock

    @contextlib.contextmanager
    def cache_locked(self):
        """Hold cache_lock's exclusive lock (when set), adding the seconds waited for it to cache_wait."""
        path = self.module.params["cache_lock"]
        if not path:
            yield
            return
        started = time.monotonic()
        try:
            handle = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        except OSError as err:
            self.module.fail_json(
                msg=f"cannot open the shared uv cache's lock {path}: {err.strerror}"
                " (uv_venv_cache_dir names the cache: it must be writable in the CT)"
            )
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            self.cache_wait += time.monotonic() - started
            yield
        finally:
            os.close(handle)  # and the lock with it

    def resolve(self):
        """Compile into temporary files; return the lock text or fail, leaving the old files."""
        with tempfile.TemporaryDirectory(prefix="uv_stack.") as tmp, self.cache_locked():
            requirements = os.path.join(tmp, "requirements.in")
            overrides = os.path.join(tmp, "overrides.txt")
            lock = os.path.join(tmp, "stack.lock")
            with open(requirements, "w") as handle:
                handle.write(self.want_requirements)
            with open(overrides, "w") as handle:
                handle.write(self.want_overrides)
            rc, out, err = self.module.run_command(
                [
                    self.uv,
                    "pip",
                    "compile",
                    "--quiet",
                    "--no-header",
                    "--generate-hashes",
                    "--python",
                    self.resolver(),
                    *self.index_args,
                    requirements,
                    "--override",
                    overrides,
                    "-o",
                    lock,
                ]
            )
            if rc != 0:
                hint = self.module.params["failure_hint"]
                self.module.fail_json(
                    msg=f"The resolve failed, nothing was installed or changed. {hint}".strip()
                    + f" uv said: {err.strip() or out.strip()}",
                    rc=rc,
                    stderr=err,
                    requirements=self.want_requirements,
                    overrides=self.want_overrides,
                )
            with open(lock) as handle:
                body = handle.read()
        return (
            "# The one resolve of requirements.in with overrides.txt (uv pip compile --override), by\n"
            "# gpulxc.sglang.uv_stack. The virtual environment is kept exactly at these versions and files\n"
            "# (uv pip sync --require-hashes).\n" + body
        )

    def resolver(self):
        """The interpreter the resolve is made for: the venv's, else (none yet, or its stack gone) the one new stacks
        are made from."""
        return self.python if os.path.exists(self.python) or not self.stacks else self.module.params["python"]

    def installed(self, venv=None):
        python = os.path.join(venv, "bin", "python") if venv else self.python
        if not os.path.exists(python):
            return {}
        rc, out, err = self.module.run_command([self.uv, "pip", "freeze", "--python", python])
        if rc != 0:
            self.module.fail_json(msg=f"uv pip freeze failed in {python}: {err.strip()}", rc=rc)
        return pins(out)

    def damaged(self, installed, locked, venv=None):
        """{name: {files, paths}} of the distributions at their locked version whose RECORD lists files that are
        gone or changed (a version drift is repaired by the sync anyway)."""
        found = damaged_files(site_dirs(venv or self.venv), self.module.params["unchecked"])
        return {
            name: {"files": count, "paths": paths}
            for name, (count, paths) in ((canonical(n), v) for n, v in sorted(found.items()))
            if name in locked and installed.get(name) == locked[name]
        }

    def inputs(self, diff):
        """(lock text or None, resolved, relabelled): the lock made again when the requirements changed; the
        input files rewritten alone when only their `# from` labels did (the lock still is theirs)."""
        check = self.module.check_mode
        before = (read_text(self.requirements_path), read_text(self.overrides_path))
        want = (self.want_requirements, self.want_overrides)
        lock_text = read_text(self.lock_path)
        missing = unhashed(lock_text) if lock_text is not None else []
        if lock_text is not None and before == want and not missing:
            return lock_text, False, False
        diff["before"] += f"# {self.requirements_path}\n{before[0] or ''}# {self.overrides_path}\n{before[1] or ''}"
        diff["after"] += f"# {self.requirements_path}\n{want[0]}# {self.overrides_path}\n{want[1]}"
        if missing:
            diff["before"] += f"# {self.lock_path}: {len(missing)} pins without a hash, such as {missing[0]}\n"
            diff["after"] += f"# {self.lock_path}: every file of every pin with its sha256\n"
        resolve = lock_text is None or bool(missing) or tuple(map(unlabelled, before)) != tuple(map(unlabelled, want))
        if resolve:
            lock_text = self.resolve() if not check or os.path.exists(self.uv) else None
        if lock_text is not None and not check:
            os.makedirs(self.dir, exist_ok=True)
            write_atomic(self.module, self.requirements_path, self.want_requirements)
            write_atomic(self.module, self.overrides_path, self.want_overrides)
            if resolve:
                write_atomic(self.module, self.lock_path, lock_text)
        return lock_text, resolve, not resolve

    def sync(self, venv, locked, damaged):
        """Install the lock into venv exactly (reinstalling the damaged distributions) and check it is there."""
        python = os.path.join(venv, "bin", "python")
        reinstall = [arg for name in damaged for arg in ("--reinstall-package", name)]
        with self.cache_locked():
            rc, _out, err = self.module.run_command(
                [
                    self.uv,
                    "pip",
                    "sync",
                    "--require-hashes",
                    "--python",
                    python,
                    *self.index_args,
                    *reinstall,
                    self.lock_path,
                ]
            )
        if rc != 0:
            self.module.fail_json(
                msg=f"uv pip sync of {self.lock_path} failed (a file the index does not serve, or whose sha256"
                " differs from the lock's, stops it before anything is installed); run again once the index"
                f" serves the locked files. uv said: {err.strip()}",
                rc=rc,
            )
        installed = self.installed(venv)
        left = drift(installed, locked)
        if left:
            self.module.fail_json(msg=f"after uv pip sync the environment still differs from the lock: {left}")
        left = self.damaged(installed, locked, venv)
        if left:
            self.module.fail_json(
                msg=f"after uv pip sync --reinstall-package these distributions still lack files: {left}"
            )

    def pip_check(self, python):
        rc, out, err = self.module.run_command([self.uv, "pip", "check", "--python", python])
        accepted, rejected = check_complaints(out + "\n" + err, self.overridden)
        if rejected or (rc != 0 and not accepted):
            self.module.fail_json(
                msg="the dependency check (uv pip check) found problems that no declared override covers: "
                + "; ".join(rejected or [err.strip() or out.strip()]),
                accepted=accepted,
            )
        return accepted

    def in_use(self, directory):
        """Whether a process runs from directory (its command line names a path in it) or a systemd unit names it
        (an ExecStart written for it, its service stopped now)."""
        needle = (directory.rstrip("/") + "/").encode()
        paths = [os.path.join(PROC, pid, "cmdline") for pid in os.listdir(PROC) if pid.isdigit()]
        for root, _dirs, files in os.walk(UNIT_DIR):
            paths += [os.path.join(root, name) for name in files if name.endswith((".service", ".conf"))]
        for path in paths:
            try:
                with open(path, "rb") as handle:
                    if needle in handle.read():
                        return True
            except OSError:
                continue
        return False

    def newest_other(self, target):
        """The most recently completed stack other than target, or None."""
        whole = [
            os.path.join(self.stacks, name)
            for name in os.listdir(self.stacks)
            if STACK_NAME.fullmatch(name)
            and os.path.join(self.stacks, name) != target
            and os.path.exists(os.path.join(self.stacks, name, COMPLETE))
        ]
        return max(whole, key=lambda path: os.path.getmtime(os.path.join(path, COMPLETE)), default=None)

    def link(self, target):
        """venv -> target in one rename (a link made beside it, then moved over it)."""
        link = os.path.join(os.path.dirname(self.venv), "." + os.path.basename(self.venv) + ".switch")
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(target, link)
        os.replace(link, self.venv)

    def switch(self, target, result):
        """Point venv at target in one rename; a plain directory there is moved into stacks_dir first."""
        if os.path.islink(self.venv):
            pointed = os.path.realpath(self.venv)
            # its directory deleted by hand: the newest other whole stack stays instead (a rollback's)
            result["previous"] = pointed if pointed != target and os.path.isdir(pointed) else self.newest_other(target)
        elif os.path.isdir(self.venv) and not self.installed():
            shutil.rmtree(self.venv)  # the empty venv uv_venv made: nothing to keep
        elif os.path.isdir(self.venv):
            result["previous"] = os.path.join(self.stacks, "replaced-" + os.path.basename(target))
            shutil.rmtree(result["previous"], ignore_errors=True)
            os.rename(self.venv, result["previous"])
        self.link(target)
        self.prune(target, result["previous"], result)

    def prune(self, target, previous, result):
        """Beyond keep_stacks (the current one counted), older stacks go: the one replaced stays first (what a
        rollback switches back to), then the most recently switched to; any a process runs from or a unit names
        stays. Only the directories this module names (nothing else that may live there)."""
        if not os.path.isdir(self.stacks):
            return
        others = [
            os.path.join(self.stacks, name)
            for name in sorted(os.listdir(self.stacks))
            if STACK_NAME.fullmatch(name)
            and os.path.join(self.stacks, name) != target
            and os.path.isdir(os.path.join(self.stacks, name))
            and not os.path.islink(os.path.join(self.stacks, name))
        ]

        def used_at(path):
            marker = os.path.join(path, COMPLETE)
            return os.path.getmtime(marker) if os.path.exists(marker) else 0.0

        ordered = sorted(others, key=lambda path: (path != previous, -used_at(path), path))
        for path in ordered[max(self.module.params["keep_stacks"] - 1, 0) :]:
            if not self.in_use(path):
                if not self.module.check_mode:
                    shutil.rmtree(path)
                result["pruned"].append(path)

    def repair_current(self, target, locked, result):
        """The stack the venv links to, at its lock: a drift repaired in place, a lost marker written again after a
        dependency check (the stack the servers run from is never made again from the start)."""
        check = self.module.check_mode
        if result["drift"] or result["damaged"]:
            result["synced"] = True
            if not check:
                self.sync(target, locked, result["damaged"])
        if not os.path.exists(os.path.join(target, COMPLETE)):
            result["synced"] = True
            if not check:
                result["accepted_check_complaints"] = self.pip_check(os.path.join(target, "bin", "python"))
                open(os.path.join(target, COMPLETE), "w").close()

    def stacked(self, lock_text, locked, result, diff):
        """With stacks_dir: the lock's own stack, built beside the current one if need be, then switched to."""
        check = self.module.check_mode
        target = os.path.join(self.stacks, lock_key(lock_text))
        complete = os.path.join(target, COMPLETE)
        result["stack"] = target
        current = os.path.realpath(self.venv) if os.path.lexists(self.venv) else None
        installed = self.installed()  # the current stack: what the servers run
        result["drift"] = drift(installed, locked)
        result["damaged"] = self.damaged(installed, locked) if os.path.isdir(self.venv) else {}
        plain = os.path.isdir(self.venv) and not os.path.islink(self.venv)
        if plain and not result["drift"] and not result["damaged"] and not os.path.exists(target):
            # a plain venv at the lock (from before stacks_dir): moved into place as it is, nothing reinstalled
            diff["before"] += f"# {self.venv}: a directory\n"
            diff["after"] += f"# {self.venv} -> {target} (the same files, moved)\n"
            result["switched"] = True
            if not check:
                os.makedirs(self.stacks, exist_ok=True)
                result["accepted_check_complaints"] = self.pip_check(self.python)
                open(os.path.join(self.venv, COMPLETE), "w").close()  # moved with it: a cut-off run finds it whole
                os.rename(self.venv, target)
                self.link(target)
            return
        if current == target and os.path.isdir(target):
            self.repair_current(target, locked, result)
            self.prune(target, None, result)
            return
        result["switched"] = result["synced"] = True
        diff["before"] += f"# {self.venv} -> {current or 'nothing'}\n"
        diff["after"] += f"# {self.venv} -> {target} (built beside it, then switched to)\n"
        if check:
            self.prune(target, current, result)  # what the switch would remove (nothing is, in check mode)
            return
        if not os.path.exists(complete):  # new, or cut off before it was complete: made again from the start
            shutil.rmtree(target, ignore_errors=True)
            os.makedirs(self.stacks, exist_ok=True)
            rc, out, err = self.module.run_command([self.uv, "venv", "--python", self.module.params["python"], target])
            if rc != 0:
                self.module.fail_json(msg=f"uv venv {target} failed: {err.strip() or out.strip()}", rc=rc)
            self.sync(target, locked, {})
        else:  # built in an earlier run (a rollback): checked, repaired if need be
            have = self.installed(target)
            damaged = self.damaged(have, locked, target)
            if drift(have, locked) or damaged:
                self.sync(target, locked, damaged)
        result["accepted_check_complaints"] = self.pip_check(os.path.join(target, "bin", "python"))
        open(complete, "w").close()
        self.switch(target, result)

    def run(self):
        check = self.module.check_mode
        result = {
            "resolved": False,
            "synced": False,
            "drift": {},
            "damaged": {},
            "packages": 0,
            "lock": self.lock_path,
            "stack": self.venv,
            "switched": False,
            "previous": None,
            "pruned": [],
        }
        diff = {"before": "", "after": ""}
        lock_text, result["resolved"], relabelled = self.inputs(diff)
        locked = pins(lock_text or "")
        result["packages"] = len(locked)
        result["locked"] = locked
        result["accepted_check_complaints"] = []
        if self.stacks and lock_text is not None:
            self.stacked(lock_text, locked, result, diff)
            for path in result["pruned"]:
                diff["before"] += f"# {path}: a stack\n"
                diff["after"] += f"# {path}: removed (beyond keep_stacks {self.module.params['keep_stacks']})\n"
            self.drift_diff(result, locked, diff)
            if not check and not result["switched"]:
                result["accepted_check_complaints"] = self.pip_check(self.python)
        else:
            installed = self.installed()
            result["drift"] = drift(installed, locked) if lock_text is not None else {}
            result["damaged"] = self.damaged(installed, locked) if lock_text is not None else {}
            if result["drift"] or result["damaged"] or lock_text is None:
                result["synced"] = True
                self.drift_diff(result, locked, diff)
                if not check:
                    self.sync(self.venv, locked, result["damaged"])
            if not check or (os.path.exists(self.python) and not result["synced"]):
                result["accepted_check_complaints"] = self.pip_check(self.python)
        result["changed"] = result["resolved"] or result["synced"] or relabelled or bool(result["pruned"])
        result["cache_wait"] = round(self.cache_wait, 1)
        if self.module._diff and result["changed"]:
            result["diff"] = diff
        return result

    @staticmethod
    def drift_diff(result, locked, diff):
        for name, versions in result["drift"].items():
            diff["before"] += f"{name}=={versions['installed']}\n" if versions["installed"] else ""
            diff["after"] += f"{name}=={versions['locked']}\n" if versions["locked"] else ""
        for name, damage in result["damaged"].items():
            diff["before"] += f"{name}=={locked[name]} ({damage['files']} files gone or changed)\n"
            diff["after"] += f"{name}=={locked[name]} (reinstalled)\n"


def main():
    module = AnsibleModule(
        argument_spec={
            "venv": {"type": "path", "required": True},
            "dir": {"type": "path", "required": True},
            "requirements": {"type": "list", "elements": "str", "default": []},
            "overrides": {"type": "list", "elements": "str", "default": []},
            "extra_index_urls": {"type": "list", "elements": "str", "default": []},
            "uv": {"type": "path", "default": "/usr/local/bin/uv"},
            "unchecked": {"type": "list", "elements": "str", "default": []},
            "failure_hint": {"type": "str", "default": ""},
            "label": {"type": "str", "default": "the caller"},
            "stacks_dir": {"type": "path"},
            "python": {"type": "path", "default": "/usr/bin/python3"},
            "keep_stacks": {"type": "int", "default": 2},
            "cache_lock": {"type": "path"},
        },
        supports_check_mode=True,
    )
    if module.params["keep_stacks"] < 1:
        module.fail_json(
            msg=f"keep_stacks is {module.params['keep_stacks']}: at least 1 (the current stack)"
            " (sglang_stack_keep_stacks)"
        )
    for requirement in module.params["overrides"]:
        if not requirement_name(requirement):
            module.fail_json(msg=f"overrides: {requirement!r} is not a requirement (for example name==1.2.3)")
    module.exit_json(**Stack(module).run())


if __name__ == "__main__":
    main()
