# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Text files the modules keep (inputs, locks, checksum lists): read one that may be missing, replace one
atomically (a temporary file beside it, then a rename), so a reader never sees half a file."""

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


def write_atomic(path, text, mode=0o644):
    """Replace `path` with `text` in one rename."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=f".{os.path.basename(path)}.")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
