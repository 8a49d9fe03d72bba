#!/usr/bin/python
# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: wheelhouse
short_description: Build a wheelhouse for an air-gapped container on a connected machine
version_added: 0.2.0
description:
  - Runs on a machine that reaches the package index. Fills O(dest) with every wheel the container's stacks
    install, for a target Python and platform, so that a container with no network installs them from that
    directory (uv_venv_wheelhouse) with the same pins, overrides and checks as online.
  - Checks first that pip runs in the module's Python and that the pinned uv runs on the builder.
  - Puts the pinned uv wheel there, checked against its sha256; its uv does the resolves.
  - Resolves each lock in O(locks) for the target with C(uv pip compile --python-version --python-platform
    --generate-hashes), the way gpulxc.sglang.uv_stack resolves in the container; it writes
    O(dest)/<name>.lock with its inputs. When any lock's inputs changed, every lock is resolved again, together
    (the container resolves each against all of the wheelhouse's wheels). A requirement that is not a wheel
    from an index (a direct URL) is refused.
  - Downloads the locked wheels that are missing, whose sha256 is not the lock's, or whose tags do not install
    on the target (a lock lists the hashes of every file of a version), with C(pip download --require-hashes
    --no-deps --only-binary :all:), into a staging directory. Locks, the uv wheel and C(SHA256SUMS) are written
    only after every download succeeded, so a failed run leaves the wheelhouse as it was.
  - Removes wheels no lock names, and the files of locks no longer asked for (O(prune)), so the container's
    resolve sees exactly the locked versions,
    and writes O(dest)/SHA256SUMS.
author:
  - gpulxc.sglang developers (@gpulxc)
requirements:
  - pip in the Python that runs the module (for C(pip download)); its wheel tags come from C(packaging), the
    standalone package or the copy pip vendors.
extends_documentation_fragment:
  - gpulxc.sglang.attributes
attributes:
  check_mode:
    support: full
    details: Resolves in a temporary directory (downloading the uv wheel there if needed) and reports what
      would be downloaded and removed; changes nothing.
  diff_mode:
    support: full
    details: The wheel files before and after.
options:
  dest:
    description: The wheelhouse directory (created when missing).
    type: path
    required: true
  python_version:
    description: The Python (major.minor) of the container's virtual environments, for example V(3.11).
    type: str
    required: true
  platform:
    description:
      - The container's platform in uv's terms, C(<arch>-manylinux_2_<glibc minor>), for example
        V(x86_64-manylinux_2_36) for Debian 12 (glibc 2.36); wheels for that glibc or older are taken.
    type: str
    required: true
  locks:
    description:
      - The stacks to resolve. Entries with the same O(locks[].name) are one resolve, their requirements and
        overrides gathered in order (the wheelhouse role gives one entry a lock, made by
        gpulxc.sglang.stack_requirements as the container's are).
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The lock's name, used for its files (C(<name>.lock)).
        type: str
        required: true
      requirements:
        description: Requirements (PEP 508 strings).
        type: list
        elements: str
        default: []
      overrides:
        description: Declared overrides (uv's C(--override)).
        type: list
        elements: str
        default: []
      label:
        description: Where these requirements come from, as the input file names it.
        type: str
        default: the caller
  index_url:
    description: The package index.
    type: str
    required: true
  extra_index_urls:
    description: Indexes besides O(index_url).
    type: list
    elements: str
    default: []
  uv_wheel_url:
    description: The URL of the pinned uv wheel.
    type: str
    required: true
  uv_wheel_sha256:
    description: Its sha256.
    type: str
    required: true
  prune:
    description: Remove wheels that no lock names, and the files of locks not in O(locks).
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Build the wheelhouse for a Debian 12 container (Python 3.11)
  gpulxc.sglang.wheelhouse:
    dest: /srv/wheelhouse
    python_version: "3.11"
    platform: x86_64-manylinux_2_36
    index_url: https://pypi.org/simple
    uv_wheel_url: https://files.pythonhosted.org/packages/.../uv-0.13.9-py3-none-manylinux_2_17_x86_64.whl
    uv_wheel_sha256: d7f459fe4fd247d830351c75686d3996ace3c6f3f728eb0e85a30b7ada0cef19
    locks:
      - name: stack
        requirements: ["sglang==0.5.12", "torch==2.11.0"]
        overrides: ["nvidia-cuda-runtime==13.2.75"]
      - name: router
        requirements: ["smg==1.13.0"]
"""

RETURN = r"""
resolved:
  description: The locks made (again) in this run.
  returned: always
  type: list
  elements: str
downloaded:
  description: The wheel files downloaded (in check mode, the C(name==version) that would be).
  returned: always
  type: list
  elements: str
removed:
  description: The wheel files removed (no lock names them, or their sha256 was not the lock's).
  returned: always
  type: list
  elements: str
wheels:
  description: The number of wheels in the wheelhouse afterwards, the uv wheel included.
  returned: always
  type: int
uv_wheel:
  description: The uv wheel's file name in the wheelhouse.
  returned: always
  type: str
"""

import hashlib
import os
import re
import shutil
import sys
import tempfile
import zipfile

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.gpulxc.sglang.plugins.module_utils._text_files import read_text, write_atomic
from ansible.module_utils.urls import fetch_url
from ansible_collections.gpulxc.sglang.plugins.module_utils._uv_stack import fragment_text, unlabelled
from ansible_collections.gpulxc.sglang.plugins.module_utils._wheelhouse import (
    PACKAGING_IMPORT_ERROR,
    compatible,
    locked,
    parse_platform,
    parse_python,
    pip_target_args,
    requirements_text,
    wheel_key,
)


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Wheelhouse:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.dest = self.params["dest"]
        self.check = module.check_mode
        self.uv_name = os.path.basename(self.params["uv_wheel_url"].split("#", 1)[0].split("?", 1)[0])
        self.uv_path = os.path.join(self.dest, self.uv_name)
        self.new_uv = None  # a uv wheel downloaded into the temporary directory, moved in by apply()
        self.pending = {}  # lock files to write, by path, once every download succeeded
        self.index_args = ["--index-url", self.params["index_url"]]
        self.index_args += [arg for url in self.params["extra_index_urls"] for arg in ("--extra-index-url", url)]
        self.result = {
            "changed": False,
            "resolved": [],
            "downloaded": [],
            "removed": [],
            "wheels": 0,
            "uv_wheel": self.uv_name,
        }

    def fail(self, msg, **kwargs):
        self.module.fail_json(msg=msg, **self.result, **kwargs)

    def validate(self):
        params = self.params
        try:
            parse_platform(params["platform"])
            parse_python(params["python_version"])
        except ValueError as error:
            self.fail(f"platform/python_version: {error}")
        if not re.match(r"^[0-9a-f]{64}$", params["uv_wheel_sha256"]):
            self.fail("uv_wheel_sha256 must be a sha256 (64 hex digits)")
        if not params["locks"]:
            self.fail("locks: give at least one lock (with none, pruning would empty the wheelhouse)")
        for entry in params["locks"]:
            if not re.match(r"^[a-z0-9][a-z0-9-]*$", entry["name"]):
                self.fail(f"locks: the name {entry['name']!r} must be lower-case letters, digits and dashes")
        rc, out, err = self.module.run_command([sys.executable, "-m", "pip", "--version"])
        if rc != 0:
            self.fail(
                f"pip does not run in {sys.executable} on the builder ({err.strip() or out.strip()}): install "
                "pip for it (Debian: python3-pip), or build on another host (the wheelhouse role's "
                "wheelhouse_builder)"
            )

    # the uv wheel, and its uv
    def uv_wheel(self, tmp):
        """A verified uv wheel: the wheelhouse's, or one downloaded into tmp (apply() moves it in)."""
        if os.path.exists(self.uv_path) and sha256(self.uv_path) == self.params["uv_wheel_sha256"]:
            return self.uv_path
        self.result["downloaded"].append(self.uv_name)
        response, info = fetch_url(self.module, self.params["uv_wheel_url"], timeout=60)
        if info["status"] != 200:
            self.fail(f"could not download the uv wheel {self.params['uv_wheel_url']}: {info.get('msg')}")
        self.new_uv = os.path.join(tmp, self.uv_name)
        with open(self.new_uv, "wb") as handle:
            shutil.copyfileobj(response, handle)
        got = sha256(self.new_uv)
        if got != self.params["uv_wheel_sha256"]:
            self.fail(
                f"the uv wheel {self.params['uv_wheel_url']} has sha256 {got}, not the pinned "
                f"{self.params['uv_wheel_sha256']}: nothing was written"
            )
        return self.new_uv

    def extract_uv(self, wheel_path, tmp):
        with zipfile.ZipFile(wheel_path) as wheel:
            member = next((n for n in wheel.namelist() if re.match(r"^uv-[^/]+\.data/scripts/uv$", n)), None)
            if member is None:
                self.fail(f"{self.params['uv_wheel_url']} holds no uv binary (uv-<version>.data/scripts/uv)")
            path = os.path.join(tmp, "uv")
            with open(path, "wb") as handle:
                handle.write(wheel.read(member))
        os.chmod(path, 0o755)
        try:
            rc, _out, err = self.module.run_command([path, "--version"], handle_exceptions=False)
        except OSError as error:
            rc, err = 1, str(error)
        if rc != 0:
            self.fail(
                f"the uv of {self.uv_name} does not run on the builder ({err.strip()}): build the wheelhouse "
                "on a machine of the container's architecture (the wheelhouse role's wheelhouse_builder), or "
                "give the builder's uv wheel (uv_venv_uv_wheel_url, uv_venv_uv_wheel_sha256)"
            )
        return path

    # the locks
    def inputs(self, name):
        entries = [e for e in self.params["locks"] if e["name"] == name]
        header = (
            f"# wheelhouse target: Python {self.params['python_version']}, {self.params['platform']}\n"
            + f"# index: {self.params['index_url']}\n"
            + "".join(f"# extra index: {url}\n" for url in self.params["extra_index_urls"])
        )
        requirements = header + fragment_text([(e["label"], e["requirements"]) for e in entries])
        overrides = fragment_text([(e["label"], e["overrides"]) for e in entries])
        return requirements, overrides

    def resolve(self, uv, tmp, name, requirements, overrides):
        # relative names, run in tmp: the lock's "# via -r stack.in" annotations name no temporary path
        req, ovr, lock = (f"{name}.{ext}" for ext in ("in", "overrides.txt", "lock"))
        with open(os.path.join(tmp, req), "w") as handle:
            handle.write(requirements)
        with open(os.path.join(tmp, ovr), "w") as handle:
            handle.write(overrides)
        rc, out, err = self.module.run_command(
            [
                uv,
                "pip",
                "compile",
                "--quiet",
                "--no-header",
                "--generate-hashes",
                "--no-config",
                "--python-version",
                self.params["python_version"],
                "--python-platform",
                self.params["platform"],
                *self.index_args,
                req,
                "--override",
                ovr,
                "-o",
                lock,
            ],
            cwd=tmp,
            environ_update={"UV_CACHE_DIR": os.path.join(tmp, "uv-cache")},
        )
        if rc != 0:
            self.fail(
                f"the resolve of lock {name!r} for Python {self.params['python_version']} on "
                f"{self.params['platform']} failed; the wheelhouse was not changed. uv said: "
                f"{err.strip() or out.strip()}",
                rc=rc,
                requirements=requirements,
            )
        with open(os.path.join(tmp, lock)) as handle:
            return handle.read()

    def locks(self, tmp):
        """{name: lock text}: the ones on disk while every lock's inputs are unchanged, else every lock resolved
        again together (one index snapshot: the locks share a wheelhouse, and the container resolves each
        against all of its wheels)."""
        names = list(dict.fromkeys(e["name"] for e in self.params["locks"]))
        wanted, texts = {}, {}
        for name in names:
            requirements, overrides = self.inputs(name)
            paths = [os.path.join(self.dest, f"{name}.{ext}") for ext in ("in", "overrides.txt", "lock")]
            wanted[name] = (paths, requirements, overrides)
            on_disk = [read_text(path) for path in paths]
            if on_disk[2] is not None and [unlabelled(text) for text in on_disk[:2]] == [
                unlabelled(requirements),
                unlabelled(overrides),
            ]:
                texts[name] = on_disk[2]
                # the same requirements under other `# from` labels: rewritten, the lock kept
                for path, text, content in zip(paths[:2], on_disk[:2], (requirements, overrides)):  # noqa: B905
                    if text != content:
                        self.pending[path] = content
        if len(texts) == len(names):
            return texts
        uv = self.extract_uv(self.uv_wheel(tmp), tmp)
        self.result["resolved"] = names
        for name, (paths, requirements, overrides) in wanted.items():
            texts[name] = self.resolve(uv, tmp, name, requirements, overrides)
            for path, content in zip(paths, (requirements, overrides, texts[name])):  # noqa: B905 (Python 3.9)
                if read_text(path) != content:
                    self.pending[path] = content
        return texts

    def wanted(self, tmp):
        """{(project, version): {sha256, ...}} of every lock."""
        wanted = {}
        for name, text in self.locks(tmp).items():
            pins, others = locked(text)
            if others:
                self.fail(
                    f"lock {name!r} holds requirements that are not wheels from an index: {others}. A "
                    "wheelhouse holds only what an index serves: require name==version from an index "
                    "(sglang_stack_extra_packages, sglang_stack_extra_index_urls)"
                )
            for project, (version, hashes) in pins.items():
                wanted.setdefault((project, version), set()).update(hashes)
        return wanted

    # the wheels
    def plan(self, wanted):
        """(missing {project: (version, hashes)}, files to remove) against the wheels in dest: a wheel is good
        for a pin when its sha256 is the lock's and its tags install on the target."""
        present = {}
        if os.path.isdir(self.dest):
            for filename in sorted(os.listdir(self.dest)):
                key = wheel_key(filename)
                if key is not None and filename != self.uv_name:
                    present.setdefault(key[0], []).append((filename, sha256(os.path.join(self.dest, filename))))
        target = (self.params["python_version"], self.params["platform"])
        missing, keep = {}, set()
        for (project, version), hashes in wanted.items():
            good = [f for f, digest in present.get(project, []) if digest in hashes and compatible(f, *target)]
            keep.update(good)
            if not good:
                missing[project] = (version, hashes)
        projects = {project for project, _version in wanted}
        remove = [
            f
            for project, files in present.items()
            for f, _digest in files
            if f not in keep and (self.params["prune"] or project in projects)
        ]
        if self.params["prune"] and os.path.isdir(self.dest):
            names = {e["name"] for e in self.params["locks"]}
            for filename in sorted(os.listdir(self.dest)):
                stem = filename[: -len(".lock")]
                if (
                    filename.endswith(".lock")
                    and stem not in names
                    and os.path.exists(os.path.join(self.dest, stem + ".in"))
                ):
                    remove += [
                        f
                        for f in (filename, stem + ".in", stem + ".overrides.txt")
                        if os.path.exists(os.path.join(self.dest, f))
                    ]
        return missing, sorted(remove)

    def download(self, missing):
        staging = tempfile.mkdtemp(dir=self.dest, prefix=".download.")
        try:
            requirements = os.path.join(staging, "requirements.txt")
            with open(requirements, "w") as handle:
                handle.write(requirements_text(missing))
            rc, out, err = self.module.run_command(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--isolated",
                    "--disable-pip-version-check",
                    "--quiet",
                    "--no-deps",
                    "--only-binary",
                    ":all:",
                    "--require-hashes",
                    *self.index_args,
                    *pip_target_args(self.params["python_version"], self.params["platform"]),
                    "-d",
                    os.path.join(staging, "wheels"),
                    "-r",
                    requirements,
                ],
            )
            if rc != 0:
                self.fail(
                    f"pip download of {len(missing)} locked wheels failed; the wheelhouse was not changed. "
                    f"pip said: {err.strip()[-2000:] or out.strip()[-2000:]}",
                    rc=rc,
                )
            files = sorted(os.listdir(os.path.join(staging, "wheels")))
            for filename in files:
                os.chmod(os.path.join(staging, "wheels", filename), 0o644)
                os.replace(os.path.join(staging, "wheels", filename), os.path.join(self.dest, filename))
            return files
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def apply(self, missing, remove):
        """Every download first (a failure changes nothing), then removals, the locks and SHA256SUMS."""
        if not os.path.isdir(self.dest):
            os.makedirs(self.dest, mode=0o755)
        downloaded = self.download(missing) if missing else []
        self.result["downloaded"] += downloaded
        if self.new_uv:
            os.chmod(self.new_uv, 0o644)
            shutil.move(self.new_uv, self.uv_path)
        for filename in remove:
            if filename not in downloaded:
                os.unlink(os.path.join(self.dest, filename))
        self.result["removed"] = [f for f in remove if f not in downloaded]
        for path, content in self.pending.items():
            write_atomic(self.module, path, content)

    def sums(self):
        wheels = sorted(f for f in os.listdir(self.dest) if f.endswith(".whl")) if os.path.isdir(self.dest) else []
        return wheels, "".join(f"{sha256(os.path.join(self.dest, f))}  {f}\n" for f in wheels)

    def run(self):
        self.validate()
        before, sums_before = self.sums()
        stale_sums = read_text(os.path.join(self.dest, "SHA256SUMS")) != sums_before
        with tempfile.TemporaryDirectory(prefix="wheelhouse.") as tmp:
            missing, remove = self.plan(self.wanted(tmp))
            if self.check:
                self.result["downloaded"] += [f"{p}=={v}" for p, (v, _hashes) in sorted(missing.items())]
                self.result["removed"] = remove
                after = sorted(set(before) - set(remove)) + self.result["downloaded"]
            else:
                self.apply(missing, remove)
                after, sums_after = self.sums()
                if read_text(os.path.join(self.dest, "SHA256SUMS")) != sums_after:
                    write_atomic(self.module, os.path.join(self.dest, "SHA256SUMS"), sums_after)
        self.result["changed"] = bool(
            self.result["downloaded"]
            or remove
            or self.pending
            or stale_sums
            or (self.result["resolved"] and self.check)
        )
        self.result["wheels"] = len(after)
        if self.module._diff and self.result["changed"]:
            self.result["diff"] = {"before": "\n".join(before) + "\n", "after": "\n".join(after) + "\n"}
        return self.result


def main():
    module = AnsibleModule(
        argument_spec={
            "dest": {"type": "path", "required": True},
            "python_version": {"type": "str", "required": True},
            "platform": {"type": "str", "required": True},
            "locks": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "name": {"type": "str", "required": True},
                    "requirements": {"type": "list", "elements": "str", "default": []},
                    "overrides": {"type": "list", "elements": "str", "default": []},
                    "label": {"type": "str", "default": "the caller"},
                },
            },
            "index_url": {"type": "str", "required": True},
            "extra_index_urls": {"type": "list", "elements": "str", "default": []},
            "uv_wheel_url": {"type": "str", "required": True},
            "uv_wheel_sha256": {"type": "str", "required": True},
            "prune": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    if PACKAGING_IMPORT_ERROR:
        module.fail_json(
            msg=missing_required_lib("packaging (or pip, which vendors it)"), exception=PACKAGING_IMPORT_ERROR
        )
    module.exit_json(**Wheelhouse(module).run())


if __name__ == "__main__":
    main()
