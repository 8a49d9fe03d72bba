#!/usr/bin/env python3
# ruff: noqa: PLR0911, PLR0912, PLR0915 - ports of systemd's parsers and state machines, kept whole for comparison
"""Run a rendered systemd service unit where there is no systemd (the lent GPU machine), as systemd would.

    unit_runner.py [--run-dir DIR] show   UNIT_FILE [INSTANCE] [--json]
    unit_runner.py [--run-dir DIR] start  UNIT_FILE [INSTANCE] [--log FILE]
    unit_runner.py [--run-dir DIR] stop   UNIT_FILE [INSTANCE] [--timeout SEC] [--json]
    unit_runner.py [--run-dir DIR] status UNIT_FILE [INSTANCE] [--lines N] [--json]

UNIT_FILE is a unit as the roles write it (/etc/systemd/system/sglang@.service); INSTANCE picks the
instance of a template (sglang@3.service: INSTANCE 3). Nothing of the command line is rebuilt: the unit
is read the way systemd reads it (systemd.syntax(7), systemd.unit(5), systemd.exec(5), systemd.service(5),
systemd.kill(5)), and what it says is done:

- the unit file: sections, comments (# ;), continuation lines (a trailing backslash), the drop-ins
  next to it (service.d/, NAME@.service.d/, NAME@I.service.d/ *.conf, by file name); empty
  assignments reset list settings;
- specifiers %i %I %n %N %p %P %j %J %f %y %Y %u %U %g %G %h %s %H %l %m %b %v %a %o %w %t %S %C %L
  %E %T %V and %%; any other is refused (systemd would refuse or ignore that setting);
- Environment=: several assignments a line, quoted with "" or '', C escapes (\\n \\x41 \\s ...);
  specifiers after unquoting; invalid assignments ignored with a warning, as systemd does;
- EnvironmentFile=: absolute path or glob, optional "-" prefix (ignore errors); the file format of
  systemd's env-file parser (KEY=VALUE, '' and "" quoting, backslash escapes and continuations, # and
  ; comment lines); read at start time; its variables override Environment='s, later files later;
- the environment systemd builds: the manager's (PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin,
  the locale of /etc/locale.conf or /etc/default/locale, else LANG=C.UTF-8), then USER (always; root
  without User=), LOGNAME, HOME (not "/"), SHELL (not a nologin placeholder) from the user's passwd entry
  when User= is set (SetLoginEnvironment=), then Environment=, then EnvironmentFile=, then
  UnsetEnvironment=;
- User= / Group= (names or numbers that exist; supplementary groups as initgroups(3) gives them, plus
  SupplementaryGroups=), WorkingDirectory= (default /, "~" the user's home, "-" prefix: a missing one is
  no error), UMask= (default 0022), Limit*=, NoNewPrivileges=;
- ExecStart=: one command; prefix "-" (a failing exit counts as success) supported, "@" ":" "+" "!"
  refused; the path absolute or a bare name looked up in systemd's fixed search path; arguments
  unquoted and unescaped, specifiers per word, then at start $NAME as a word of its own (split at
  whitespace into zero or more words) and ${NAME} inside a word (one word), $$ for a dollar sign;
- LoadCredential=ID:PATH (an absolute PATH): copied at start into CREDENTIALS_DIRECTORY
  (/run/credentials/NAME, or $GPULXC_UNITS_CREDENTIALS_DIR/NAME), the directory 0500 and each file 0400,
  owned by User=, as systemd's exec-credential.c makes them; a missing file fails the start with
  status=243/CREDENTIALS;
- Type=simple or exec (started once execve() succeeded); KillMode= (mixed, control-group, process,
  none), KillSignal=, SendSIGKILL=, TimeoutStopSec= / TimeoutSec=, SuccessExitStatus=.

start forks a small supervisor (its own session, a child subreaper: what the service leaves behind is
reparented to it, so it knows "the unit's processes" as systemd's cgroup would), which starts the
service in a new session (setsid) with stdin /dev/null and stdout/stderr appended to the log, reaps it,
records its exit status and then, per KillMode=, kills what the main process left behind. The pidfile
and the state are RUN_DIR/NAME.pid and RUN_DIR/NAME.json (RUN_DIR: /run/gpulxc-units, or
$GPULXC_UNITS_RUN_DIR); the log is RUN_DIR/NAME.log unless --log names one.

Not applied, and listed as such by show: the sandboxing (PrivateTmp=, Protect*=, DevicePolicy=,
DeviceAllow=, CapabilityBoundingSet=, ...), Restart=, StartLimit*=, the journal (StandardOutput= goes to
the log), dependencies. Units with ExecStartPre=/ExecStartPost=/ExecStop=/ExecStopPost=/ExecCondition=
or another Type= are refused. Python 3.11+, standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import glob
import grp
import json
import os
import platform
import pwd
import resource
import shlex
import signal
import socket
import sys
import time

WHITESPACE = " \t\n\r"
NEWLINE = "\n\r"
COMMENTS = "#;"
SHELL_NEED_ESCAPE = '"\\`$'
MANAGER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"
DEFAULT_LOCALE = "C.UTF-8"
LOCALE_VARS = (
    "LANG",
    "LANGUAGE",
    "LC_CTYPE",
    "LC_NUMERIC",
    "LC_TIME",
    "LC_COLLATE",
    "LC_MONETARY",
    "LC_MESSAGES",
    "LC_PAPER",
    "LC_NAME",
    "LC_ADDRESS",
    "LC_TELEPHONE",
    "LC_MEASUREMENT",
    "LC_IDENTIFICATION",
)
NOLOGIN = ("/bin/nologin", "/sbin/nologin", "/usr/bin/nologin", "/usr/sbin/nologin")
UNIT_NAME_CHARS = set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ:-_.\\")
ENV_NAME_FIRST = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
ENV_NAME_CHARS = ENV_NAME_FIRST | set("0123456789")
DEFAULT_RUN_DIR = "/run/gpulxc-units"
DEFAULT_TIMEOUT_STOP = 90.0
DEFAULT_CREDENTIALS_DIR = "/run/credentials"
# systemd's exit codes for a set-up step that failed before execve() (systemd.exec(5), "Process Exit Codes")
EXIT = {
    "CHDIR": 200,
    "FDS": 202,
    "EXEC": 203,
    "LIMITS": 205,
    "SIGNAL_MASK": 207,
    "GROUP": 216,
    "USER": 217,
    "SETSID": 220,
    "NO_NEW_PRIVILEGES": 227,
    "CREDENTIALS": 243,
}
CLEAN_SIGNALS = ("SIGHUP", "SIGINT", "SIGTERM", "SIGPIPE")  # clean exits besides 0 (systemd.service(5))
RLIMITS = {
    "CPU": "RLIMIT_CPU",
    "FSIZE": "RLIMIT_FSIZE",
    "DATA": "RLIMIT_DATA",
    "STACK": "RLIMIT_STACK",
    "CORE": "RLIMIT_CORE",
    "RSS": "RLIMIT_RSS",
    "NOFILE": "RLIMIT_NOFILE",
    "AS": "RLIMIT_AS",
    "NPROC": "RLIMIT_NPROC",
    "MEMLOCK": "RLIMIT_MEMLOCK",
    "LOCKS": "RLIMIT_LOCKS",
    "SIGPENDING": "RLIMIT_SIGPENDING",
    "MSGQUEUE": "RLIMIT_MSGQUEUE",
    "NICE": "RLIMIT_NICE",
    "RTPRIO": "RLIMIT_RTPRIO",
    "RTTIME": "RLIMIT_RTTIME",
}
BYTE_LIMITS = {"FSIZE", "DATA", "STACK", "CORE", "RSS", "AS", "MEMLOCK", "MSGQUEUE"}
# [Service] settings interpreted here; the rest of [Service] is reported as not applied
APPLIED = {
    "Type",
    "ExecStartPre",
    "TimeoutStartSec",
    "User",
    "Group",
    "SupplementaryGroups",
    "Environment",
    "EnvironmentFile",
    "UnsetEnvironment",
    "WorkingDirectory",
    "ExecStart",
    "KillMode",
    "KillSignal",
    "SendSIGKILL",
    "TimeoutStopSec",
    "TimeoutSec",
    "SuccessExitStatus",
    "UMask",
    "NoNewPrivileges",
    "SetLoginEnvironment",
    "LoadCredential",
    *("Limit" + name for name in RLIMITS),
}
REFUSED = (
    "ExecStartPost",
    "ExecCondition",
    "ExecStop",
    "ExecStopPost",
    "PAMName",
    "DynamicUser",
    "RootDirectory",
    "RootImage",
)


class UnitError(Exception):
    """The unit cannot be run as systemd would run it; the message says why."""


# ---------------------------------------------------------------------------------------------------------
# systemd's word splitting (extract_first_word with EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE), C unescaping
# ---------------------------------------------------------------------------------------------------------


def _byte_char(value):
    """One byte of an \\x or octal escape: ASCII as is, others as a surrogate (written back as that byte)."""
    return chr(value) if value < 0x80 else chr(0xDC00 + value)


def cunescape_one(text, i):
    """Decode the escape whose letter is text[i]: (string, characters consumed) or None if invalid."""
    simple = {
        "a": "\a",
        "b": "\b",
        "f": "\f",
        "n": "\n",
        "r": "\r",
        "t": "\t",
        "v": "\v",
        "\\": "\\",
        '"': '"',
        "'": "'",
        "s": " ",
    }
    c = text[i] if i < len(text) else ""
    if c in simple and c:
        return simple[c], 1
    hexdigits = "0123456789abcdefABCDEF"
    if c == "x":
        digits = text[i + 1 : i + 3]
        if len(digits) != 2 or any(d not in hexdigits for d in digits) or int(digits, 16) == 0:
            return None
        return _byte_char(int(digits, 16)), 3
    if c in ("u", "U"):
        n = 4 if c == "u" else 8
        digits = text[i + 1 : i + 1 + n]
        if len(digits) != n or any(d not in hexdigits for d in digits):
            return None
        code = int(digits, 16)
        if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            return None
        return chr(code), 1 + n
    if c and c in "01234567":
        digits = text[i : i + 3]
        if len(digits) != 3 or any(d not in "01234567" for d in digits):
            return None
        value = int(digits, 8)
        if value == 0 or value > 255:
            return None
        return _byte_char(value), 3
    return None


def extract_first_word(text, pos, *, unquote=True, cunescape=True, relax=False, cunescape_relax=False):
    """Port of systemd's extract_first_word(): (word or None at the end, next position). ValueError on
    unbalanced quoting or an invalid escape (unless relaxed)."""
    n = len(text)
    while pos < n and text[pos] in WHITESPACE:
        pos += 1
    if pos >= n:
        return None, n
    out = []
    quote = ""
    while True:
        if pos >= n:
            if quote and not relax:
                raise ValueError("unbalanced quoting")
            return "".join(out), n
        c = text[pos]
        if c == "\\":
            if pos + 1 >= n:  # a trailing backslash
                if cunescape_relax and (not quote or relax):
                    out.append("\\")
                    return "".join(out), n
                if relax:
                    return "".join(out), n
                raise ValueError("trailing backslash")
            if cunescape:
                decoded = cunescape_one(text, pos + 1)
                if decoded is None:
                    if not cunescape_relax:
                        raise ValueError(f"invalid escape sequence \\{text[pos + 1]}")
                    out.append("\\" + text[pos + 1])
                    pos += 2
                else:
                    out.append(decoded[0])
                    pos += 1 + decoded[1]
            else:
                out.append(text[pos + 1])
                pos += 2
            continue
        if quote:
            if c == quote:
                quote = ""
            else:
                out.append(c)
            pos += 1
            continue
        if unquote and c in "'\"":
            quote = c
            pos += 1
            continue
        if c in WHITESPACE:
            while pos < n and text[pos] in WHITESPACE:
                pos += 1
            return "".join(out), pos
        out.append(c)
        pos += 1


def extract_word_and_warn(text, pos, where, warnings, **flags):
    """One word as systemd's extract_first_word_and_warn() gives it: an invalid escape is kept verbatim
    with a warning; unbalanced quoting is an error."""
    try:
        return extract_first_word(text, pos, **flags)
    except ValueError:
        try:
            word, new = extract_first_word(text, pos, cunescape_relax=True, **flags)
        except ValueError as exc:
            raise UnitError(f"{where}: unbalanced quoting in {text!r}") from exc
        warnings.append(f"{where}: ignoring unknown escape sequences: {word!r}")
        return word, new


def extract_words(text, where, warnings, **flags):
    """All words of text (see extract_word_and_warn)."""
    words, pos = [], 0
    while True:
        word, pos = extract_word_and_warn(text, pos, where, warnings, **flags)
        if word is None:
            return words
        words.append(word)


def command_lines(value, where, warnings):
    """The commands of an Exec*= line as config_parse_exec() splits them: word lists, a lone ';' between
    commands, a lone '\\;' a literal ';' argument."""
    commands, words, pos, n = [], [], 0, len(value)
    while True:
        while pos < n and value[pos] in WHITESPACE:
            pos += 1
        if pos >= n:
            break
        rest = value[pos:]
        if rest[0] == ";" and (len(rest) == 1 or rest[1] in WHITESPACE):
            if words:
                commands.append(words)
            words, pos = [], pos + 1
            continue
        if words and rest.startswith("\\;") and (len(rest) == 2 or rest[2] in WHITESPACE):
            words.append(";")
            pos += 2
            continue
        word, pos = extract_word_and_warn(value, pos, where, warnings)
        if word is None:
            break
        words.append(word)
    if words:
        commands.append(words)
    return commands


# ---------------------------------------------------------------------------------------------------------
# the unit file
# ---------------------------------------------------------------------------------------------------------


def read_unit_file(path, warnings):
    """[(section, key, value, 'file:line')] of one unit file or drop-in, as systemd's config parser reads it."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            raw = f.read().split("\n")
    except OSError as exc:
        raise UnitError(f"cannot read {path}: {exc.strerror}") from exc
    if raw and raw[0].startswith("\ufeff"):
        raw[0] = raw[0][1:]
    items, section, continuation, start = [], None, None, 0
    for number, raw_line in enumerate(raw, 1):
        line = raw_line.rstrip("\r")
        stripped = line.lstrip(WHITESPACE)
        if stripped and stripped[0] in COMMENTS:  # comment lines are skipped, inside a continuation too
            continue
        if continuation is None:
            start = number
            text = line
        else:
            text = continuation + line
        escaped = False
        for ch in text:
            escaped = False if escaped else ch == "\\"
        if escaped:  # a trailing backslash: replaced by a space, the next line appended
            continuation = text[:-1] + " "
            continue
        continuation = None
        text = text.strip(WHITESPACE)
        if not text:
            continue
        where = f"{path}:{start}"
        if text.startswith("["):
            if not text.endswith("]"):
                raise UnitError(f"{where}: invalid section header {text!r}")
            section = text[1:-1]
            continue
        if section is None:
            warnings.append(f"{where}: assignment outside of a section, ignored")
            continue
        if "=" not in text:
            warnings.append(f"{where}: missing '=', line ignored")
            continue
        key, value = text.split("=", 1)
        items.append((section, key.strip(WHITESPACE), value.strip(WHITESPACE), where))
    if continuation is not None:
        text = continuation.strip(WHITESPACE)
        if text and section is not None and "=" in text:
            key, value = text.split("=", 1)
            items.append((section, key.strip(WHITESPACE), value.strip(WHITESPACE), f"{path}:{start}"))
    return items


