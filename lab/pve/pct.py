"""The lab's `pct` (installed at /usr/sbin/pct): Proxmox's container CLI over real LXC.

Lab stand-in (test infrastructure), modelled on pve-container's src/PVE/CLI/pct.pm and
PVE::LXC::Config. It keeps /etc/pve/nodes/<node>/lxc/<vmid>.conf in Proxmox's format, applies
changes to a running CT the way Proxmox does (hot-pluggable now, the rest in [pve:pending]) and
refuses what Proxmox refuses, with its messages. Errors go to stderr; the exit code is the one real
pct gives (see PctError).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from . import config as pveconf
from . import hotplug as hotplug_rules
from . import lxc, schema, storage
from .config import ConfigError

PVE_DIR = Path("/etc/pve")
LOCK_DIR = Path("/run/lock/lxc")
LOCK_TIMEOUT = 10  # PVE::AbstractConfig lock_config: lock_config_full($vmid, 10, ...)
# Perl's die exits with $! when it is set, else ($? >> 8), else 255. pct's refusals are dies that are
# never caught (run_cli_handler), so they exit with whatever errno is left: ENOENT (2) for
# get_device_mode_and_rdev's "Device ... does not exist" (it dies right after the failed stat) and,
# taken here for every other refusal, the errno module loading leaves. A task (create, start, stop,
# shutdown, reboot, destroy) that fails in its worker exits through $upid_exit: exit(-1) = 255, as does
# the CLI's usage abort.
EXIT_DIE = 2
EXIT_TASK = 255
# The environment pct exec gives lxc-attach: run_cli_handler sets PATH, clean_environment drops these.
EXEC_PATH = "/sbin:/bin:/usr/sbin:/usr/bin"
EXEC_UNSET = ("SSL_CERT_FILE", "SSL_CERT_DIR")


class PctError(Exception):
    """A refusal pct prints to stderr before exiting with `code` (a die: EXIT_DIE; a task: EXIT_TASK)."""

    def __init__(self, message: str, code: int = EXIT_DIE):
        super().__init__(message)
        self.code = code


class TaskError(PctError):
    """A failure inside a task's worker (printed as TASK ERROR's text, exit 255)."""

    def __init__(self, message: str):
        super().__init__(message, EXIT_TASK)


def nodename() -> str:
    return socket.gethostname().split(".")[0]


def conf_rel(vmid: int) -> str:
    return f"nodes/{nodename()}/lxc/{vmid}.conf"


def conf_path(vmid: int) -> Path:
    return PVE_DIR / conf_rel(vmid)


def lock_path(vmid: int) -> Path:
    return LOCK_DIR / f"pve-config-{vmid}.lock"


@contextlib.contextmanager
def config_lock(vmid: int, timeout: float = LOCK_TIMEOUT):
    """PVE::Tools::lock_file_full: open the lock file for append, flock it exclusively (trying again for
    `timeout` seconds, saying so on stderr), run the code, unlock."""
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    path = lock_path(vmid)
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            sys.stderr.write("trying to acquire lock...\n")
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        sys.stderr.write(" failed\n")
                        raise PctError(f"can't lock file '{path}' - got timeout") from None
                    time.sleep(0.05)
            sys.stderr.write(" OK\n")
        yield


def check_lock(conf: dict) -> None:
    """PVE::AbstractConfig check_lock."""
    lock = conf["main"]["keys"].get("lock")
    if lock:
        raise PctError(f"CT is locked ({lock})")


def load(vmid: int) -> dict:
    path = conf_path(vmid)
    if not path.exists():
        raise PctError(f"Configuration file '{conf_rel(vmid)}' does not exist")
    return pveconf.parse(path.read_text())


def save(vmid: int, conf: dict) -> None:
    """Write the config as PVE::Cluster cfs_write_file does (PVE::File::file_set_contents): into
    <file>.tmp.<pid> in the same directory, renamed over the config (no chmod: pmxcfs refuses it).
    Only ever called under config_lock (the caller holds it)."""
    path = conf_path(vmid)
    temporary = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    try:
        with open(temporary, "w") as handle:
            handle.write(pveconf.write(conf))
        os.rename(temporary, path)
    finally:
        if temporary.exists():
            temporary.unlink()


# --- option parsing (PVE::JSONSchema get_options: Getopt::Long, prefix -- or -) ----------------


def parse_options(args: list[str], allowed: dict[str, str], command: str) -> tuple[list[str], dict[str, str]]:
    """Split args into positionals and options; `allowed` maps option name -> 'bool'|'str'|'config'."""
    positional: list[str] = []
    options: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            positional.extend(args[i:])
            break
        if arg.startswith("-") and len(arg) > 1 and not re.fullmatch(r"-\d+", arg):
            name = arg.lstrip("-")
            value = None
            if "=" in name:
                name, value = name.split("=", 1)
            kind = allowed.get(name)
            if kind is None and schema.is_known_key(name) and "config" in allowed.values():
                kind = "bool" if name in schema.BOOL_KEYS else "str"
            if kind is None:
                sys.stderr.write(f"Unknown option: {name}\n")
                raise PctError(f"400 unable to parse option\npct {command} <vmid> [OPTIONS]")
            if value is None:
                if kind == "bool":
                    # Getopt `name:s`: the next argument is the value unless it looks like an option
                    nxt = args[i + 1] if i + 1 < len(args) else None
                    if nxt is not None and not (nxt.startswith("-") and len(nxt) > 1):
                        value = nxt
                        i += 1
                    else:
                        value = ""
                else:
                    if i + 1 >= len(args):
                        sys.stderr.write(f"Option {name} requires an argument\n")
                        raise PctError(f"400 unable to parse option\npct {command} <vmid> [OPTIONS]")
                    value = args[i + 1]
                    i += 1
            if kind == "bool":
                # get_options: '' is 1, else parse_boolean or "unable to parse boolean option"
                parsed = "1" if value == "" else schema.parse_boolean(value)
                if parsed is None:
                    raise PctError(f"400 unable to parse boolean option\npct {command} <vmid> [OPTIONS]")
                value = parsed
            if name in options and name != "delete":
                raise PctError(f"400 Parameter verification failed.\n{name}: duplicate option")
            options[name] = value
        else:
            positional.append(arg)
        i += 1
    return positional, options


def vmid_arg(positional: list[str], command: str) -> int:
    if not positional:
        raise PctError(f"400 not enough arguments\npct {command} <vmid>")
    value = positional.pop(0)
    if not re.fullmatch(r"\d+", value) or not 100 <= int(value) <= 999999999:
        raise PctError(f"400 Parameter verification failed.\nvmid: value '{value}' does not look like a valid VM ID")
    return int(value)


def check_config_values(options: dict[str, str]) -> dict[str, str]:
    values = {}
    errors = []
    for key, value in options.items():
        if key.startswith("lxc"):
            errors.append(
                f"{key}: property is not defined in schema and the schema does not allow additional properties"
            )
            continue
        try:
            values[key] = schema.check_value(key, value)
        except ConfigError as exc:
            errors.append(str(exc))
    if errors:
        raise PctError("400 Parameter verification failed.\n" + "\n".join(errors))
    return values


# --- config changes (PVE::LXC::Config update_pct_config / vmconfig_*_pending) ------------------


def hotplug_allowed(key: str, conf: dict) -> bool:
    return hotplug_rules.hotplug_allowed(key, conf)  # per the node's pve-container version (PVE 8 or 9)


def apply_pending(conf: dict, selection: set[str] | None = None) -> None:
    """vmconfig_apply_pending: move the selected (default: all) pending changes into the config."""
    main, pending = conf["main"]["keys"], conf["pending"]["keys"]
    deletes = split_list(pending.get("delete", ""))
    for key in deletes:
        if selection is None or key in selection:
            main.pop(key, None)
    set_pending_delete(pending, [k for k in deletes if selection is not None and k not in selection])
    for key in [k for k in pending if k != "delete" and (selection is None or k in selection)]:
        main[key] = schema.canonical(key, pending.pop(key))


def split_list(value: str) -> list[str]:
    return [item for item in re.split(r"[,;\s]+", value) if item]


def set_pending_delete(pending: dict, keys: list[str]) -> None:
    if keys:
        pending["delete"] = ",".join(sorted(set(keys)))
    else:
        pending.pop("delete", None)


def rewritten(key: str, value: str) -> str:
    """What update_pct_config stores for a value it rewrites: tags by get_unique_tags (default tag-style:
    lower-cased, sorted, unique, ';'), nameserver/searchdomain split_list joined by a space."""
    if key == "tags":
        return ";".join(sorted({tag.lower() for tag in split_list(value)}))
    if key in ("nameserver", "searchdomain"):
        return " ".join(split_list(value))
    return value


def update_config(vmid: int, conf: dict, values: dict[str, str], delete: list[str], revert: list[str]) -> None:
    """update_pct_config: every change goes to pending first; a stopped CT applies the call's keys,
    a running CT hot-plugs what it can (new devN/mpN, memory, fast-plug keys) and keeps the rest pending.
    Raises PctError (and the caller writes nothing) when a hot-plug fails."""
    main = conf["main"]["keys"]
    pending = conf["pending"]["keys"]
    both = sorted(set(delete) & set(values))
    if both:
        raise PctError(f"you can't use '-{both[0]}' and -delete {both[0]}' at the same time")
    for key in delete:
        if not schema.is_known_key(key):
            raise PctError(f"400 Parameter verification failed.\ndelete: unknown option '{key}'")
        if key not in main and key not in pending:
            sys.stderr.write(f"cannot delete '{key}' - not set in current configuration!\n")
            continue
        if key in ("memory", "rootfs", "ostype"):
            raise PctError(f"unable to delete required option '{key}'")
        if key in schema.READ_ONLY:
            raise PctError(f"unable to delete read-only option: '{key}'")
        pending.pop(key, None)
        set_pending_delete(pending, [*split_list(pending.get("delete", "")), key])
    for key in revert:
        pending.pop(key, None)
        set_pending_delete(pending, [k for k in split_list(pending.get("delete", "")) if k != key])
    for key, value in values.items():
        if key in schema.READ_ONLY:
            raise PctError(f"unable to modify read-only option: '{key}'")
        pending[key] = rewritten(key, value)
        set_pending_delete(pending, [k for k in split_list(pending.get("delete", "")) if k != key])
    # cleanup_pending: drop pending values equal to the current ones, and deletes of unset keys
    for key in [k for k in pending if k != "delete" and main.get(k) == pending[k]]:
        del pending[key]
    set_pending_delete(pending, [k for k in split_list(pending.get("delete", "")) if k in main])
    selection = set(values) | set(delete)
    if lxc.state(vmid) != "running":
        apply_pending(conf, selection)
        return
    errors = []
    for key in split_list(pending.get("delete", "")):
        if key in selection and (
            key in schema.HOTPLUG_FAST or key in ("swap", "cpulimit", "cpuunits") or key.startswith("net")
        ):
            main.pop(key, None)
            set_pending_delete(pending, [k for k in split_list(pending.get("delete", "")) if k != key])
    for key in sorted(k for k in pending if k != "delete" and k in selection):
        if not hotplug_allowed(key, conf):
            continue
        try:
            hotplug(vmid, key, pending[key])
        except ConfigError as exc:
            errors.append(f"{key}: unable to hotplug {key}: {exc}")
            continue
        main[key] = schema.canonical(key, pending.pop(key))
    if errors:
        raise PctError("400 Parameter verification failed.\n" + "\n".join(errors) + "\npct set <vmid> [OPTIONS]")


def hotplug(vmid: int, key: str, value: str) -> None:
    idx = schema.indexed_key(key)
    if key == "memory":
        limit = translate_memory()
        lxc.run(["lxc-cgroup", "-n", str(vmid), limit, str(int(value) * 1024 * 1024)])
    elif key == "hostname":
        # Proxmox writes the new name into the CT's /etc/hostname at the next start; the config changes now.
        return
    elif idx and idx[0] == "dev":
        lxc.hotplug_device(vmid, key, value)
    elif idx and idx[0] == "mp":
        hotplug_rules.hotplug_mp(vmid, value)


def translate_memory() -> str:
    return "memory.limit_in_bytes" if lxc.legacy_cgroups() else "memory.max"


# --- subcommands --------------------------------------------------------------------------------


def storage_path(volid: str) -> Path:
    try:
        return storage.volume_path(volid)
    except storage.StorageError as exc:
        raise PctError(str(exc)) from None


def rootfs_volume(conf_keys: dict) -> str:
    return pveconf.parse_property_string(conf_keys["rootfs"], "volume")["volume"]


def rootfs_dir(conf_keys: dict) -> str:
    return str(storage_path(rootfs_volume(conf_keys)))


def cmd_create(args: list[str]) -> None:
    allowed = {
        "storage": "str",
        "password": "str",
        "ssh-public-keys": "str",
        "start": "bool",
        "force": "bool",
        "pool": "str",
        "restore": "bool",
        "unique": "bool",
        "ignore-unpack-errors": "bool",
        "bwlimit": "str",
        "ha-managed": "bool",
        "_": "config",
    }
    positional, options = parse_options(args, allowed, "create")
    vmid = vmid_arg(positional, "create")
    if not positional:
        raise PctError("400 not enough arguments\npct create <vmid> <ostemplate> [OPTIONS]")
    ostemplate = positional.pop(0)
    extra = {k: options.pop(k) for k in list(options) if k in allowed}
    values = check_config_values(options)
    # pct create defaults to an unprivileged CT; the key is written only when true.
    if values.pop("unprivileged", "1") == "1":
        raise PctError(
            "lab: unprivileged containers are not supported by the lab's pct stand-in (it would "
            "need Proxmox's uid-shifted template extraction and idmapped device nodes); create a "
            "privileged container (--unprivileged 0) in the lab"
        )
    with config_lock(vmid):
        if conf_path(vmid).exists():
            raise PctError(f"CT {vmid} already exists on node '{nodename()}'")
        template = storage_path(ostemplate)
        if not template.is_file():
            raise PctError(f"volume '{ostemplate}' does not exist")
        rootfs = values.get("rootfs", f"{extra.get('storage', 'local')}:4")
        spec = pveconf.parse_property_string(rootfs, "volume")
        volume = spec.pop("volume")
        match = re.fullmatch(r"([a-z][a-z0-9\-_.]*):(\d+(?:\.\d+)?)", volume)
        if not match:
            raise PctError(f"rootfs: the lab only allocates new volumes ('<storage>:<size in GiB>'), got '{volume}'")
        # create_vm's $check_and_activate_storage: the storage exists, is enabled and has `rootdir` content
        try:
            volid, target = storage.alloc_rootfs(match.group(1), vmid)
        except storage.StorageError as exc:
            raise PctError(str(exc)) from None
        spec["size"] = schema.parse_size_gib(match.group(2))
        target.mkdir(parents=True, exist_ok=False)
        try:
            subprocess.run(
                ["tar", "--zstd", "-xpf", str(template), "-C", str(target), "--numeric-owner"],
                check=True,
                capture_output=True,
            )
            keys = {"arch": "amd64", "hostname": f"CT{vmid}", "memory": "512", "swap": "512"}
            # create_vm sets the options through update_pct_config + vmconfig_apply_pending: written as applied
            keys.update({key: schema.canonical(key, value) for key, value in values.items()})
            keys["rootfs"] = pveconf.print_property_string({"volume": volid, **spec}, "volume")
            keys["ostype"] = values.get("ostype") or detect_ostype(target)
            setup_rootfs(target, keys["hostname"])
            conf = {"main": pveconf.new_section(), "pending": pveconf.new_section(), "snapshots": {}}
            conf["main"]["keys"] = keys
            conf_path(vmid).parent.mkdir(parents=True, exist_ok=True)
            save(vmid, conf)
        except BaseException:
            storage.free_rootfs(volid)
            raise
    if extra.get("start") == "1":
        start(vmid)


def detect_ostype(rootfs: Path) -> str:
    os_release = rootfs / "etc/os-release"
    if os_release.exists():
        match = re.search(r"^ID=\"?([a-z]+)", os_release.read_text(), re.MULTILINE)
        if match and match.group(1) in schema.OSTYPES:
            return match.group(1)
    return "unmanaged"


def setup_rootfs(rootfs: Path, hostname: str) -> None:
    (rootfs / "etc/hostname").write_text(hostname + "\n")
    (rootfs / "etc/hosts").write_text(f"127.0.0.1 localhost\n127.0.1.1 {hostname}\n")


def cmd_set(args: list[str]) -> None:
    allowed = {"delete": "str", "revert": "str", "digest": "str", "_": "config"}
    positional, options = parse_options(args, allowed, "set")
    vmid = vmid_arg(positional, "set")
    delete = split_list(options.pop("delete", ""))
    revert = split_list(options.pop("revert", ""))
    options.pop("digest", None)
    if "unprivileged" in options:
        raise PctError("unable to modify read-only option: 'unprivileged'")
    values = check_config_values(options)
    if not values and not delete and not revert:
        raise PctError("no options specified")
    with config_lock(vmid):
        conf = load(vmid)
        check_lock(conf)
        update_config(vmid, conf, values, delete, revert)
        save(vmid, conf)
        # update_lxc_config after the write: every devN's node is stat-ed, a missing one fails the call
        check_devices(load(vmid))


def check_devices(conf: dict) -> None:
    """update_lxc_config's foreach_passthrough_device: get_device_mode_and_rdev for each devN."""
    keys = conf["main"]["keys"]
    for key in sorted(k for k in keys if (schema.indexed_key(k) or ("",))[0] == "dev"):
        dev = schema.parse_property_string(schema.DEV_DESC, keys[key])
        if "path" not in dev:
            raise PctError(f"Path is not defined for passthrough device {key}")
        schema.device_rdev(dev["path"])


