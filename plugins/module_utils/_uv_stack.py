# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure helpers of the uv_stack module: the resolve's input files, lock and freeze parsing, and the
reading of `uv pip check` (no I/O here, so unit tests cover them directly)."""

from __future__ import annotations

import hashlib
import re

from ansible_collections.gpulxc.sglang.plugins.module_utils._dists import canonical

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")
_CHECK_REQUIREMENT = re.compile(r"requires `([^`]+)`")


def requirement_name(requirement):
    """The project name a PEP 508 requirement string is about, canonical; None for a blank or comment."""
    text = requirement.split("#", 1)[0].strip()
    if not text:
        return None
    match = _NAME.match(text)
    return canonical(match.group(1)) if match else None


def fragment_text(sources):
    """One input file from (label, lines) pairs, each block headed by where it came from."""
    blocks = []
    for label, lines in sources:
        body = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
        if body:
            blocks.append("\n".join([f"# from {label}", *body]))
    return "\n".join(blocks) + "\n" if blocks else ""


def unlabelled(text):
    """An input file's lines without its `# from <label>` headers: what the resolve reads (None stays None)."""
    if text is None:
        return None
    return [line for line in text.splitlines() if not line.startswith("# from ")]


def _pin(line):
    """(canonical name, version) of a `name==version` line that is not indented (a hash or `# via` line), or None."""
    match = _PIN.match(line.strip())
    if match and not line.startswith((" ", "\t", "#")):
        return canonical(match.group(1)), match.group(2)
    return None


def pins(text):
    """{canonical name: version} of `name==version` lines (a lock file or `uv pip freeze` output)."""
    return dict(pin for pin in map(_pin, text.splitlines()) if pin)


def lock_key(text):
    """16 hex of the sha256 of a lock's pins and hashes, its comments left out: uv's `# via -r <file>` names the
    resolve's temporary input file, so the same resolve gets the same key (a stack's directory name)."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def unhashed(text):
    """The canonical names of a lock's pins that carry no `--hash=` (a lock made without --generate-hashes)."""
    names, current = {}, None
    for line in text.splitlines():
        pin = _pin(line)
        if pin:
            current = pin[0]
            names[current] = False
        if current and "--hash=" in line:
            names[current] = True
    return sorted(name for name, hashed in names.items() if not hashed)


def drift(installed, locked):
    """{name: {"installed": version or None, "locked": version or None}} for every difference."""
    names = sorted(set(installed) | set(locked))
    return {
        name: {"installed": installed.get(name), "locked": locked.get(name)}
        for name in names
        if installed.get(name) != locked.get(name)
    }


def check_complaints(output, overridden):
    """Split `uv pip check` complaint lines into (accepted, rejected): a complaint is accepted when the
    requirement it names is on a project with a declared override."""
    accepted, rejected = [], []
    for line in output.splitlines():
        match = _CHECK_REQUIREMENT.search(line)
        if not match:
            continue
        (accepted if requirement_name(match.group(1)) in overridden else rejected).append(line.strip())
    return accepted, rejected