def unit_unescape(text):
    """systemd's unit_name_unescape(): \\xNN decoded, '-' is '/'."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "-":
            out.append("/")
        elif text.startswith("\\x", i) and len(text) >= i + 4:
            try:
                out.append(_byte_char(int(text[i + 2 : i + 4], 16)))
                i += 4
                continue
            except ValueError:
                out.append(text[i])
        else:
            out.append(text[i])
        i += 1
    return "".join(out)


def os_release(key):
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            with open(path, encoding="utf-8") as f:
                values = dict(load_env_file_text(f.read(), path))
            return values.get(key, "")
        except OSError:
            continue
    return ""


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


class Unit:
    """One unit instance, read from its file and drop-ins."""

    def __init__(self, unit_file, instance=None):
        self.warnings = []
        self.fragment = os.path.abspath(unit_file)
        base = os.path.basename(self.fragment)
        stem, dot, suffix = base.rpartition(".")
        if not dot or suffix != "service":
            raise UnitError(f"{base}: not a service unit (NAME.service or NAME@.service)")
        if stem.endswith("@"):
            if not instance:
                raise UnitError(f"{base} is a template: name the instance (for {stem}3.service: 3)")
            if not set(instance) <= UNIT_NAME_CHARS | {"@"}:
                raise UnitError(
                    f"instance {instance!r}: not a valid unit instance name (escape it with systemd-escape)"
                )
            self.prefix, self.instance = stem[:-1], instance
            self.name = f"{self.prefix}@{instance}.service"
        else:
            if instance:
                raise UnitError(f"{base} is not a template unit; it has no instance {instance!r}")
            if "@" in stem:
                raise UnitError(f"{base}: an instance unit file; pass the template (NAME@.service) and the instance")
            self.prefix, self.instance = stem, None
            self.name = base
        directory = os.path.dirname(self.fragment)
        dropin_dirs = [os.path.join(directory, "service.d"), os.path.join(directory, base + ".d")]
        if self.instance is not None:
            dropin_dirs.append(os.path.join(directory, self.name + ".d"))
        dropins = {}
        for d in dropin_dirs:  # later (more specific) directories win for the same file name
            for path in glob.glob(os.path.join(glob.escape(d), "*.conf")):
                dropins[os.path.basename(path)] = path
        self.dropins = [dropins[k] for k in sorted(dropins)]
        self.items = read_unit_file(self.fragment, self.warnings)
        for path in self.dropins:
            self.items += read_unit_file(path, self.warnings)
        self._specifiers = self._specifier_table()

    # -- settings ------------------------------------------------------------------------------------------

    def values(self, key, section="Service"):
        return [(value, where) for (sec, k, value, where) in self.items if sec == section and k == key]

    def last(self, key, default=None, section="Service"):
        found = self.values(key, section)
        return found[-1] if found else (default, None)

    # -- specifiers (systemd.unit(5), "Specifiers") --------------------------------------------------------

    def _specifier_table(self):
        prefix, instance = self.prefix, self.instance
        root = pwd.getpwuid(0)
        stem = self.name[: -len(".service")]
        return {
            "n": lambda: self.name,
            "N": lambda: stem,
            "p": lambda: prefix,
            "P": lambda: unit_unescape(prefix),
            "i": lambda: instance or "",
            "I": lambda: unit_unescape(instance or ""),
            "j": lambda: prefix.rsplit("-", 1)[-1],
            "J": lambda: unit_unescape(prefix.rsplit("-", 1)[-1]),
            "f": lambda: "/" + unit_unescape(instance if instance is not None else prefix).lstrip("/"),
            "y": lambda: self.fragment,
            "Y": lambda: os.path.dirname(self.fragment),
            # the user of the service manager: root for the system manager, not User=
            "u": lambda: root.pw_name,
            "U": lambda: "0",
            "g": lambda: grp.getgrgid(0).gr_name,
            "G": lambda: "0",
            "h": lambda: root.pw_dir,
            "s": lambda: root.pw_shell,
            "H": socket.gethostname,
            "l": lambda: socket.gethostname().split(".", 1)[0],
            "m": lambda: _read("/etc/machine-id"),
            "b": lambda: _read("/proc/sys/kernel/random/boot_id").replace("-", ""),
            "v": platform.release,
            "a": lambda: {"x86_64": "x86-64", "aarch64": "arm64"}.get(platform.machine(), platform.machine()),
            "o": lambda: os_release("ID"),
            "w": lambda: os_release("VERSION_ID"),
            "t": lambda: "/run",
            "S": lambda: "/var/lib",
            "C": lambda: "/var/cache",
            "L": lambda: "/var/log",
            "E": lambda: "/etc",
            "T": lambda: "/tmp",
            "V": lambda: "/var/tmp",
        }

    def specifiers(self, text, where):
        """systemd's specifier_printf(): %X replaced, %% a percent sign, a stray % at the end kept."""
        out, i = [], 0
        while i < len(text):
            c = text[i]
            if c != "%":
                out.append(c)
                i += 1
                continue
            if i + 1 >= len(text):
                out.append("%")
                break
            spec = text[i + 1]
            if spec == "%":
                out.append("%")
            elif spec in self._specifiers:
                try:
                    out.append(self._specifiers[spec]())
                except OSError as exc:
                    raise UnitError(f"{where}: specifier %{spec} cannot be resolved here: {exc}") from exc
            else:
                raise UnitError(f"{where}: unknown specifier %{spec} in {text!r} (systemd: 'Invalid slot')")
            i += 2
        return "".join(out)


