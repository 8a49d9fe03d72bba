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
attributes:
  check_mode:
    description: Reports whether it would resolve and what it would install, and changes nothing.
    support: full
  diff_mode:
    description: Shows the packages that would change (installed versus locked) and changed inputs.
    support: full
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
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpulxc.sglang.plugins.module_utils._dists import damaged_files, site_dirs
from ansible_collections.gpulxc.sglang.plugins.module_utils._text_files import read_text, write_atomic
from ansible_collections.gpulxc.sglang.plugins.module_utils._uv_stack import (
    canonical,
    check_complaints,
    drift,
    fragment_text,
    pins,
    requirement_name,
    unhashed,
    unlabelled,
)


class Stack:
    def __init__(self, module):
        self.module = module
        params = module.params
        self.dir = params["dir"]
        self.uv = params["uv"]
        self.python = os.path.join(params["venv"], "bin", "python")
        self.venv = params["venv"]
        self.index_args = [arg for url in params["extra_index_urls"] for arg in ("--extra-index-url", url)]
        self.lock_path = os.path.join(self.dir, "stack.lock")
        self.requirements_path = os.path.join(self.dir, "requirements.in")
        self.overrides_path = os.path.join(self.dir, "overrides.txt")
        header = "".join(f"# extra index: {url}\n" for url in params["extra_index_urls"])
        self.want_requirements = header + fragment_text([(params["label"], params["requirements"])])
        self.want_overrides = fragment_text([(params["label"], params["overrides"])])
        self.overridden = {requirement_name(line) for line in self.want_overrides.splitlines()} - {None}

    def resolve(self):
        """Compile into temporary files; return the lock text or fail, leaving the old files."""
        with tempfile.TemporaryDirectory(prefix="uv_stack.") as tmp:
            requirements = os.path.join(tmp, "requirements.in")
            overrides = os.path.join(tmp, "overrides.txt")
            lock = os.path.join(tmp, "stack.lock")
            with open(requirements, "w") as handle:
                handle.write(self.want_requirements)
            with open(overrides, "w") as handle:
                handle.write(self.want_overrides)
            rc, out, err = self.module.run_command(
                [self.uv, "pip", "compile", "--quiet", "--no-header", "--generate-hashes", "--python", self.python,
                 *self.index_args, requirements, "--override", overrides, "-o", lock]
            )  # fmt: skip
            if rc != 0:
                hint = self.module.params["failure_hint"]
                self.module.fail_json(
                    msg=f"The resolve failed, nothing was installed or changed. {hint}".strip()
                    + f" uv said: {err.strip() or out.strip()}",
                    rc=rc, stderr=err, requirements=self.want_requirements, overrides=self.want_overrides,
                )  # fmt: skip
            with open(lock) as handle:
                body = handle.read()
        return (
            "# The one resolve of requirements.in with overrides.txt (uv pip compile --override), by\n"
            "# gpulxc.sglang.uv_stack. The virtual environment is kept exactly at these versions and files\n"
            "# (uv pip sync --require-hashes).\n" + body
        )

    def installed(self):
        if not os.path.exists(self.python):
            return {}
        rc, out, err = self.module.run_command([self.uv, "pip", "freeze", "--python", self.python])
        if rc != 0:
            self.module.fail_json(msg=f"uv pip freeze failed in {self.python}: {err.strip()}", rc=rc)
        return pins(out)

    def damaged(self, installed, locked):
        """{name: {files, paths}} of the distributions at their locked version whose RECORD lists files that are
        gone or changed (a version drift is repaired by the sync anyway)."""
        found = damaged_files(site_dirs(self.venv), self.module.params["unchecked"])
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
            write_atomic(self.requirements_path, self.want_requirements)
            write_atomic(self.overrides_path, self.want_overrides)
            if resolve:
                write_atomic(self.lock_path, lock_text)
        return lock_text, resolve, not resolve

    def run(self):
        check = self.module.check_mode
        result = {"resolved": False, "synced": False, "drift": {}, "damaged": {}, "packages": 0, "lock": self.lock_path}
        diff = {"before": "", "after": ""}
        lock_text, result["resolved"], relabelled = self.inputs(diff)
        locked = pins(lock_text or "")
        result["packages"] = len(locked)
        result["locked"] = locked
        installed = self.installed()
        result["drift"] = drift(installed, locked) if lock_text is not None else {}
        result["damaged"] = self.damaged(installed, locked) if lock_text is not None else {}
        if result["drift"] or result["damaged"] or lock_text is None:
            result["synced"] = True
            for name, versions in result["drift"].items():
                diff["before"] += f"{name}=={versions['installed']}\n" if versions["installed"] else ""
                diff["after"] += f"{name}=={versions['locked']}\n" if versions["locked"] else ""
            for name, damage in result["damaged"].items():
                diff["before"] += f"{name}=={locked[name]} ({damage['files']} files gone or changed)\n"
                diff["after"] += f"{name}=={locked[name]} (reinstalled)\n"
            if not check:
                reinstall = [arg for name in result["damaged"] for arg in ("--reinstall-package", name)]
                rc, out, err = self.module.run_command(
                    [self.uv, "pip", "sync", "--require-hashes", "--python", self.python, *self.index_args, *reinstall,
                     self.lock_path]
                )  # fmt: skip
                if rc != 0:
                    self.module.fail_json(
                        msg=f"uv pip sync of {self.lock_path} failed (a file the index does not serve, or whose sha256"
                        " differs from the lock's, stops it before anything is installed); run again once the index"
                        f" serves the locked files. uv said: {err.strip()}",
                        rc=rc,
                    )
                installed = self.installed()
                left = drift(installed, locked)
                if left:
                    self.module.fail_json(msg=f"after uv pip sync the environment still differs from the lock: {left}")
                left = self.damaged(installed, locked)
                if left:
                    self.module.fail_json(
                        msg=f"after uv pip sync --reinstall-package these distributions still lack files: {left}"
                    )
        result["accepted_check_complaints"] = []
        if not check or (os.path.exists(self.python) and not result["synced"]):
            rc, out, err = self.module.run_command([self.uv, "pip", "check", "--python", self.python])
            accepted, rejected = check_complaints(out + "\n" + err, self.overridden)
            if rejected or (rc != 0 and not accepted):
                self.module.fail_json(
                    msg="the dependency check (uv pip check) found problems that no declared override covers: "
                    + "; ".join(rejected or [err.strip() or out.strip()]),
                    accepted=accepted,
                )
            result["accepted_check_complaints"] = accepted
        result["changed"] = result["resolved"] or result["synced"] or relabelled
        if self.module._diff and result["changed"]:
            result["diff"] = diff
        return result


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
        },
        supports_check_mode=True,
    )
    for requirement in module.params["overrides"]:
        if not requirement_name(requirement):
            module.fail_json(msg=f"overrides: {requirement!r} is not a requirement (for example name==1.2.3)")
    module.exit_json(**Stack(module).run())


if __name__ == "__main__":
    main()
