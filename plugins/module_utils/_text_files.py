# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files the modules keep (inputs, locks, checksum lists, file_set's files): read one that may be missing, replace
one atomically with AnsibleModule's own primitives, so a reader never sees half a file or new content with the old
owner or mode."""

from __future__ import annotations

import os
import tempfile


def read_text(path):
    """The file's text, or None when it does not exist."""
    try:
        with open(path) as handle:
            return handle.read()
    except FileNotFoundError:
        return None


class NoTemporaryFile(OSError):
    """The directory cannot take the temporary file (missing, read-only, not ours): nothing was written."""


def write_atomic(module, path, content, *, mode=0o644, owner=None, group=None):
    """Replace `path` with `content` (text or bytes) in one rename: a temporary file beside it (the rename stays on
    one filesystem), given its owner, group and mode (set_*_if_different), then AnsibleModule.atomic_move without the
    old file's attributes. A new path is first made empty (0600): atomic_move gives a path it creates the umask's
    mode, which would show the new content with other permissions until a chmod.
    Raises NoTemporaryFile when the directory cannot take the temporary file, and what atomic_move raises."""
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=f".{os.path.basename(path)}.")
    except OSError as error:
        raise NoTemporaryFile(error.errno, error.strerror, error.filename) from error
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content if isinstance(content, bytes) else content.encode())
        module.set_owner_if_different(tmp, owner, False, expand=False)
        module.set_group_if_different(tmp, group, False, expand=False)
        module.set_mode_if_different(tmp, mode, False, expand=False)
        if not os.path.lexists(path):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        module.atomic_move(tmp, path, keep_dest_attrs=False)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    # what atomic_move made of a path it found missing after all (a dangling link stood there)
    module.set_owner_if_different(path, owner, False, expand=False)
    module.set_group_if_different(path, group, False, expand=False)
    module.set_mode_if_different(path, mode, False, expand=False)