# ---------------------------------------------------------------------------------------------------------
# environment files (systemd's parse_env_file_internal)
# ---------------------------------------------------------------------------------------------------------


def load_env_file_text(contents, fname):
    """[(key, value)] of an environment file, by systemd's state machine (env-file.c)."""
    pairs = []
    key, value = [], []
    last_key_ws = last_value_ws = None
    state = "PRE_KEY"

    def push():
        k = "".join(key[:last_key_ws] if last_key_ws is not None else key)
        pairs.append((k, "".join(value)))

    for c in contents:
        if state == "PRE_KEY":
            if c in COMMENTS:
                state = "COMMENT"
            elif c not in WHITESPACE:
                state, last_key_ws, key, value = "KEY", None, [c], []
        elif state == "KEY":
            if c in NEWLINE:
                state, key = "PRE_KEY", []
            elif c == "=":
                state, last_value_ws = "PRE_VALUE", None
            else:
                if c not in WHITESPACE:
                    last_key_ws = None
                elif last_key_ws is None:
                    last_key_ws = len(key)
                key.append(c)
        elif state == "PRE_VALUE":
            if c in NEWLINE:
                push()
                state, key, value = "PRE_KEY", [], []
            elif c == "'":
                state = "SINGLE_QUOTE_VALUE"
            elif c == '"':
                state = "DOUBLE_QUOTE_VALUE"
            elif c == "\\":
                state = "VALUE_ESCAPE"
            elif c not in WHITESPACE:
                state = "VALUE"
                value.append(c)
        elif state == "VALUE":
            if c in NEWLINE:
                if last_value_ws is not None:
                    del value[last_value_ws:]
                push()
                state, key, value = "PRE_KEY", [], []
            elif c == "\\":
                state, last_value_ws = "VALUE_ESCAPE", None
            else:
                if c not in WHITESPACE:
                    last_value_ws = None
                elif last_value_ws is None:
                    last_value_ws = len(value)
                value.append(c)
        elif state == "VALUE_ESCAPE":
            state = "VALUE"
            if c not in NEWLINE:  # an escaped newline is eaten up
                value.append(c)
        elif state == "SINGLE_QUOTE_VALUE":
            if c == "'":
                state = "PRE_VALUE"
            else:
                value.append(c)
        elif state == "DOUBLE_QUOTE_VALUE":
            if c == '"':
                state = "PRE_VALUE"
            elif c == "\\":
                state = "DOUBLE_QUOTE_VALUE_ESCAPE"
            else:
                value.append(c)
        elif state == "DOUBLE_QUOTE_VALUE_ESCAPE":
            state = "DOUBLE_QUOTE_VALUE"
            if c in SHELL_NEED_ESCAPE:
                value.append(c)
            elif c != "\n":
                value += ["\\", c]
        elif state == "COMMENT":
            if c == "\\":
                state = "COMMENT_ESCAPE"
            elif c in NEWLINE:
                state = "PRE_KEY"
        elif state == "COMMENT_ESCAPE":
            state = "PRE_KEY" if c in NEWLINE else "COMMENT"
    if state in (
        "PRE_VALUE",
        "VALUE",
        "VALUE_ESCAPE",
        "SINGLE_QUOTE_VALUE",
        "DOUBLE_QUOTE_VALUE",
        "DOUBLE_QUOTE_VALUE_ESCAPE",
    ):
        if state == "VALUE" and last_value_ws is not None:
            del value[last_value_ws:]
        push()
    for k, v in pairs:
        if any(0xDC80 <= ord(ch) <= 0xDCFF for ch in k + v):
            raise UnitError(f"{fname}: invalid UTF-8 in {k!r}")
    return pairs


def env_name_is_valid(name):
    return bool(name) and name[0] in ENV_NAME_FIRST and set(name) <= ENV_NAME_CHARS


def env_assignment_is_valid(text):
    name, eq, value = text.partition("=")
    return bool(eq) and env_name_is_valid(name) and not any(0xDC80 <= ord(ch) <= 0xDCFF for ch in value)


# ---------------------------------------------------------------------------------------------------------
# $VAR expansion at exec time (systemd's replace_env_argv)
# ---------------------------------------------------------------------------------------------------------


def replace_env(word, env, unset, bad):
    """${NAME} inside a word replaced (unset: empty), $$ a dollar sign; anything else kept."""
    out, i, n = [], 0, len(word)
    while i < n:
        c = word[i]
        if c == "$" and i + 1 < n and word[i + 1] == "$":
            out.append("$")
            i += 2
        elif c == "$" and i + 1 < n and word[i + 1] == "{":
            end = word.find("}", i + 2)
            colon = word.find(":", i + 2)
            if end < 0 or (0 <= colon < end):  # unterminated, or ${A:-b} (not supported here): kept as is
                out.append(c)
                i += 1
                continue
            name = word[i + 2 : end]
            if env_name_is_valid(name):
                if name in env:
                    out.append(env[name])
                else:
                    unset.append(name)
            else:
                bad.append(name)
            i = end + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def replace_env_argv(argv, env):
    """(argv, unset names, invalid names): $NAME as a whole word split at whitespace (quotes respected and
    removed), ${NAME} inside a word as is."""
    out, unset, bad = [], [], []
    for word in argv:
        if word.startswith("$") and word[1:2] not in ("{", "$"):
            name = word[1:]
            if not env_name_is_valid(name):
                bad.append(name)
            elif name in env:
                out += extract_words(env[name], "$" + name, [], unquote=True, cunescape=False, relax=True)
            else:
                unset.append(name)
            continue
        out.append(replace_env(word, env, unset, bad))
    return out, sorted(set(unset)), sorted(set(bad))


# ---------------------------------------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------------------------------------


def parse_bool(text, where):
    lowered = text.lower()
    if lowered in ("1", "yes", "y", "true", "t", "on"):
        return True
    if lowered in ("0", "no", "n", "false", "f", "off"):
        return False
    raise UnitError(f"{where}: not a boolean: {text!r}")


TIME_UNITS = {
    "usec": 1e-6,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "msec": 1e-3,
    "ms": 1e-3,
    "seconds": 1,
    "second": 1,
    "sec": 1,
    "s": 1,
    "": 1,
    "minutes": 60,
    "minute": 60,
    "min": 60,
    "m": 60,
    "hours": 3600,
    "hour": 3600,
    "hr": 3600,
    "h": 3600,
    "days": 86400,
    "day": 86400,
    "d": 86400,
    "weeks": 604800,
    "week": 604800,
    "w": 604800,
    "months": 2629800,
    "month": 2629800,
    "M": 2629800,
    "years": 31557600,
    "year": 31557600,
    "y": 31557600,
}


def parse_timespan(text, where):
    """Seconds of a systemd time span ("90", "2min 30s", "1.5h"); None for infinity (or 0: no timeout)."""
    text = text.strip()
    if text == "infinity":
        return None
    total, i, n, seen = 0.0, 0, len(text), False
    while i < n:
        while i < n and text[i] in WHITESPACE:
            i += 1
        if i >= n:
            break
        j = i
        while j < n and (text[j].isdigit() or text[j] == "."):
            j += 1
        if j == i:
            raise UnitError(f"{where}: not a time span: {text!r}")
        number = float(text[i:j])
        while j < n and text[j] in WHITESPACE:
            j += 1
        k = j
        while k < n and not text[k].isdigit() and text[k] not in WHITESPACE:
            k += 1
        unit = text[j:k]
        if unit not in TIME_UNITS:
            raise UnitError(f"{where}: unknown time unit {unit!r} in {text!r}")
        total += number * TIME_UNITS[unit]
        seen, i = True, k
    if not seen:
        raise UnitError(f"{where}: not a time span: {text!r}")
    return None if total == 0 else total


