#!/usr/bin/python
# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: file_set
short_description: Keep a set of directories, files and symbolic links as declared, in one call
version_added: 0.2.0
description:
  - Brings every listed directory, file and symbolic link to its declared content, target, owner, group
    and mode - in that order, so a file may live in a directory of the same call - and reports each path
    it changed. One call in place of a task per path, which costs a round trip through the connection each
    on a re-run that changes nothing.
  - Files are written atomically (a temporary file in the same directory, its owner and mode set, then
    renamed over the old one). Directories are made with their missing parents; one reached through a
    symbolic link is kept and its target gets the owner and mode. A link replaces a file or
    a link at its path, never a directory.
  - Render templates on the controller with C(lookup('ansible.builtin.template', ...)) and pass the text as
    O(files[].content).
author:
  - gpulxc.sglang developers (@gpulxc)
extends_documentation_fragment:
  - gpulxc.sglang.attributes
attributes:
  check_mode:
    support: full
    details: Reports what it would change and changes nothing.
  diff_mode:
    support: full
    details: One diff per changed path - a file's old and new text (V(hidden) with O(files[].secret)), a
      directory's or link's state.
options:
  directories:
    description: Directories to make or correct.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path.
        type: path
        required: true
      owner:
        description: User name; left as it is when omitted (a new path gets the connection's user).
        type: str
      group:
        description: Group name; left as it is when omitted (a new path gets the user's group).
        type: str
      mode:
        description: Octal mode, as a string.
        type: str
        default: "0755"
  files:
    description: Regular files and their full content.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path; its directory must exist (or be listed in O(directories)).
        type: path
        required: true
      content:
        description: The file's text.
        type: str
        required: true
      owner:
        description: User name; left as it is when omitted (a new path gets the connection's user).
        type: str
      group:
        description: Group name; left as it is when omitted (a new path gets the user's group).
        type: str
      mode:
        description: Octal mode, as a string.
        type: str
        default: "0644"
      secret:
        description: The content is a secret - it is never shown in a diff.
        type: bool
        default: false
  links:
    description: Symbolic links.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path of the link.
        type: path
        required: true
      src:
        description: What the link points to, as written into it (relative to the link's directory, or absolute).
        type: str
        required: true
"""

EXAMPLES = r"""
- name: Write the unit, the instances' configurations and a link in one call
  gpulxc.sglang.file_set:
    directories:
      - path: /etc/sglang
      - path: /opt/cuda
    files:
      - path: /etc/systemd/system/sglang@.service
        content: "{{ lookup('ansible.builtin.template', 'sglang@.service.j2') }}"
      - path: /etc/sglang/api-key
        content: "{{ vaulted_key }}"
        mode: "0600"
        secret: true
    links:
      - path: /opt/cuda/lib64
        src: lib
  register: file_set_result

- name: Restart when the unit changed
  ansible.builtin.systemd_service:
    name: sglang@0.service
    state: restarted
    daemon_reload: true
  when: "'/etc/systemd/system/sglang@.service' in file_set_result.changed_paths"
"""

RETURN = r"""
changed_paths:
  description: Every path the call changed (in check mode, would change), in the order of the options.
  returned: always
  type: list
  elements: str
  sample: [/etc/sglang/instance-3.yaml]
"""

import grp
import os
import pwd
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpulxc.sglang.plugins.module_utils._text_files import NoTemporaryFile, write_atomic

OWNED = {"owner": {"type": "str"}, "group": {"type": "str"}}


def ids(module, entry, info):
    """The wanted uid and gid: the named ones, or the path's own (new: this process's) when not named."""
    try:
        uid = pwd.getpwnam(entry["owner"]).pw_uid if entry["owner"] else (info.st_uid if info else os.geteuid())
        gid = grp.getgrnam(entry["group"]).gr_gid if entry["group"] else (info.st_gid if info else os.getegid())
    except KeyError as error:
        if module.check_mode:  # an earlier task of the run would create it: the names stand for the ids
            return entry["owner"] or "", entry["group"] or ""
        module.fail_json(msg=f"{entry['path']}: no such user or group in the container: {error}")
    return uid, gid


def mode_of(module, entry):
    try:
        return int(entry["mode"], 8)
    except ValueError:
        module.fail_json(msg=f"{entry['path']}: mode {entry['mode']!r} is not an octal number such as '0644'")


def describe(path, follow=False):
    try:
        info = os.stat(path) if follow else os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None, "absent\n"
    if stat.S_ISLNK(info.st_mode):
        return info, f"link -> {os.readlink(path)}\n"
    kind = "directory" if stat.S_ISDIR(info.st_mode) else "file"
    return info, f"{kind} {info.st_uid}:{info.st_gid} {stat.S_IMODE(info.st_mode):04o}\n"


def directory(module, entry):
    info, before = describe(entry["path"], follow=True)  # a link to a directory is kept, its target set
    uid, gid = ids(module, entry, info)
    mode = mode_of(module, entry)
    if info is not None and not stat.S_ISDIR(info.st_mode):
        module.fail_json(msg=f"{entry['path']}: exists and is not a directory ({before.strip()})")
    wanted = f"directory {uid}:{gid} {mode:04o}\n"
    if before == wanted:
        return None
    if not module.check_mode:
        try:
            os.makedirs(entry["path"], mode=mode, exist_ok=True)
        except OSError as error:
            module.fail_json(msg=f"{entry['path']}: cannot make the directory: {error}")
        target = os.path.realpath(entry["path"])  # AnsibleModule's setters act on a link itself, not what it reaches
        module.set_owner_if_different(target, uid, False, expand=False)
        module.set_group_if_different(target, gid, False, expand=False)
        module.set_mode_if_different(target, mode, False, expand=False)
    return {"before_header": entry["path"], "after_header": entry["path"], "before": before, "after": wanted}


def regular_file(module, entry):
    path, content = entry["path"], entry["content"].encode()
    info, before = describe(path)
    uid, gid = ids(module, entry, info if info is not None and stat.S_ISREG(info.st_mode) else None)
    mode = mode_of(module, entry)
    if info is not None and stat.S_ISDIR(info.st_mode):
        module.fail_json(msg=f"{path}: is a directory, not a file")
    old = b""
    if info is not None and stat.S_ISREG(info.st_mode):
        with open(path, "rb") as handle:
            old = handle.read()
    same_meta = (
        info is not None
        and stat.S_ISREG(info.st_mode)
        and (info.st_uid, info.st_gid) == (uid, gid)
        and stat.S_IMODE(info.st_mode) == mode
    )
    if same_meta and old == content:
        return None
    if not module.check_mode:
        try:
            write_atomic(module, path, content, mode=mode, owner=uid, group=gid)
        except NoTemporaryFile as error:
            module.fail_json(msg=f"{path}: cannot write it ({error}): make its directory first (directories)")
        except Exception as error:  # atomic_move raises Exception when the rename fails
            module.fail_json(msg=f"{path}: cannot write it: {error}")
    wanted = f"file {uid}:{gid} {mode:04o}\n"
    if entry["secret"]:
        texts = (before, wanted + ("" if old == content else "(secret content changed)\n"))
    else:
        texts = (before + old.decode(errors="replace"), wanted + entry["content"])
    return {"before_header": path, "after_header": path, "before": texts[0], "after": texts[1]}


def link(module, entry):
    path, src = entry["path"], entry["src"]
    info, before = describe(path)
    if info is not None and stat.S_ISDIR(info.st_mode):
        module.fail_json(msg=f"{path}: is a directory; a link to {src} cannot replace it (move it away first)")
    if info is not None and stat.S_ISLNK(info.st_mode) and os.readlink(path) == src:
        return None
    if not module.check_mode:  # atomic_move follows a link (its chown, copystat, chmod): a link is renamed into place
        tmp = os.path.join(os.path.dirname(path), f".file_set.{os.getpid()}.{os.path.basename(path)}")
        try:
            if os.path.lexists(tmp):
                os.unlink(tmp)
            os.symlink(src, tmp)
            os.replace(tmp, path)
        except OSError as error:
            module.fail_json(msg=f"{path}: cannot link it to {src}: {error}")
    return {"before_header": path, "after_header": path, "before": before, "after": f"link -> {src}\n"}


def main():
    module = AnsibleModule(
        argument_spec={
            "directories": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "path": {"type": "path", "required": True},
                    **OWNED,
                    "mode": {"type": "str", "default": "0755"},
                },
            },
            "files": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "path": {"type": "path", "required": True},
                    "content": {"type": "str", "required": True},
                    **OWNED,
                    "mode": {"type": "str", "default": "0644"},
                    "secret": {"type": "bool", "default": False},
                },
            },
            "links": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {"path": {"type": "path", "required": True}, "src": {"type": "str", "required": True}},
            },
        },
        supports_check_mode=True,
    )
    diffs, changed_paths = [], []
    for option, apply in (("directories", directory), ("files", regular_file), ("links", link)):
        for entry in module.params[option]:
            diff = apply(module, entry)
            if diff is not None:
                diffs.append(diff)
                changed_paths.append(entry["path"])
    result = {"changed": bool(changed_paths), "changed_paths": changed_paths}
    if module._diff:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