def cmd_config(args: list[str]) -> None:
    positional, options = parse_options(args, {"current": "bool", "snapshot": "str"}, "config")
    vmid = vmid_arg(positional, "config")
    conf = load(vmid)
    keys = dict(conf["main"]["keys"])
    if options.get("current", "0") != "1":
        pending = conf["pending"]["keys"]
        keys.update({k: v for k, v in pending.items() if k != "delete"})
        for key in split_list(pending.get("delete", "")):
            keys.pop(key, None)
    if conf["main"].get("description"):
        keys["description"] = pveconf.encode_text(conf["main"]["description"])
    for key in sorted(keys):
        print(f"{key}: {keys[key]}")
    for key, value in conf["main"]["lxc"]:
        print(f"{key}: {value}")


def cmd_pending(args: list[str]) -> None:
    positional, _options = parse_options(args, {}, "pending")
    vmid = vmid_arg(positional, "pending")
    conf = load(vmid)
    main, pending = conf["main"]["keys"], conf["pending"]["keys"]
    deletes = set(split_list(pending.get("delete", "")))
    for key in sorted(set(main) | {k for k in pending if k != "delete"}):
        if key in deletes and key in main:
            print(f"del {key}: {main[key]}")
        elif key in pending:
            if key in main:
                print(f"cur {key}: {main[key]}")
            print(f"new {key}: {pending[key]}")
        else:
            print(f"cur {key}: {main[key]}")