def parse_rlimit_value(name, text, where):
    if text == "infinity":
        return resource.RLIM_INFINITY
    if name in BYTE_LIMITS:
        factors = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50, "E": 1 << 60}
        stripped = text.rstrip("B")
        if stripped and stripped[-1] in factors:
            try:
                return int(float(stripped[:-1]) * factors[stripped[-1]])
            except ValueError:
                pass
    if name in ("CPU", "RTTIME"):
        seconds = parse_timespan(text, where)
        if seconds is None:
            return resource.RLIM_INFINITY
        return int(seconds if name == "CPU" else seconds * 1e6)
    try:
        value = int(text)
    except ValueError as exc:
        raise UnitError(f"{where}: Limit{name}={text!r}: not a number") from exc
    if value < 0:
        raise UnitError(f"{where}: Limit{name}={text!r}: negative")
    return value


def signal_number(text, where):
    name = text.upper()
    if name.isdigit():
        return int(name)
    if not name.startswith("SIG"):
        name = "SIG" + name
    try:
        return int(getattr(signal.Signals, name))
    except AttributeError as exc:
        raise UnitError(f"{where}: unknown signal {text!r}") from exc


def signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def lookup_user(spec, where):
    try:
        return pwd.getpwuid(int(spec)) if spec.isdigit() else pwd.getpwnam(spec)
    except KeyError as exc:
        raise UnitError(
            f"{where}: User={spec}: no such user on this machine (systemd would fail with status=217/USER); "
            "create it first (the role does: system user, home the cache directory, shell /usr/sbin/nologin)"
        ) from exc


def lookup_group(spec, where):
    try:
        return grp.getgrgid(int(spec)) if spec.isdigit() else grp.getgrnam(spec)
    except KeyError as exc:
        raise UnitError(f"{where}: Group={spec}: no such group (systemd would fail with status=216/GROUP)") from exc


def locale_environment():
    """The locale systemd (PID 1) passes on: /etc/locale.conf, else Debian's /etc/default/locale, else C.UTF-8."""
    for path in ("/etc/locale.conf", "/etc/default/locale"):
        try:
            with open(path, encoding="utf-8") as f:
                pairs = [(k, v) for k, v in load_env_file_text(f.read(), path) if k in LOCALE_VARS and v]
        except (OSError, UnitError):
            continue
        if pairs:
            return pairs, path
    return [("LANG", DEFAULT_LOCALE)], "systemd's default locale"


CAP_SYS_RESOURCE = 24


def has_capability(bit):
    """Whether this process's effective capabilities hold the bit (/proc/self/status CapEff)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> bit & 1)
    except (OSError, ValueError):
        pass
    return os.geteuid() == 0


def _rlim(value):
    return float("inf") if value == resource.RLIM_INFINITY else value


def clamp_limits(limits):
    """Limits lowered to this machine's hard limits: ({name: [soft, hard]}, [what was lowered])."""
    clamped, notes = {}, []
    for name, (soft, hard) in limits.items():
        current = resource.getrlimit(getattr(resource, RLIMITS[name]))[1]
        new_hard = current if _rlim(hard) > _rlim(current) else hard
        new_soft = new_hard if _rlim(soft) > _rlim(new_hard) else soft
        if (new_soft, new_hard) != (soft, hard):
            notes.append(
                f"Limit{name}={limit_text(soft)}:{limit_text(hard)} lowered to "
                f"{limit_text(new_soft)}:{limit_text(new_hard)}"
            )
        clamped[name] = [new_soft, new_hard]
    return clamped, notes


def find_executable(path):
    if path.startswith("/"):
        return path
    for d in MANAGER_PATH.split(":"):
        candidate = os.path.join(d, path)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


# ---------------------------------------------------------------------------------------------------------
# the plan: what would be started, and how
# ---------------------------------------------------------------------------------------------------------


PREFIX_MEANING = {
    "@": "a separate argv[0]",
    ":": "no environment variable substitution",
    "+": "full privileges",
    "!": "no user/group change",
    "|": "a shell command line",
}


def parse_commands(unit, key):
    """The commands of every KEY= line (an empty one resets the list): path, argv before $VAR expansion,
    prefixes; specifiers resolved per word, as config_parse_exec() does."""
    commands = []
    for value, where in unit.values(key):
        if not value:
            commands = []
            continue
        for words in command_lines(value, where, unit.warnings):
            first, ignore_failure, prefixes = words[0], False, ""
            while first and first[0] in "-@:+!|":
                if first[0] == "-" and ignore_failure:  # a second '-' belongs to the path
                    break
                prefixes += first[0]
                if first[0] != "-":
                    raise UnitError(
                        f"{where}: {key}= prefix {first[0]!r} ({PREFIX_MEANING[first[0]]}) is not supported by this "
                        "runner; only '-' is"
                    )
                ignore_failure, first = True, first[1:]
            path = unit.specifiers(first, where)
            if not path:
                raise UnitError(f"{where}: empty executable path in {key}={value!r}")
            if path.endswith("/") or ("/" in path and not path.startswith("/")):
                raise UnitError(f"{where}: neither an absolute path nor a bare file name: {path!r}")
            argv = [path] + [unit.specifiers(w, where) for w in words[1:]]
            commands.append(
                {
                    "where": where,
                    "path": path,
                    "argv_template": argv,
                    "ignore_failure": ignore_failure,
                    "prefixes": prefixes,
                }
            )
    return commands


