# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The JIT builds running now, as /proc shows them: FlashInfer builds an op by running
`ninja -v -C <jit dir> -f <jit dir>/<op>/build.ninja` from the server's own process, under the op's lock
(flashinfer-ai/flashinfer flashinfer/jit/cpp_ext.py run_ninja, flashinfer/jit/core.py JitSpec.build), so a ninja
process's cgroup names the unit of the server that builds, and its start time how long the build has run."""

from __future__ import annotations

import os
import re
import time

_UNIT = re.compile(r"/([^/\s]+\.service)\s*$")


def _argv(pid_dir):
    with open(os.path.join(pid_dir, "cmdline"), "rb") as handle:
        return [arg.decode("utf-8", "replace") for arg in handle.read().split(b"\0") if arg]


def _unit(pid_dir):
    """The systemd unit of the process (the last cgroup path component ending in .service, any hierarchy)."""
    with open(os.path.join(pid_dir, "cgroup"), encoding="utf-8", errors="replace") as handle:
        for line in handle:
            match = _UNIT.search(line)
            if match:
                return match.group(1)
    return None


def _started(pid_dir):
    """The process's start in seconds since boot (/proc/PID/stat field 22, in clock ticks)."""
    with open(os.path.join(pid_dir, "stat"), encoding="utf-8", errors="replace") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")


def op_name(argv):
    """The op a ninja command line builds: the directory of its -f build file, else its -C directory."""
    options = {}
    for i, flag in enumerate(argv[:-1]):
        if flag in ("-f", "-C"):
            options.setdefault(flag, argv[i + 1])
    if "-f" in options:
        return os.path.basename(os.path.dirname(os.path.normpath(options["-f"]))) or None
    if "-C" in options:
        return os.path.basename(os.path.normpath(options["-C"])) or None
    return None


def running_builds(proc="/proc", now=None):
    """{unit: [(op, seconds running), ...]} of every ninja process in a systemd service's cgroup. `now` is the
    time since boot (CLOCK_BOOTTIME: /proc/uptime may be a container's, the start times are the kernel's)."""
    now = time.clock_gettime(time.CLOCK_BOOTTIME) if now is None else now
    builds = {}
    for pid in os.listdir(proc):
        if not pid.isdigit():
            continue
        pid_dir = os.path.join(proc, pid)
        try:
            argv = _argv(pid_dir)
            if not argv or os.path.basename(argv[0]) != "ninja":
                continue
            op, unit, started = op_name(argv), _unit(pid_dir), _started(pid_dir)
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile, or not readable
        if op and unit:
            builds.setdefault(unit, []).append((op, max(0.0, now - started)))
    return {unit: sorted(found) for unit, found in builds.items()}