def start(vmid: int) -> None:
    with config_lock(vmid):
        conf = load(vmid)
        if lxc.state(vmid) == "running":
            raise PctError(f"CT {vmid} already running")
        # vm_start's worker: check_lock, then the pending changes are applied
        try:
            check_lock(conf)
        except PctError as exc:
            raise TaskError(str(exc)) from None
        if not pveconf.is_empty(conf["pending"]):
            apply_pending(conf)
            save(vmid, conf)
        keys = conf["main"]["keys"]
        lxc.reset_passthrough(vmid)
        text = lxc.render(vmid, keys, conf["main"]["lxc"], rootfs_dir(keys))
        lxc.write_lxc_config(vmid, text)
        setup_rootfs(Path(rootfs_dir(keys)), keys.get("hostname", f"CT{vmid}"))
        log = lxc.lxc_path(vmid) / "lxc-start.log"
        proc = subprocess.run(
            ["lxc-start", "-n", str(vmid), "-l", "INFO", "-o", str(log)], capture_output=True, text=True, check=False
        )
        waited = subprocess.run(["lxc-wait", "-n", str(vmid), "-s", "RUNNING", "-t", "10"], check=False)
        if proc.returncode != 0 or waited.returncode != 0:
            tail = log.read_text()[-2000:] if log.exists() else proc.stderr
            raise TaskError(f"startup for container '{vmid}' failed\n{tail}")