def plan(unit_file, instance):
    """Everything start needs, resolved now (EnvironmentFile= read now, as systemd reads it at start)."""
    unit = Unit(unit_file, instance)
    warnings = unit.warnings
    spec = unit.specifiers

    for key in REFUSED:
        found = [v for v, _ in unit.values(key) if v]
        if found:
            raise UnitError(f"{unit.name}: {key}= is set ({found[-1]!r}); this runner starts ExecStart= only")
    type_, where = unit.last("Type", "simple")
    if type_ not in ("simple", "exec"):
        raise UnitError(f"{where}: Type={type_}: only simple and exec are supported")

    pre = parse_commands(unit, "ExecStartPre")
    main = parse_commands(unit, "ExecStart")
    if not main:
        raise UnitError(f"{unit.name}: no ExecStart=")
    if len(main) > 1:
        raise UnitError(f"{main[1]['where']}: more than one ExecStart= command (only Type=oneshot may have several)")
    main = main[0]

    # the user
    user_spec, user_where = unit.last("User", "")
    user_spec = spec(user_spec, user_where) if user_spec else ""
    group_spec, group_where = unit.last("Group", "")
    group_spec = spec(group_spec, group_where) if group_spec else ""
    entry = lookup_user(user_spec, user_where) if user_spec else pwd.getpwuid(0)
    gid = lookup_group(group_spec, group_where).gr_gid if group_spec else entry.pw_gid
    supplementary = []
    for value, where in unit.values("SupplementaryGroups"):
        if not value:
            supplementary = []
            continue
        supplementary += [lookup_group(spec(g, where), where).gr_gid for g in extract_words(value, where, warnings)]
    groups = os.getgrouplist(entry.pw_name, gid) if user_spec else [gid]
    groups = list(dict.fromkeys(groups + supplementary))

    # the environment, in systemd's order
    env, origin = {}, {}

    def put(name, val, src):
        env[name] = val
        origin[name] = src

    put("PATH", MANAGER_PATH, "the service manager")
    locale, locale_src = locale_environment()
    for k, v in locale:
        put(k, v, locale_src)
    login_env_value, login_where = unit.last("SetLoginEnvironment", "")
    login_env = parse_bool(login_env_value, login_where) if login_env_value else bool(user_spec)
    put("USER", entry.pw_name, "User=" if user_spec else "the service manager (root)")
    if login_env:
        put("LOGNAME", entry.pw_name, "User= (passwd)")
        if entry.pw_dir and entry.pw_dir.rstrip("/"):
            put("HOME", os.path.normpath(entry.pw_dir), "User= (passwd)")
        if entry.pw_shell and entry.pw_shell not in NOLOGIN:
            put("SHELL", os.path.normpath(entry.pw_shell), "User= (passwd)")

    unit_env = []  # Environment=, with resets
    for value, where in unit.values("Environment"):
        if not value:
            unit_env = []
            continue
        for word in extract_words(value, where, warnings):
            resolved = spec(word, where)
            if not env_assignment_is_valid(resolved):
                warnings.append(f"{where}: invalid environment assignment, ignoring: {resolved!r}")
                continue
            unit_env.append((resolved, where))
    for assignment, where in unit_env:
        name, _, val = assignment.partition("=")
        put(name, val, f"Environment= ({where})")

    env_files = []
    for value, where in unit.values("EnvironmentFile"):
        if not value:
            env_files = []
            continue
        optional = value.startswith("-")
        pattern = spec(value[1:] if optional else value, where)
        env_files.append((pattern, optional, where))
    files_read = []
    for pattern, optional, where in env_files:
        if not pattern.startswith("/"):
            if optional:
                warnings.append(f"{where}: EnvironmentFile={pattern} is not absolute, ignored ('-')")
                continue
            raise UnitError(f"{where}: EnvironmentFile={pattern}: not an absolute path")
        matches = sorted(glob.glob(pattern))
        if not matches:
            if optional:
                warnings.append(f"{where}: EnvironmentFile=-{pattern}: no such file, ignored ('-')")
                continue
            raise UnitError(
                f"{where}: EnvironmentFile={pattern}: no such file (systemd: 'Failed to load environment files: "
                "No such file or directory'; prefix it with '-' if it may be missing)"
            )
        for path in matches:
            try:
                with open(path, encoding="utf-8", errors="surrogateescape") as f:
                    pairs = load_env_file_text(f.read(), path)
            except (OSError, UnitError) as exc:
                if optional:
                    warnings.append(f"{where}: EnvironmentFile=-{path}: {exc}, ignored ('-')")
                    continue
                raise UnitError(f"{where}: EnvironmentFile={path}: {getattr(exc, 'strerror', None) or exc}") from exc
            files_read.append(path)
            for name, val in pairs:
                if not env_assignment_is_valid(f"{name}={val}"):
                    warnings.append(f"{path}: invalid environment assignment, ignoring: {name}={val!r}")
                    continue
                put(name, val, f"EnvironmentFile={path}")

    for value, where in unit.values("UnsetEnvironment"):  # a name, or NAME=VALUE: only that assignment
        for word in extract_words(value, where, warnings):
            name, eq, val = spec(word, where).partition("=")
            if name in env and (not eq or env[name] == val):
                del env[name]
                origin[name] = f"unset by UnsetEnvironment= ({where})"

    credentials = {}  # LoadCredential=ID:PATH; a later one for the same ID wins, an empty one resets
    for value, where in unit.values("LoadCredential"):
        if not value:
            credentials = {}
            continue
        cred_id, colon, path = spec(value, where).partition(":")
        if not cred_id or "/" in cred_id or not colon or not path.startswith("/"):
            raise UnitError(f"{where}: LoadCredential={value}: this runner reads ID:/absolute/path only")
        credentials[cred_id] = path
    if credentials:
        cred_dir = os.path.join(os.environ.get("GPULXC_UNITS_CREDENTIALS_DIR", DEFAULT_CREDENTIALS_DIR), unit.name)
        put("CREDENTIALS_DIRECTORY", cred_dir, "LoadCredential=")

    # $VAR expansion of each command, at start, in the final environment
    for command in [*pre, main]:
        command["argv"], unset, bad = replace_env_argv(command.pop("argv_template"), env)
        for name in unset:
            warnings.append(
                f"{command['where']}: referenced but unset environment variable evaluates to an empty string: {name}"
            )
        for name in bad:
            warnings.append(
                f"{command['where']}: invalid environment variable name evaluates to an empty string: {name}"
            )
        command["executable"] = executable = find_executable(command["path"])
        if executable is None:
            warnings.append(
                f"{command['where']}: {command['path']} not found in {MANAGER_PATH} (start would fail "
                "with status=203/EXEC)"
            )
        elif not os.path.exists(executable):
            warnings.append(
                f"{command['where']}: {executable} does not exist here (start would fail with status=203/EXEC)"
            )
        elif not (os.path.isfile(executable) and os.access(executable, os.X_OK)):
            warnings.append(
                f"{command['where']}: {executable} is not an executable file here (status=203/EXEC at start)"
            )

    # the working directory
    wd_value, wd_where = unit.last("WorkingDirectory", "")
    cwd, cwd_missing_ok = "/", False
    if wd_value:
        if wd_value.startswith("-"):
            cwd_missing_ok, wd_value = True, wd_value[1:]
        cwd = entry.pw_dir if wd_value == "~" else spec(wd_value, wd_where)
        if not cwd.startswith("/"):
            raise UnitError(f"{wd_where}: WorkingDirectory={cwd}: not an absolute path (or ~)")
        if not os.path.isdir(cwd):
            warnings.append(
                f"{wd_where}: WorkingDirectory={cwd} does not exist"
                + (" (ignored: '-')" if cwd_missing_ok else " (start would fail with status=200/CHDIR)")
            )

    umask_value, umask_where = unit.last("UMask", "0022")
    try:
        umask = int(umask_value, 8)
    except ValueError as exc:
        raise UnitError(f"{umask_where}: UMask={umask_value!r}: not an octal mode") from exc
    limits = {}
    for name in RLIMITS:
        value, where = unit.last("Limit" + name, "")
        if not value:
            continue
        soft, _, hard = value.partition(":")
        soft_v = parse_rlimit_value(name, soft, where)
        limits[name] = (soft_v, parse_rlimit_value(name, hard, where) if hard else soft_v)
    can_raise = has_capability(CAP_SYS_RESOURCE)
    for name, (soft_v, hard_v) in limits.items():
        current = resource.getrlimit(getattr(resource, RLIMITS[name]))[1]
        if not can_raise and _rlim(hard_v) > _rlim(current):
            warnings.append(
                f"Limit{name}={limit_text(soft_v)}:{limit_text(hard_v)} is above this machine's hard limit "
                f"{limit_text(current)} and there is no CAP_SYS_RESOURCE here to raise it: systemd would fail with "
                "status=205/LIMITS here too (start --clamp-limits lowers it to the hard limit)"
            )
    nnp_value, nnp_where = unit.last("NoNewPrivileges", "no")
    no_new_privs = parse_bool(nnp_value, nnp_where) if nnp_value else False

    kill_mode, km_where = unit.last("KillMode", "control-group")
    if kill_mode not in ("control-group", "mixed", "process", "none"):
        raise UnitError(f"{km_where}: KillMode={kill_mode}: unknown")
    ks_value, ks_where = unit.last("KillSignal", "SIGTERM")
    kill_signal = signal_number(ks_value, ks_where)
    sk_value, sk_where = unit.last("SendSIGKILL", "yes")
    send_sigkill = parse_bool(sk_value, sk_where)
    timeout_stop = timeout_start = DEFAULT_TIMEOUT_STOP
    for key in ("TimeoutSec", "TimeoutStopSec", "TimeoutStartSec"):  # the specific ones win over TimeoutSec=
        value, where = unit.last(key, "")
        if value:
            if key != "TimeoutStartSec":
                timeout_stop = parse_timespan(value, where)
            if key != "TimeoutStopSec":
                timeout_start = parse_timespan(value, where)
    success_codes, success_signals = [0], [signal_number(s, "") for s in CLEAN_SIGNALS]
    for value, where in unit.values("SuccessExitStatus"):
        if not value:
            continue
        for word in extract_words(value, where, warnings):
            if word.isdigit() and int(word) <= 255:
                success_codes.append(int(word))
            else:
                try:
                    success_signals.append(signal_number(word, where))
                except UnitError:
                    warnings.append(f"{where}: SuccessExitStatus={word}: neither an exit code nor a signal, ignored")

    description, d_where = unit.last("Description", "", section="Unit")
    not_applied = [f"{k}={v}" for (sec, k, v, _) in unit.items if sec == "Service" and k not in APPLIED]
    return {
        "unit": unit.name,
        "fragment": unit.fragment,
        "dropins": unit.dropins,
        "description": spec(description, d_where) if description else "",
        "type": type_,
        "user": entry.pw_name,
        "uid": entry.pw_uid,
        "gid": gid,
        "group": _group_name(gid),
        "groups": groups,
        "user_set": bool(user_spec),
        "home": entry.pw_dir,
        "cwd": cwd,
        "cwd_missing_ok": cwd_missing_ok,
        "umask": umask,
        "limits": {k: list(v) for k, v in limits.items()},
        "no_new_privileges": no_new_privs,
        "path": main["path"],
        "executable": main["executable"],
        "argv": main["argv"],
        "ignore_failure": main["ignore_failure"],
        "prefixes": main["prefixes"],
        "exec_start_pre": pre,
        "timeout_start": timeout_start,
        "environment": env,
        "environment_origin": {k: origin[k] for k in env},
        "environment_files": files_read,
        "credentials": credentials,
        "kill_mode": kill_mode,
        "kill_signal": kill_signal,
        "send_sigkill": send_sigkill,
        "timeout_stop": timeout_stop,
        "success_codes": sorted(set(success_codes)),
        "success_signals": sorted(set(success_signals)),
        "not_applied": not_applied,
        "warnings": warnings,
    }


def _group_name(gid):
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def limit_text(value):
    return "infinity" if value == resource.RLIM_INFINITY else str(value)


