# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The container's side of gpulxc.sglang.pct_ssh's channel (see pct_channel.py): this file's text is sent to
`python3` in the container and runs there, one command at a time, until its stdin closes.

Protocol on stdin/stdout: a JSON line {"cmd": <shell command line>, "in": <bytes of stdin, -1 for none>},
those bytes; the answer is a JSON line {"rc": ..., "out": <bytes>, "err": <bytes>, "via": "fork" or "shell"},
then stdout, stderr.

A command is run as `/bin/sh -c <cmd>` would run it (stdin the data given, else /dev/null), with one
exception that changes how, never what: an Ansible module piped to this same Python
(`[NAME=value ...] <python3> && sleep 0` with the AnsiballZ wrapper as stdin) runs in a child forked from
this process, which has already imported the Python standard library and the `ansible.module_utils` files the
modules share (from the first module's own payload). A fresh Python spends about 100 ms importing those for
every module. The child runs the payload unchanged; only files whose bytes (CRC-32 and size) are those of the
payload's own copies are taken from the preloaded ones, everything else the payload brings is imported from
the payload itself. Anything else, or a payload whose shared files differ, runs with `/bin/sh -c`.
Runs on the container's python3 (3.6 or newer: no annotations, no f-strings, standard library only); the
forked path needs 3.10 (zipimporter.find_spec), older ones run every command with `/bin/sh -c`.
"""

import atexit
import base64
import io
import json
import os
import re
import select
import shlex
import shutil
import subprocess
import sys
import tempfile
import traceback
import zipfile
import zipimport

READY = b"gpulxc-pct-channel ready\n"
# PayloadFinder needs zipimporter.find_spec (Python 3.10); older Pythons run every module fresh.
FORKABLE = hasattr(zipimport.zipimporter, "find_spec")
PRELOAD = ("ansible.module_utils.basic", "ansible.module_utils._internal._ansiballz._loader")
ENV_WORD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
ZIP_DATA = re.compile(rb"\nzip_data='([A-Za-z0-9+/=]+)'")


# Read by Python or the C library when a process starts, not later: a module given one of these runs fresh.
STARTUP_ENV = re.compile(r"^(PYTHON.*|LANG|LANGUAGE|LC_.*|TZ|TMPDIR|TMP|TEMP|LD_.*|MALLOC_.*)$")
# The interpreter this agent runs on, as it was when the agent started (a package upgrade replaces it).
EXECUTABLE = (sys.executable, os.stat(sys.executable).st_ino if sys.executable else None)


def module_payload(cmd, data):
    """(environment, zip bytes) when `cmd` pipes an AnsiballZ payload to this very Python (the same path, not
    a virtual environment's link to it, not replaced since), else None."""
    words = _shell_words(cmd) if data and b"_ANSIBALLZ_WRAPPER = True" in data else None
    env = {}
    while words and ENV_WORD.match(words[0]):
        name, value = ENV_WORD.match(words.pop(0)).groups()
        env[name] = value
    if not words or len(words) != 4 or words[1:] != ["&&", "sleep", "0"] or any(map(STARTUP_ENV.match, env)):
        return None
    found = ZIP_DATA.search(data)
    try:
        same = os.path.abspath(shutil.which(words[0]) or words[0]) == EXECUTABLE[0]
        same = same and os.stat(EXECUTABLE[0]).st_ino == EXECUTABLE[1]
        return (env, base64.b64decode(found.group(1))) if found and same else None
    except (OSError, ValueError):
        return None


def _shell_words(cmd):
    """The words of X in `/bin/sh -c X` (how Ansible wraps every command), else None."""
    try:
        outer = shlex.split(cmd)
        return shlex.split(outer[2]) if len(outer) == 3 and outer[:2] == ["/bin/sh", "-c"] else None
    except ValueError:
        return None


class NotForked(Exception):
    """The module could not be started in a child (nothing of it ran)."""


class PayloadFinder:
    """Finds `ansible.*` modules in the current payload's zip before anything preloaded is looked at (those
    already imported come from sys.modules, and were checked to be the payload's own bytes)."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if not fullname.startswith("ansible."):
            return None
        package = fullname.rpartition(".")[0].replace(".", "/")
        for entry in sys.path:
            if entry.endswith("_payload.zip"):
                try:
                    spec = zipimport.zipimporter(entry + "/" + package + "/").find_spec(fullname)
                except (zipimport.ZipImportError, OSError):
                    continue
                if spec is not None:
                    return spec
        return None


class Preloaded:
    """The shared module_utils, imported once from the first module payload."""

    def __init__(self):
        self.directory = None
        self.files = None  # {zip member: (crc, size)} of every module imported from it
        self.failed = False  # the preload failed: every module runs fresh

    def matches(self, zipped):
        try:
            members = dict((i.filename, (i.CRC, i.file_size)) for i in zipfile.ZipFile(io.BytesIO(zipped)).infolist())
        except zipfile.BadZipFile:
            return False
        if self.files is None and not self.failed:
            self.load(zipped, members)
        return bool(self.files) and all(members.get(name) == info for name, info in self.files.items())

    def load(self, zipped, members):
        try:
            self.directory = tempfile.mkdtemp(prefix="gpulxc-pct-channel-")
            archive = os.path.join(self.directory, "shared_payload.zip")
            with open(archive, "wb") as handle:
                handle.write(zipped)
        except OSError:
            traceback.print_exc()
            self.failed = True
            return
        sys.path.insert(0, archive)
        try:
            for name in PRELOAD:
                __import__(name)
        except Exception:  # pylint: disable=broad-except
            traceback.print_exc()
            self.files = None
            self.failed = True
            return
        finally:
            sys.path.remove(archive)
        files = {}
        for module in list(sys.modules.values()):
            origin = getattr(getattr(module, "__spec__", None), "origin", None) or ""
            if origin.startswith(archive + "/"):
                member = origin[len(archive) + 1 :]
                files[member] = members.get(member)
        self.files = files


def run_forked(env, data, channel_fds):
    """Run the module payload in a child of this process; (rc, stdout, stderr)."""
    try:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
    except OSError as exc:  # no pipe, no fork (the container's pids.max): the module has not run
        raise NotForked(exc) from exc
    if pid == 0:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        for fd in (out_r, out_w, err_r, err_w, null, *channel_fds):
            os.close(fd)
        run_child(env, data)
    os.close(out_w)
    os.close(err_w)
    chunks, done = {out_r: [], err_r: []}, {}
    while chunks:
        readable = select.select(list(chunks), [], [])[0]
        for fd in readable:
            chunk = os.read(fd, 1 << 16)
            if chunk:
                chunks[fd].append(chunk)
            else:
                os.close(fd)
                done[fd] = b"".join(chunks.pop(fd))
    status = os.waitpid(pid, 0)[1]
    rc = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
    return rc, done[out_r], done[err_r]


def run_child(env, data):
    """In the child: the module, as `python3` with the payload on stdin would run it; never returns."""
    code = 1
    try:
        os.environ.update(env)
        atexit._clear()  # the agent's; the module's own (AnsibleModule's tmpdir removal) run below
        sys.argv = [""]
        sys.meta_path.insert(0, PayloadFinder)
        exec(compile(data, "<stdin>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            sys.stderr.write("%s\n" % exc.code)
    except BaseException:  # pylint: disable=broad-except
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code & 0xFF)


def run_shell(cmd, data):
    """(rc, stdout, stderr) of `/bin/sh -c cmd` with `data` as stdin (None: /dev/null)."""
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", cmd],
            stdin=subprocess.DEVNULL if data is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = proc.communicate(data)
    except OSError as exc:
        return 127, b"", str(exc).encode()
    return (proc.returncode if proc.returncode >= 0 else 128 - proc.returncode), out, err


def serve(read, write, preload=True):
    """Answer the requests on `read` until it closes."""
    preloaded = Preloaded()
    write.write(READY)
    write.flush()
    try:
        while True:
            line = read.readline()
            if not line:
                break
            request = json.loads(line.decode())
            data = read.read(request["in"]) if request["in"] >= 0 else None
            module = module_payload(request["cmd"], data) if preload and FORKABLE else None
            via, result = "shell", None
            try:
                if module is not None and preloaded.matches(module[1]):
                    via, result = "fork", run_forked(module[0], data, (read.fileno(), write.fileno()))
            except NotForked:
                traceback.print_exc()
                via = "shell"
            rc, out, err = result if via == "fork" else run_shell(request["cmd"], data)
            answer = {"rc": rc, "out": len(out), "err": len(err), "via": via}
            write.write(json.dumps(answer).encode() + b"\n" + out + err)
            write.flush()
    finally:
        if preloaded.directory:
            shutil.rmtree(preloaded.directory, ignore_errors=True)


def main(preload=True):
    """Requests on a copy of stdin, answers on a copy of stdout (neither inherited by the commands); fd 0
    and 1 become /dev/null, so nothing else can write into the channel."""
    read, write = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    serve(read, write, preload)
