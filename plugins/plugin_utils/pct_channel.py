# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A persistent command channel into one container, for gpulxc.sglang.pct_ssh.

Without it every command costs an SSH session on the node (sshd's session set-up, PAM, a shell) and a
`pct exec` (on a real node: Perl loading the PVE modules) before the command itself starts. With it:

- a *channel process* on the controller (this file run as a script, detached, one per container) keeps
  one `ssh <node> pct exec <vmid> -- python3` open, in which runs the agent (pct_channel_agent.py), and
  listens on a Unix socket beside the SSH control sockets (mode 0600 in a 0700 directory, as ssh's own ControlPath);
- each command is sent over that socket; the agent runs it with `/bin/sh -c` in the container (stdin the
  data given, or /dev/null) and answers with its exit status, stdout and stderr, as `pct exec` would.

The channel answers *busy* while it runs another command (the caller then uses a plain `pct exec`, so
nothing ever waits on another task), *unavailable* when it has no agent (the container stopped, no
python3 in it yet), and exits after `idle` seconds without a command, or when its agent is gone. The
caller falls back to `pct exec` for everything except a command lost half-way (the agent died while it
ran: like an SSH connection that dropped, that is a connection failure).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time

# What the agent (pct_channel_agent.py, its READY) says once it runs. This file imports nothing but the
# standard library: the channel process runs it as a script, outside Ansible's collection loader.
READY = b"gpulxc-pct-channel ready\n"

# The container-side command: python3 reads the agent's length, then the agent, from its stdin.
BOOT = "import sys;b=sys.stdin.buffer;exec(b.read(int(b.readline())))"
# The environment commands in the container get, set here rather than left to pct exec's policy (pct
# resets PATH to /sbin:/bin:/usr/sbin:/usr/bin and keeps the rest with --keep-env, whose default PVE
# means to turn off): root's PATH and HOME, as a login shell in the container has them.
CONTAINER_ENV = (
    "/usr/bin/env",
    "-u",
    "SSL_CERT_FILE",
    "-u",
    "SSL_CERT_DIR",
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME=/root",
)
CONTAINER_ARGV = (*CONTAINER_ENV, "/bin/sh", "-c", "exec python3 -c '%s'" % BOOT)


class Unavailable(Exception):
    """The channel cannot take the command now (busy, no agent); the caller uses a plain pct exec."""


class Lost(Exception):
    """The channel went away while the command ran: whether it ran is unknown."""


def _read_exactly(stream, size):
    data = stream.read(size) if size else b""
    if len(data) != size:
        raise EOFError("short read: %d of %d bytes" % (len(data), size))
    return data


def _recv_line(sock):
    chunks = []
    while True:
        byte = sock.recv(1)
        if not byte:
            raise EOFError("the channel closed the connection")
        if byte == b"\n":
            return b"".join(chunks)
        chunks.append(byte)


def _recv_exactly(sock, size):
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("the channel closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# -- the caller's side -----------------------------------------------------------------------------------


def run(path, cmd, in_data, *, start):
    """(rc, stdout, stderr) of `cmd` in the container through the channel at `path`. When none is there,
    starts one with `start`: a dict of node_argv (the ssh command line that runs CONTAINER_ARGV in the
    container), agent (the agent's file), preload (bool), idle and timeout (seconds).
    Raises Unavailable or Lost."""
    try:
        sock = _connect(path) or _start(path, **start)
    except OSError as exc:  # a path too long for a socket, a directory it cannot write: no channel
        raise Unavailable("no channel at %s: %s" % (path, exc)) from None
    with sock:
        header = {"cmd": cmd, "in": -1 if in_data is None else len(in_data)}
        try:
            sock.sendall(json.dumps(header).encode() + b"\n" + (in_data or b""))
        except OSError as exc:
            raise Unavailable("the channel did not take the command: %s" % exc) from None
        try:
            answer = json.loads(_recv_line(sock))
        except (OSError, EOFError, ValueError) as exc:
            # a closing channel answers "unavailable"; no answer at all means it died, maybe mid-command
            raise Lost("the channel closed before answering: %s" % exc) from None
        if "rc" not in answer:
            raise (Lost if "lost" in answer else Unavailable)(answer.get("lost") or answer.get("unavailable") or "busy")
        try:
            out = _recv_exactly(sock, answer["out"])
            err = _recv_exactly(sock, answer["err"])
        except (OSError, EOFError) as exc:
            raise Lost("the channel closed while sending the command's output: %s" % exc) from None
        return answer["rc"], out, err


def _connect(path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None
    except OSError:
        sock.close()
        raise
    return sock


def _start(path, *, node_argv, agent, preload, idle, timeout):
    """Start the channel process (one at a time per path, under a lock file) and connect to it."""
    with open(path + ".lock", "a") as lock:
        os.chmod(path + ".lock", 0o600)
        fcntl.flock(lock, fcntl.LOCK_EX)
        sock = _connect(path)
        if sock is not None:
            return sock
        if os.path.lexists(path):
            os.unlink(path)  # a channel that died without removing its socket
        with open(path + ".log", "wb") as log:  # the last channel's own errors
            os.chmod(path + ".log", 0o600)
            proc = subprocess.Popen(
                [
                    sys.executable,
                    os.path.abspath(__file__),
                    path,
                    str(idle),
                    str(timeout),
                    agent,
                    str(int(preload)),
                    *node_argv,
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
                close_fds=True,
            )
        status = _read_line_within(proc.stdout, timeout + 5)
        proc.stdout.close()
        if status != b"ready":
            raise Unavailable("the channel did not start: %s" % (status.decode(errors="replace") or "no answer"))
        sock = _connect(path)
        if sock is None:
            raise Unavailable("the channel started but its socket is gone")
        return sock


def _read_line_within(stream, seconds):
    end, data = time.monotonic() + seconds, b""
    while not data.endswith(b"\n"):
        ready = select.select([stream], [], [], max(0.0, end - time.monotonic()))[0]
        if not ready:
            return b"timed out"
        chunk = os.read(stream.fileno(), 4096)
        if not chunk:
            break
        data += chunk
    return data.strip()


# -- the channel process ---------------------------------------------------------------------------------


class Channel:
    """The agent behind `ssh ... pct exec ... python3`, and the socket that hands it commands."""

    def __init__(self, path, idle, node_argv):
        self.path, self.idle = path, idle
        self.lock = threading.Lock()
        self.last_used = time.monotonic()
        self.alive = True
        self.inode = None
        self.handlers = []
        self.agent = subprocess.Popen(node_argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)

    def wait_ready(self, timeout, agent_file, preload):
        with open(agent_file, "rb") as handle:
            agent = handle.read() + b"\nmain(preload=%r)\n" % bool(preload)
        with contextlib.suppress(BrokenPipeError):  # it exited already: its (lack of) answer says so below
            self.agent.stdin.write(b"%d\n" % len(agent) + agent)
            self.agent.stdin.flush()
        line = _read_line_within(self.agent.stdout, timeout)
        if line + b"\n" != READY:
            self.agent.kill()
            raise RuntimeError(
                "no agent in the container (%s; its errors: %s.log)"
                % (line.decode(errors="replace") or "it exited", self.path)
            )

    def serve(self, server):
        """Hand out commands until the agent is gone or the channel was idle for `idle` seconds."""
        while self.alive:
            ready = select.select([server], [], [], 0.5)[0]
            if ready:
                self.last_used = time.monotonic()
                client = server.accept()[0]
                handler = threading.Thread(target=self.handle, args=(client,), daemon=True)
                handler.start()
                self.handlers = [h for h in self.handlers if h.is_alive()] + [handler]
            elif not self.lock.locked() and (
                self.agent.poll() is not None or time.monotonic() - self.last_used > self.idle
            ):
                break

    def withdraw(self):
        """No new callers (the next one starts a new channel), and stop serving."""
        self.alive = False
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == self.inode:
                os.unlink(self.path)

    def close(self, server):
        """Take the socket away first (no caller can connect any more), let a running command finish,
        then answer the callers already waiting that the channel is unavailable (nothing of theirs ran)."""
        self.withdraw()
        for handler in self.handlers:
            handler.join(10)
        with self.lock:
            server.setblocking(False)
            while True:
                try:
                    client = server.accept()[0]
                except OSError:
                    break
                with client, contextlib.suppress(OSError):  # one gone caller must not cut the others off
                    client.sendall(b'{"unavailable": "the channel is closing"}\n')
        server.close()
        self.agent.stdin.close()
        try:
            self.agent.wait(5)
        except subprocess.TimeoutExpired:
            self.agent.kill()

    def handle(self, client):
        with client:
            try:
                request = json.loads(_recv_line(client))
                data = _recv_exactly(client, max(request["in"], 0))
            except (OSError, EOFError, ValueError):
                return
            if not self.lock.acquire(blocking=False):
                client.sendall(b'{"busy": true}\n')
                return
            try:
                self.last_used = time.monotonic()
                if not self.alive or self.agent.poll() is not None:
                    self.withdraw()
                    answer = b'{"unavailable": "the agent has exited"}\n'
                else:
                    answer = self.ask(request, data)
            finally:
                self.last_used = time.monotonic()
                self.lock.release()  # before answering: the caller's next command must find the channel free
            # if the caller went away, the agent's answer was still read: the channel stays usable
            with contextlib.suppress(OSError):
                client.sendall(answer)

    def ask(self, request, data):
        """The agent's answer to one request, as sent to the caller."""
        try:
            self.agent.stdin.write(json.dumps(request).encode() + b"\n" + data)
            self.agent.stdin.flush()
        except OSError as exc:  # the agent's side is gone and the command did not reach it
            self.withdraw()
            return json.dumps({"unavailable": "the agent has exited (%s)" % exc}).encode() + b"\n"
        try:
            header = self.agent.stdout.readline()
            counts = json.loads(header)
            body = _read_exactly(self.agent.stdout, counts["out"] + counts["err"])
        except (OSError, EOFError, ValueError) as exc:
            self.withdraw()
            message = "the channel to the container closed while the command ran (%s)" % exc
            return json.dumps({"lost": message}).encode() + b"\n"
        return header + body


def main(argv):
    path, idle, timeout, agent, preload, node_argv = argv[0], float(argv[1]), float(argv[2]), argv[3], argv[4], argv[5:]
    out = sys.stdout.buffer
    os.umask(0o077)
    try:
        channel = Channel(path, idle, node_argv)
        channel.wait_ready(timeout, agent, preload == "1")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        staged = "%s.%d" % (path, os.getpid())
        server.bind(staged)
        server.listen(8)
        os.rename(staged, path)  # callers see the socket only once the agent answers
        channel.inode = os.stat(path).st_ino
    except Exception as exc:  # pylint: disable=broad-except
        out.write(("failed: %s\n" % exc).encode())
        out.flush()
        return 1
    out.write(b"ready\n")
    out.flush()
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    try:
        channel.serve(server)
    finally:
        channel.close(server)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