def show_text(p):
    lines = [
        f"unit:        {p['unit']}" + (f" - {p['description']}" if p["description"] else ""),
        f"fragment:    {p['fragment']}" + (f" (drop-ins: {', '.join(p['dropins'])})" if p["dropins"] else ""),
        f"type:        {p['type']}",
        f"user:        {p['user']} (uid {p['uid']}), group {p['group']} (gid {p['gid']}), "
        f"groups {' '.join(map(str, p['groups']))}" + ("" if p["user_set"] else "  [no User=: root]"),
        f"cwd:         {p['cwd']}" + (" (missing is ok)" if p["cwd_missing_ok"] else ""),
        f"umask:       {p['umask']:04o}",
        "limits:      "
        + (" ".join(f"{k}={limit_text(s)}:{limit_text(h)}" for k, (s, h) in p["limits"].items()) or "-"),
        f"no_new_privs: {'yes' if p['no_new_privileges'] else 'no'}",
        f"executable:  {p['executable'] or p['path'] + ' (not found)'}"
        + (f"  [prefix {p['prefixes']}: failure ignored]" if p["ignore_failure"] else ""),
        f"argv:        {json.dumps(p['argv'])}",
        f"command:     {shlex.join(p['argv'])}",
    ]
    for command in p["exec_start_pre"]:
        lines.append(
            f"start-pre:   {shlex.join(command['argv'])}"
            + ("  [prefix -: failure ignored]" if command["ignore_failure"] else "")
        )
    start = "infinity" if p["timeout_start"] is None else f"{p['timeout_start']:g}s"
    lines.append(f"start:       TimeoutStartSec={start} (bounds ExecStartPre=)")
    lines.append(f"environment ({len(p['environment'])}):")
    for k, v in p["environment"].items():
        lines.append(f"  {k}={v}".ljust(60) + f"  # {p['environment_origin'][k]}")
    timeout = "infinity" if p["timeout_stop"] is None else f"{p['timeout_stop']:g}s"
    lines.append(
        f"stop:        KillMode={p['kill_mode']} KillSignal={signal_name(p['kill_signal'])} TimeoutStopSec={timeout} "
        f"SendSIGKILL={'yes' if p['send_sigkill'] else 'no'}"
    )
    lines.append(
        "success:     exit "
        + " ".join(map(str, p["success_codes"]))
        + ", signals "
        + " ".join(signal_name(s) for s in p["success_signals"])
    )
    if p["not_applied"]:
        lines.append("not applied (no systemd here): " + "; ".join(p["not_applied"]))
    for w in p["warnings"]:
        lines.append(f"warning: {w}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------
# processes
# ---------------------------------------------------------------------------------------------------------


def proc_stat(pid):
    """(state, ppid, session, starttime) of a live process, or None (gone, or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rindex(")") + 2 :].split()
    state = fields[0]
    if state in ("Z", "X"):
        return None
    return state, int(fields[1]), int(fields[3]), int(fields[19])


def alive(pid, starttime):
    st = proc_stat(pid) if pid else None
    return st is not None and (starttime is None or st[3] == starttime)


def descendants(root):
    """Live descendants of root (by /proc's parent links), root excluded."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = proc_stat(int(entry))
            if st:
                children.setdefault(st[1], []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def session_members(sid):
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = proc_stat(int(entry))
            if st and st[2] == sid:
                members.append(int(entry))
    return members


def unit_processes(state):
    """The unit's live processes: the supervisor's descendants (it is their subreaper), else the main
    process's session."""
    pids = set()
    if alive(state.get("supervisor_pid"), state.get("supervisor_start")):
        pids.update(descendants(state["supervisor_pid"]))
    if state.get("main_pid"):
        pids.update(session_members(state["main_pid"]))
        if alive(state["main_pid"], state.get("main_start")):
            pids.add(state["main_pid"])
    pids.discard(state.get("supervisor_pid"))
    pids.discard(os.getpid())
    return sorted(pids)


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return "?"


def kill_all(pids, sig):
    killed = []
    for pid in pids:
        try:
            os.kill(pid, sig)
            killed.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return killed


def describe_exit(status):
    """systemd's words for a wait status: (code, status, text)."""
    if os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
        return "exited", code, f"code=exited, status={code}"
    sig = os.WTERMSIG(status)
    kind = "dumped" if os.WCOREDUMP(status) else "killed"
    return kind, sig, f"code={kind}, status={sig}/{signal_name(sig).removeprefix('SIG')}"


def result_of(state):
    """systemd's Result= for an exited main process: success, exit-code, signal or core-dump."""
    code, value = state["exit_code"], state["exit_status"]
    ok = value in (state["success_codes"] if code == "exited" else state["success_signals"])
    if ok or state.get("ignore_failure"):
        return "success"
    return {"exited": "exit-code", "killed": "signal", "dumped": "core-dump"}[code]


# ---------------------------------------------------------------------------------------------------------
# state files
# ---------------------------------------------------------------------------------------------------------


def run_paths(run_dir, unit_name):
    stem = unit_name[: -len(".service")]
    return {k: os.path.join(run_dir, f"{stem}.{k}") for k in ("pid", "json", "log", "stop")}


def write_json(path, data):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


def read_state(paths):
    try:
        with open(paths["json"], encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def running(state):
    return bool(state) and state.get("exit_code") is None and alive(state.get("main_pid"), state.get("main_start"))


def log_line(fd_or_path, text):
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} unit_runner[{os.getpid()}]: {text}\n".encode()
    try:
        if isinstance(fd_or_path, int):
            os.write(fd_or_path, line)
        else:
            with open(fd_or_path, "ab") as f:
                f.write(line)
    except OSError:
        pass


# ---------------------------------------------------------------------------------------------------------
# start
# ---------------------------------------------------------------------------------------------------------


def _prctl(option, value):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36


def _exec_child(p, command, log_fd, err_w):
    """In a new process of the unit: systemd's exec steps, then execve(); on failure report and _exit."""
    stage = "SIGNAL_MASK"
    try:
        for sig in range(1, signal.NSIG):
            if sig not in (signal.SIGKILL, signal.SIGSTOP):
                with contextlib.suppress(OSError, ValueError):
                    signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        stage = "SETSID"
        os.setsid()
        stage = "FDS"
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.closerange(3, err_w)
        os.closerange(err_w + 1, 1 << 16)
        stage = "LIMITS"
        for name, (soft, hard) in p["limits"].items():
            resource.setrlimit(getattr(resource, RLIMITS[name]), (soft, hard))
        os.umask(p["umask"])
        stage = "GROUP"
        if p["user_set"]:
            os.initgroups(p["user"], p["gid"])
            extra = [g for g in p["groups"] if g not in os.getgroups()]
            if extra:
                os.setgroups(os.getgroups() + extra)
        else:
            os.setgroups([g for g in p["groups"] if g != p["gid"]])
        os.setresgid(p["gid"], p["gid"], p["gid"])
        stage = "USER"
        os.setresuid(p["uid"], p["uid"], p["uid"])
        stage = "NO_NEW_PRIVILEGES"
        if p["no_new_privileges"]:
            _prctl(PR_SET_NO_NEW_PRIVS, 1)
        stage = "CHDIR"  # after the user change, as systemd does (the directory may be the user's only)
        try:
            os.chdir(p["cwd"])
        except FileNotFoundError:
            if not p["cwd_missing_ok"]:
                raise
            os.chdir("/")
        stage = "EXEC"
        executable = find_executable(command["path"])
        if executable is None:
            raise FileNotFoundError(2, f"{command['path']} not found in {MANAGER_PATH}")
        os.execve(executable, command["argv"], p["environment"])
    except BaseException as exc:  # anything before execve() is reported to the parent
        errno_ = getattr(exc, "errno", 0) or 0
        message = f"{stage}\0{errno_}\0{exc}".encode("utf-8", "replace")
        try:
            os.write(err_w, message)
        finally:
            os._exit(EXIT.get(stage, 1))


def _spawn(p, command, log_fd):
    """Fork a process of the unit running command: (pid, None) once execve() succeeded, else (pid, failure)."""
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        os.close(err_r)
        _exec_child(p, command, log_fd, err_w)
    os.close(err_w)
    report = b""
    while chunk := os.read(err_r, 4096):
        report += chunk
    os.close(err_r)
    if not report:
        return pid, None
    stage, errno_, message = report.decode("utf-8", "replace").split("\0", 2)
    return pid, {"stage": stage, "errno": int(errno_), "message": message, "status": EXIT.get(stage, 1)}


def load_credentials(p):
    """systemd's LoadCredential=: the files copied into a fresh directory only the unit's user can read."""
    if not p["credentials"]:
        return
    directory = p["environment"]["CREDENTIALS_DIRECTORY"]
    staging = directory + ".new"
    if os.path.isdir(staging):
        for name in os.listdir(staging):
            os.unlink(os.path.join(staging, name))
        os.rmdir(staging)
    os.makedirs(os.path.dirname(directory), mode=0o755, exist_ok=True)
    os.mkdir(staging, 0o700)
    for cred_id, path in p["credentials"].items():
        with open(path, "rb") as source:
            data = source.read()
        target = os.path.join(staging, cred_id)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o400)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chown(target, p["uid"], p["gid"])
    os.chown(staging, p["uid"], p["gid"])
    os.chmod(staging, 0o500)
    if os.path.isdir(directory):
        for name in os.listdir(directory):
            os.unlink(os.path.join(directory, name))
        os.rmdir(directory)
    os.rename(staging, directory)


def remove_credentials(p):
    """systemd removes a unit's credentials directory once the unit is dead."""
    directory = p["environment"].get("CREDENTIALS_DIRECTORY") if p["credentials"] else None
    if directory and os.path.isdir(directory):
        for name in os.listdir(directory):
            os.unlink(os.path.join(directory, name))
        os.rmdir(directory)


class Supervisor:
    """The parent of the unit's processes (their subreaper too), from the first ExecStartPre= to the end."""

    def __init__(self, p, paths, log_fd, status_w, no_block):
        self.p, self.paths, self.log_fd, self.status_w, self.no_block = p, paths, log_fd, status_w, no_block
        me = proc_stat(os.getpid())
        self.state = {
            "unit": p["unit"],
            "fragment": p["fragment"],
            "argv": p["argv"],
            "user": p["user"],
            "cwd": p["cwd"],
            "phase": "start-pre" if p["exec_start_pre"] else "start",
            "control_pid": None,
            "control_start": None,
            "main_pid": None,
            "main_start": None,
            "supervisor_pid": os.getpid(),
            "supervisor_start": me[3] if me else None,
            "started_at": time.time(),
            "log": paths["log"],
            "kill_mode": p["kill_mode"],
            "kill_signal": p["kill_signal"],
            "send_sigkill": p["send_sigkill"],
            "timeout_stop": p["timeout_stop"],
            "timeout_start": p["timeout_start"],
            "success_codes": p["success_codes"],
            "success_signals": p["success_signals"],
            "ignore_failure": p["ignore_failure"],
            "exit_code": None,
            "exit_status": None,
            "exited_at": None,
            "result": None,
            "finished": False,
        }

    def log(self, text):
        log_line(self.log_fd, f"{self.p['unit']}: {text}")

    def save(self, **changes):
        self.state.update(changes)
        write_json(self.paths["json"], self.state)

    def notify(self, message):
        """Tell the waiting `start` how it went (once)."""
        if self.status_w is not None:
            os.write(self.status_w, json.dumps(message).encode())
            os.close(self.status_w)
            self.status_w = None

    def stop_requested(self):
        return os.path.exists(self.paths["stop"])

    def wait(self, pid, deadline):
        """Reap children until pid exits (its wait status) or the deadline passes (None)."""
        while True:
            try:
                reaped, status = os.waitpid(-1, os.WNOHANG if deadline is not None else 0)
            except ChildProcessError:
                return 0
            if reaped == pid:
                return status
            if reaped == 0:
                if time.monotonic() >= deadline:
                    return None
                time.sleep(0.05)

    def finish(self, result, message=None):
        """Kill what is left per KillMode= (systemd's final SIGTERM/SIGKILL of the cgroup), record, exit."""
        p = self.p
        left = unit_processes(self.state)
        killed = []
        if left and p["kill_mode"] == "mixed" and p["send_sigkill"]:
            killed = kill_all(left, signal.SIGKILL)
        elif left and p["kill_mode"] == "control-group":
            killed = kill_all(left, p["kill_signal"])
            deadline = None if p["timeout_stop"] is None else time.monotonic() + p["timeout_stop"]
            while unit_processes(self.state) and (deadline is None or time.monotonic() < deadline):
                _reap_some()
                time.sleep(0.1)
            if unit_processes(self.state) and p["send_sigkill"]:
                kill_all(unit_processes(self.state), signal.SIGKILL)
        if killed:
            self.log(f"killed the {len(killed)} processes left behind (KillMode={p['kill_mode']}): {killed}")
        deadline = time.monotonic() + 30
        while (
            p["kill_mode"] in ("mixed", "control-group") and unit_processes(self.state) and time.monotonic() < deadline
        ):
            _reap_some()
            time.sleep(0.05)
        _reap_some()
        remove_credentials(p)
        self.save(result=result, left_behind=left, finished=True, finished_at=time.time(), phase="dead")
        if message is not None:
            self.notify(message)
        for path in (self.paths["pid"], self.paths["stop"]):
            with contextlib.suppress(OSError):
                os.unlink(path)
        os._exit(0)

    def start_deadline(self):
        t = self.p["timeout_start"]
        return None if t is None else time.monotonic() + t

    def run(self):
        p = self.p
        self.save()
        if self.no_block:
            self.notify({"ok": True, "pid": None, "no_block": True})
        deadline = self.start_deadline()
        try:
            load_credentials(p)
        except OSError as exc:
            self.log(f"failed to set up credentials: {exc}")
            self.finish(
                "resources",
                {
                    "ok": False,
                    "stage": "CREDENTIALS",
                    "status": EXIT["CREDENTIALS"],
                    "message": f"LoadCredential=: {exc}",
                },
            )
        for command in p["exec_start_pre"]:
            if self.stop_requested():
                self.log("stop requested during start-pre: ExecStart= not run")
                self.finish(
                    "canceled",
                    {"ok": False, "stage": "start-pre", "message": "stopped during start-pre", "status": None},
                )
            pid, failure = _spawn(p, command, self.log_fd)
            st = proc_stat(pid)
            self.save(control_pid=pid, control_start=st[3] if st else None)
            if failure:
                self.wait(pid, None)
                self.log(
                    f"ExecStartPre={shlex.join(command['argv'])} failed at step {failure['stage']}: "
                    f"{failure['message']}"
                )
                if not command["ignore_failure"]:
                    self.finish("exit-code", {"ok": False, **failure, "stage": "start-pre " + failure["stage"]})
                continue
            self.log(f"ExecStartPre: started control process {pid}: {shlex.join(command['argv'])}")
            status = self.wait(pid, None if deadline is None else deadline)
            if status is None:  # TimeoutStartSec= ran out: stop what runs (systemd: 'start-pre timed out')
                self.log(f"start-pre timed out after TimeoutStartSec={p['timeout_start']:g}s: terminating")
                kill_all(
                    [pid] if p["kill_mode"] in ("mixed", "process") else unit_processes(self.state), p["kill_signal"]
                )
                status = self.wait(pid, None if p["timeout_stop"] is None else time.monotonic() + p["timeout_stop"])
                if status is None and p["send_sigkill"]:
                    kill_all(unit_processes(self.state), signal.SIGKILL)
                    self.wait(pid, None)
                self.finish(
                    "timeout",
                    {
                        "ok": False,
                        "stage": "start-pre",
                        "status": None,
                        "message": f"TimeoutStartSec={p['timeout_start']:g}s ran out in ExecStartPre=",
                    },
                )
            code, value, text = describe_exit(status)
            clean = code == "exited" and value == 0  # SuccessExitStatus= is the main process's only
            self.log(f"control process {pid} exited, {text}")
            self.save(control_pid=None, control_start=None)
            if not clean and not command["ignore_failure"]:
                self.finish(
                    {"exited": "exit-code", "killed": "signal", "dumped": "core-dump"}[code],
                    {
                        "ok": False,
                        "stage": "start-pre",
                        "status": value,
                        "message": f"ExecStartPre={shlex.join(command['argv'])}: {text}",
                    },
                )
        if self.stop_requested():
            self.log("stop requested during start-pre: ExecStart= not run")
            self.finish(
                "canceled", {"ok": False, "stage": "start-pre", "message": "stopped during start-pre", "status": None}
            )
        main = {"path": p["path"], "argv": p["argv"]}
        pid, failure = _spawn(p, main, self.log_fd)
        if failure:
            self.wait(pid, None)
            self.log(f"failed at step {failure['stage']} spawning {p['path']}: {failure['message']}")
            self.log(f"main process exited, code=exited, status={failure['status']}/{failure['stage']}")
            self.save(main_pid=pid, exit_code="exited", exit_status=failure["status"], exited_at=time.time())
            self.finish("exit-code", {"ok": False, **failure})
        st = proc_stat(pid)
        self.save(main_pid=pid, main_start=st[3] if st else None, phase="running")
        with open(self.paths["pid"] + ".tmp", "w", encoding="utf-8") as f:
            f.write(f"{pid}\n")
        os.replace(self.paths["pid"] + ".tmp", self.paths["pid"])
        self.log(f"started main process {pid}: {shlex.join(p['argv'])}")
        self.notify({"ok": True, "pid": pid})
        status = self.wait(pid, None)
        code, value, text = describe_exit(status)
        self.save(exit_code=code, exit_status=value, exited_at=time.time())
        result = result_of(self.state)
        self.log(f"main process exited, {text}; result: {result}")
        self.finish(result)


def _supervise(p, paths, log_fd, status_w, no_block):
    os.setsid()
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    for fd in range(3, 1 << 12):  # nothing of the caller's (its pipes) stays open here
        if fd not in (log_fd, status_w):
            with contextlib.suppress(OSError):
                os.close(fd)
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
    Supervisor(p, paths, log_fd, status_w, no_block).run()


def _reap_some():
    while True:
        try:
            reaped, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if reaped == 0:
            return


def cmd_start(args):
    p = plan(args.unit_file, args.instance)
    for w in p["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    if args.clamp_limits and not has_capability(CAP_SYS_RESOURCE):
        p["limits"], notes = clamp_limits(p["limits"])
        for note in notes:
            print(f"warning: --clamp-limits: {note} (this machine's hard limit; no CAP_SYS_RESOURCE)", file=sys.stderr)
    if os.geteuid() != 0 and p["uid"] != os.geteuid():
        raise UnitError(f"{p['unit']}: starting it as User={p['user']} with its limits needs root")
    os.makedirs(args.run_dir, mode=0o755, exist_ok=True)
    paths = run_paths(args.run_dir, p["unit"])
    state = read_state(paths)
    if running(state):
        raise UnitError(f"{p['unit']} is already running (main PID {state['main_pid']}); stop it first")
    if busy(state):
        raise UnitError(f"{p['unit']} is {state['phase']} (supervisor {state['supervisor_pid']}); stop it first")
    log = os.path.abspath(args.log) if args.log else paths["log"]
    paths["log"] = log
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(paths["stop"])
    log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    status_r, status_w = os.pipe2(os.O_CLOEXEC)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(status_r)
        try:
            _supervise(p, paths, log_fd, status_w, args.no_block)
        finally:
            os._exit(1)
    os.close(status_w)
    os.close(log_fd)
    data = b""
    while chunk := os.read(status_r, 4096):
        data += chunk
    os.close(status_r)
    try:
        report = json.loads(data or b"{}")
    except ValueError:
        report = {}
    if not report:
        raise UnitError(f"{p['unit']}: the supervisor died before it started anything (see {log})")
    if not report["ok"]:
        status = f" (status={report['status']})" if report.get("status") is not None else ""
        print(
            f"{p['unit']}: failed to start: {report['stage']}{status}: {report['message']} (log {log})", file=sys.stderr
        )
        return 1
    if report.get("no_block"):
        print(f"{p['unit']}: starting (--no-block; ExecStartPre= first), state {paths['json']}, log {log}")
    else:
        print(f"{p['unit']}: started, main PID {report['pid']} (pidfile {paths['pid']}, log {log})")
    return 0


# ---------------------------------------------------------------------------------------------------------
# stop, status
# ---------------------------------------------------------------------------------------------------------


def busy(state):
    """Still starting (ExecStartPre=) or cleaning up: its supervisor is alive and has not finished."""
    return (
        bool(state) and not state.get("finished") and alive(state.get("supervisor_pid"), state.get("supervisor_start"))
    )


def _unit_name(args):
    return Unit(args.unit_file, args.instance).name


def cmd_stop(args):
    name = _unit_name(args)
    paths = run_paths(args.run_dir, name)
    state = read_state(paths)
    out = {"unit": name}
    if not running(state) and not busy(state):
        out.update(stopped=False, message=f"{name}: not running")
        if state and state.get("exit_code"):
            out["message"] += f" (last exit: {_exit_text(state)}, result: {state.get('result')})"
        _emit(args, out, out["message"])
        return 0
    with open(paths["stop"], "w", encoding="utf-8") as f:  # no further step of a start in progress
        f.write(f"{time.time()}\n")
    log = state.get("log") or paths["log"]
    timeout = args.timeout if args.timeout is not None else state["timeout_stop"]
    mode, sig = state["kill_mode"], state["kill_signal"]

    def targets():
        """(pid, starttime) of the main process, else of the control process (ExecStartPre=), else None."""
        current = read_state(paths) or state
        for key in ("main", "control"):
            pid, start = current.get(f"{key}_pid"), current.get(f"{key}_start")
            if pid and alive(pid, start):
                return key, pid, start
        return None

    t0 = time.monotonic()
    first = targets()
    what = first[0] + " process" if first else "nothing"
    log_line(
        log,
        f"{name}: stopping: {signal_name(sig)} to "
        + (
            f"the {what}"
            if mode in ("mixed", "process")
            else "every process of the unit"
            if mode == "control-group"
            else "nothing (KillMode=none)"
        ),
    )
    if first and mode in ("mixed", "process"):
        kill_all([first[1]], sig)
    elif mode == "control-group":
        kill_all(unit_processes(state), sig)
    timed_out = False
    while (current := targets()) is not None:
        if timeout is not None and time.monotonic() - t0 >= timeout:
            timed_out = True
            break
        if first and current[1] != first[1] and mode in ("mixed", "process"):  # start-pre ended, main started
            kill_all([current[1]], sig)
            first = current
        time.sleep(0.05)
    sigkilled = []
    if timed_out:
        log_line(
            log,
            f"{name}: stop-sigterm timed out after {timeout:g}s"
            + (": killing (SIGKILL)" if state["send_sigkill"] else "; SendSIGKILL=no: left running"),
        )
        if state["send_sigkill"]:
            current = targets()
            if mode == "process" and current:
                doomed = [current[1]]
            else:  # the main process last: once it dies the supervisor reaps the rest before this SIGKILL gets there
                doomed = sorted(unit_processes(state), key=lambda pid: current is not None and pid == current[1])
            sigkilled = kill_all(doomed, signal.SIGKILL)
            while targets() is not None and time.monotonic() - t0 < timeout + 30:
                time.sleep(0.05)
    main_gone = time.monotonic() - t0
    # the supervisor records the exit and kills what is left (KillMode=mixed: SIGKILL): wait for it
    deadline = time.monotonic() + 60
    final = read_state(paths) or state
    while not final.get("finished") and time.monotonic() < deadline:
        if not alive(state.get("supervisor_pid"), state.get("supervisor_start")):
            break
        time.sleep(0.05)
        final = read_state(paths) or state
    if not final.get("finished") and mode in ("mixed", "control-group"):  # no supervisor: do its part
        sigkilled += kill_all(unit_processes(final), signal.SIGKILL)
    total = time.monotonic() - t0
    left = unit_processes(final) if mode in ("mixed", "control-group") else []
    stopped = targets() is None
    out.update(
        stopped=stopped,
        main_pid=final.get("main_pid"),
        signal=signal_name(sig),
        timeout=timeout,
        timed_out=timed_out,
        sigkill_sent_to=sigkilled,
        main_exited_after=round(main_gone, 3),
        stop_took=round(total, 3),
        exit_code=final.get("exit_code"),
        exit_status=final.get("exit_status"),
        result=final.get("result"),
        left_behind_killed=final.get("left_behind", []),
        still_running=left,
    )
    exit_text = _exit_text(final) if final.get("exit_code") else "no main process exit recorded"
    message = (
        f"{name}: {signal_name(sig)} to the {what}"
        + (f" (PID {first[1]})" if first else "")
        + (f"; TimeoutStopSec={timeout:g}s ran out: SIGKILL to {len(sigkilled)} processes" if timed_out else "")
        + f"; gone after {main_gone:.2f} s: {exit_text}; stop took {total:.2f} s; "
        + f"result: {final.get('result') or 'unknown'}"
        + (f"; killed {len(final.get('left_behind', []))} left behind" if final.get("left_behind") else "")
        + (f"; STILL RUNNING: {left}" if left else "")
    )
    log_line(log, message)
    _emit(args, out, message)
    return 0 if stopped and not left else 1


def _exit_text(state):
    code, value = state["exit_code"], state["exit_status"]
    if code == "exited":
        return f"code=exited, status={value}"
    return f"code={code}, status={value}/{signal_name(value).removeprefix('SIG')}"


def _emit(args, data, text):
    print(json.dumps(data, indent=1) if getattr(args, "json", False) else text)


def cmd_status(args):
    name = _unit_name(args)
    paths = run_paths(args.run_dir, name)
    state = read_state(paths)
    active = running(state)
    out = {"unit": name, "active": active, "activating": busy(state) and not active, "state": state}
    lines = [f"{name}"]
    if not state:
        lines.append("   Active: inactive (dead), never started here")
    elif active or busy(state):
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(state["started_at"]))
        word = "active (running)" if active else f"activating ({state.get('phase')})"
        lines.append(f"   Active: {word} since {since}; {time.time() - state['started_at']:.0f} s ago")
        if state.get("main_pid"):
            lines.append(f" Main PID: {state['main_pid']} (supervisor {state['supervisor_pid']})")
        if state.get("control_pid"):
            lines.append(f"  Process: {state['control_pid']} (ExecStartPre=)")
        procs = unit_processes(state)
        out["processes"] = {pid: cmdline(pid) for pid in procs}
        lines.append(f"    Tasks: {len(procs)}")
        lines += [f"           {pid} {cmdline(pid)[:150]}" for pid in procs]
    else:
        when = state.get("exited_at") or state.get("finished_at")
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when)) if when else "?"
        result = state.get("result")
        word = "inactive (dead)" if result == "success" else f"failed (Result: {result})"
        detail = f"main PID {state['main_pid']}: {_exit_text(state)}" if state.get("exit_code") else "no main process"
        lines.append(f"   Active: {word} since {since}; {detail}")
    log = (state or {}).get("log") or paths["log"]
    lines.append(f"      Log: {log}")
    if args.lines and os.path.exists(log):
        with open(log, "rb") as f:
            f.seek(max(0, os.path.getsize(log) - 64 * 1024))
            tail = f.read().decode("utf-8", "replace").splitlines()[-args.lines :]
        lines += ["  " + t for t in tail]
    _emit(args, out, "\n".join(lines))
    return 0 if active else 3