def stop(vmid: int, timeout: int | None) -> None:
    """timeout None: hard stop (pct stop); else a clean shutdown that fails after timeout seconds."""
    if timeout is None:
        lxc.run(["lxc-stop", "-n", str(vmid), "--kill"])
        return
    proc = subprocess.run(
        ["lxc-stop", "-n", str(vmid), "--timeout", str(timeout)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0 and lxc.state(vmid) == "running":
        raise TaskError("container did not shutdown")


def require_running(vmid: int, message: str) -> None:
    load(vmid)
    if lxc.state(vmid) != "running":
        raise PctError(message)


def cmd_start(args: list[str]) -> None:
    positional, _ = parse_options(args, {"skiplock": "bool", "debug": "bool"}, "start")
    start(vmid_arg(positional, "start"))


def cmd_stop(args: list[str]) -> None:
    positional, _ = parse_options(args, {"skiplock": "bool", "overrule-shutdown": "bool"}, "stop")
    vmid = vmid_arg(positional, "stop")
    require_running(vmid, f"CT {vmid} not running")
    stop(vmid, None)


def cmd_shutdown(args: list[str]) -> None:
    positional, options = parse_options(args, {"timeout": "str", "forceStop": "bool"}, "shutdown")
    vmid = vmid_arg(positional, "shutdown")
    require_running(vmid, f"CT {vmid} not running")
    try:
        stop(vmid, int(options.get("timeout", "60")))
    except PctError:
        if options.get("forceStop") != "1":
            raise
        stop(vmid, None)


def cmd_reboot(args: list[str]) -> None:
    positional, options = parse_options(args, {"timeout": "str"}, "reboot")
    vmid = vmid_arg(positional, "reboot")
    require_running(vmid, f"VM {vmid} not running")
    stop(vmid, int(options.get("timeout", "60")))
    start(vmid)


def cmd_status(args: list[str]) -> None:
    positional, _ = parse_options(args, {"verbose": "bool"}, "status")
    vmid = vmid_arg(positional, "status")
    load(vmid)
    print(f"status: {lxc.state(vmid)}")


def cmd_list(args: list[str]) -> None:
    parse_options(args, {}, "list")
    confdir = PVE_DIR / "nodes" / nodename() / "lxc"
    vmids = sorted(int(p.stem) for p in confdir.glob("*.conf") if p.stem.isdigit()) if confdir.is_dir() else []
    if not vmids:
        return
    print("%-10s %-10s %-12s %-20s" % ("VMID", "Status", "Lock", "Name"))
    for vmid in vmids:
        keys = load(vmid)["main"]["keys"]
        print("%-10s %-10s %-12s %-20s" % (vmid, lxc.state(vmid), keys.get("lock", ""), keys.get("hostname", "")))


def cmd_exec(args: list[str]) -> None:
    if "--" in args:
        split = args.index("--")
        head, command = args[:split], args[split + 1 :]
    else:
        head, command = args, []
    positional, options = parse_options(head, {"keep-env": "bool"}, "exec")
    vmid = vmid_arg(positional, "exec")
    command = positional + command
    load(vmid)
    if lxc.state(vmid) != "running":
        raise PctError(f"container '{vmid}' not running!")
    if not command:
        # die without a newline: Perl appends where
        raise PctError(f"missing command at /usr/share/perl5/PVE/CLI/pct.pm line {PCT_PM_LINES['missing']}.")
    os.execvpe("lxc-attach", exec_argv(vmid, options, command), exec_environment(os.environ))


def exec_argv(vmid: int, options: dict[str, str], command: list[str]) -> list[str]:
    env_flag = "--keep-env" if options.get("keep-env", "1") == "1" else "--clear-env"
    return ["lxc-attach", "-n", str(vmid), env_flag, "--", *command]


def exec_environment(environ) -> dict[str, str]:
    """What the command in the CT gets with --keep-env: pct's own environment (PATH reset by
    run_cli_handler, SSL_CERT_* deleted by clean_environment), then the CT config's
    lxc.environment = TERM=linux (update_lxc_config), which lxc-attach applies over it."""
    env = {k: v for k, v in environ.items() if k not in EXEC_UNSET}
    env["PATH"] = EXEC_PATH
    env["TERM"] = "linux"
    return env


# Lines of pct.pm (pve-container 6.1.10) whose die has no newline, so Perl appends " at FILE line N."
PCT_PM_LINES = {"missing": 241, "pull": 659}


def transfer_options(options: dict[str, str]) -> tuple[str, str, str | None]:
    perms = options.get("perms")
    if perms is not None:
        # "assume octal as default": 0 prefixed, then strtoul with base 0 (0x hex, 0 octal)
        text = perms if perms.startswith("0") else "0" + perms
        try:
            perms = format(int(text, 16) if text.startswith("0x") else int(text, 8), "o")
        except ValueError:
            raise PctError(f"invalid mode: '{text}'") from None
    return options.get("user", "root"), options.get("group", options.get("user", "root")), perms


# The worker's steps inside the CT: create_file (exit 2: ENOENT, 21: EISDIR, 13: other), then the copy,
# whose result pct never checks (File::Copy::copy's return value is ignored).
PUSH_SCRIPT = (
    'd=$(dirname -- "$1"); [ -d "$d" ] || exit 2; [ -d "$1" ] && exit 21; '
    'exec 3>"$1" 2>/dev/null || exit 13; chown "$2:$3" "$1" 2>/dev/null || exit 14; '
    'if [ -n "$4" ]; then chmod "$4" "$1"; fi; cat >&3; exit 0'
)
PULL_SCRIPT = '[ -e "$1" ] || exit 2; exec 3<"$1" 2>/dev/null || exit 13; cat <&3; exit 0'
STRERROR = {2: "No such file or directory", 21: "Is a directory", 13: "Permission denied"}


def worker_error(message: str) -> None:
    """fork_worker in the CLI: a worker's die is printed on stderr (TASK ERROR's text); push and pull
    have no $upid_exit, so pct still exits 0."""
    sys.stderr.write(message + "\n")


def cmd_push(args: list[str]) -> None:
    allowed = {"user": "str", "group": "str", "perms": "str"}
    positional, options = parse_options(args, allowed, "push")
    vmid = vmid_arg(positional, "push")
    if len(positional) != 2:
        raise PctError("400 not enough arguments\npct push <vmid> <file> <destination> [OPTIONS]")
    source, dest = positional
    user, group, perms = transfer_options(options)
    with config_lock(vmid):
        if lxc.state(vmid) != "running":
            raise PctError("can only push files to a running CT")
        load(vmid)
        # the worker (exit 0 whatever happens in it)
        try:
            handle = open(source, "rb")  # noqa: SIM115
        except OSError:
            worker_error(f"failed to open {source} for reading")
            return
        with handle:
            proc = subprocess.run(
                [
                    "lxc-attach",
                    "-n",
                    str(vmid),
                    "--clear-env",
                    "--",
                    "/bin/sh",
                    "-c",
                    PUSH_SCRIPT,
                    "sh",
                    dest,
                    user,
                    group,
                    perms or "",
                ],
                stdin=handle,
                capture_output=True,
                check=False,
            )
        if proc.returncode == 14:
            worker_error("failed to change file owner: Operation not permitted")
        elif proc.returncode:
            worker_error(f"failed to create file: {dest}: {STRERROR.get(proc.returncode, STRERROR[13])}")


def cmd_pull(args: list[str]) -> None:
    allowed = {"user": "str", "group": "str", "perms": "str"}
    positional, options = parse_options(args, allowed, "pull")
    vmid = vmid_arg(positional, "pull")
    if len(positional) != 2:
        raise PctError("400 not enough arguments\npct pull <vmid> <path> <destination> [OPTIONS]")
    source, dest = positional
    user, group, perms = transfer_options(options)
    with config_lock(vmid):
        if lxc.state(vmid) != "running":
            raise PctError(
                f"can only pull files from a running VM at /usr/share/perl5/PVE/CLI/pct.pm line {PCT_PM_LINES['pull']}."
            )
        # the worker: create_file on the node first (left behind, empty, when the source cannot be read)
        try:
            handle = open(dest, "wb")  # noqa: SIM115
        except OSError as exc:
            worker_error(f"failed to create file: {dest}: {exc.strerror}")
            return
        with handle:
            try:
                shutil.chown(dest, user, group)
            except (LookupError, OSError):
                worker_error(f"failed to get uid for: {user}")
                return
            if perms:
                os.chmod(dest, int(perms, 8))
            proc = subprocess.run(
                ["lxc-attach", "-n", str(vmid), "--clear-env", "--", "/bin/sh", "-c", PULL_SCRIPT, "sh", source],
                stdout=handle,
                stderr=subprocess.PIPE,
                check=False,
            )
        if proc.returncode in STRERROR:
            worker_error(f"failed to open {source}: {STRERROR[proc.returncode]}")


def cmd_destroy(args: list[str]) -> None:
    allowed = {"force": "bool", "purge": "bool", "destroy-unreferenced-disks": "bool"}
    positional, options = parse_options(args, allowed, "destroy")
    vmid = vmid_arg(positional, "destroy")
    with config_lock(vmid):
        conf = load(vmid)
        if lxc.state(vmid) == "running":
            if options.get("force") != "1":
                raise PctError(f"unable to destroy CT {vmid} - container is running")
            stop(vmid, None)
        check_lock(conf)
        keys = conf["main"]["keys"]
        if keys.get("protection") == "1":
            raise PctError("can't remove CT - protection mode enabled")
        storage.free_rootfs(rootfs_volume(keys))
        shutil.rmtree(lxc.lxc_path(vmid), ignore_errors=True)
        conf_path(vmid).unlink()


COMMANDS = {
    "create": cmd_create,
    "set": cmd_set,
    "config": cmd_config,
    "pending": cmd_pending,
    "start": cmd_start,
    "stop": cmd_stop,
    "shutdown": cmd_shutdown,
    "reboot": cmd_reboot,
    "status": cmd_status,
    "list": cmd_list,
    "exec": cmd_exec,
    "push": cmd_push,
    "pull": cmd_pull,
    "destroy": cmd_destroy,
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if os.geteuid() != 0:
        sys.stderr.write("please run as root\n")
        return EXIT_TASK
    if not argv or argv[0] not in COMMANDS:
        sys.stderr.write(
            f"ERROR: unknown command 'pct {' '.join(argv[:1])}'\n"
            f"USAGE: pct <COMMAND> [ARGS] [OPTIONS]\n  commands: {', '.join(sorted(COMMANDS))}\n"
        )
        return EXIT_TASK
    try:
        COMMANDS[argv[0]](argv[1:])
    except PctError as exc:
        sys.stderr.write(f"{exc}\n")
        return exc.code
    except ConfigError as exc:
        sys.stderr.write(f"{exc}\n")
        return EXIT_DIE
    return 0