def cmd_show(args):
    p = plan(args.unit_file, args.instance)
    if args.json:
        print(json.dumps(p, indent=1))
    else:
        print(show_text(p))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--run-dir",
        default=os.environ.get("GPULXC_UNITS_RUN_DIR", DEFAULT_RUN_DIR),
        help="pidfiles, state and default logs (default: %(default)s)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("show", "start", "stop", "status"):
        p = sub.add_parser(name)
        p.add_argument("unit_file")
        p.add_argument("instance", nargs="?")
        if name in ("show", "stop", "status"):
            p.add_argument("--json", action="store_true")
        if name == "start":
            p.add_argument("--log", help="stdout and stderr, appended (default: RUN_DIR/NAME.log)")
            p.add_argument(
                "--clamp-limits",
                action="store_true",
                help="lower Limit*= values above the hard limits where they cannot be raised (no "
                "CAP_SYS_RESOURCE, as on the lent GPU machine), saying so, instead of failing with "
                "205/LIMITS",
            )
            p.add_argument(
                "--no-block",
                action="store_true",
                help="return at once, not after ExecStartPre= and the execve() of ExecStart=",
            )
        if name == "stop":
            p.add_argument("--timeout", type=float, help="seconds before SIGKILL (default: TimeoutStopSec=)")
        if name == "status":
            p.add_argument("--lines", "-n", type=int, default=10, help="log lines shown (default: 10)")
    args = parser.parse_args(argv)
    try:
        return {"show": cmd_show, "start": cmd_start, "stop": cmd_stop, "status": cmd_status}[args.command](args)
    except UnitError as exc:
        print(f"unit_runner: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
