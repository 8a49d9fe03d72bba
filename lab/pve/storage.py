"""The node's storages as a default Proxmox VE install has them, and `pvesm` over them.

Lab stand-in (test infrastructure). /etc/pve/storage.cfg is written by lab/setup as the installer writes
it for an LVM-thin install (pve-installer Proxmox/Install/StorageConfig.pm get_lvm_thin_config): `dir: local`
for ISOs, templates and backups (no `rootdir`: no containers), `lvmthin: local-lvm` for container and VM
disks. The lab has no LVM: `local-lvm`'s volumes are directories under LVM_BACKING (one per volume, as a
thin volume is one per disk), and its space is that file system's. `pvesm status` prints pve-storage's
format (src/PVE/CLI/pvesm.pm $print_status); lab/README.md's storage table has the lines.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
from pathlib import Path

STORAGE_CFG = Path("/etc/pve/storage.cfg")
# where the lab keeps local-lvm's thin volumes (a directory each)
LVM_BACKING = Path("/var/lib/gpulxc-lab/lvm-thin")

# pve-installer Proxmox/Install/StorageConfig.pm get_lvm_thin_config (PVE 9 adds `import` to local's content)
DEFAULT_CFG = """dir: local
\tpath /var/lib/vz
\tcontent iso,vztmpl,backup

lvmthin: local-lvm
\tthinpool data
\tvgname pve
\tcontent rootdir,images
"""

SECTION = re.compile(r"^([a-z][a-z0-9]*):\s*(\S+)\s*$")
# pve-common JSONSchema.pm parse_id ('pve-storage-id')
STORAGE_ID = re.compile(r"[a-z][a-z0-9\-_.]*[a-z0-9]", re.IGNORECASE)


class StorageError(Exception):
    """A refusal with pve-storage's message."""


def parse_config(text: str) -> dict[str, dict]:
    """PVE::SectionConfig: `<type>: <id>` then indented `<key> <value>` lines; content as a set."""
    ids: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            current = None if not line.strip() else current
            continue
        match = SECTION.match(line)
        if match and not line[0].isspace():
            current = {"type": match.group(1), "content": set()}
            ids[match.group(2)] = current
            continue
        if current is None:
            continue
        key, _, value = line.strip().partition(" ")
        value = value.strip()
        if key == "content":
            current["content"] = {c for c in re.split(r"[,;\s]+", value) if c}
        elif key == "disable":
            current["disable"] = True
        else:
            current[key] = value or "1"
    return ids


def config() -> dict[str, dict]:
    return parse_config(STORAGE_CFG.read_text() if STORAGE_CFG.exists() else DEFAULT_CFG)


def storage_config(storeid: str, cfg: dict | None = None) -> dict:
    """PVE::Storage storage_config / storage_check_enabled."""
    scfg = (config() if cfg is None else cfg).get(storeid)
    if scfg is None:
        raise StorageError(f"storage '{storeid}' does not exist")
    if scfg.get("disable"):
        raise StorageError(f"storage '{storeid}' is disabled")
    return scfg


def backing_dir(storeid: str, scfg: dict) -> Path:
    """Where the storage's volumes are: a dir storage's path; for the lab's lvmthin a directory per pool."""
    if scfg["type"] == "dir":
        return Path(scfg["path"])
    if scfg["type"] == "lvmthin":
        return LVM_BACKING / scfg.get("vgname", "pve") / scfg.get("thinpool", "data")
    raise StorageError(f"lab: storage type '{scfg['type']}' of '{storeid}' is not modelled")


def volume_path(volid: str) -> Path:
    """Where a volume is on the lab host (rootfs directories, templates)."""
    storeid, _, volname = volid.partition(":")
    scfg = storage_config(storeid)
    base = backing_dir(storeid, scfg)
    if scfg["type"] == "dir":
        if volname.startswith("vztmpl/"):
            return base / "template/cache" / volname[len("vztmpl/") :]
        if volname.startswith("iso/"):
            return base / "template/iso" / volname[len("iso/") :]
        return base / "images" / volname
    return base / volname


def pvesm_path(volid: str) -> str:
    """`pvesm path`: a dir storage's file; an LVM volume's device (/dev/<vg>/<lv>), as the real one prints."""
    storeid, _, volname = volid.partition(":")
    scfg = storage_config(storeid)
    if scfg["type"] == "lvmthin":
        return f"/dev/{scfg.get('vgname', 'pve')}/{volname}"
    return str(volume_path(volid))


def alloc_rootfs(storeid: str, vmid: int) -> tuple[str, Path]:
    """A new rootfs volume for a container: (volid, directory). pve-container create_disks: a dir storage
    gets `<vmid>/subvol-<vmid>-disk-N.subvol` for a subvol (the lab's size 0 and non-0 alike); lvmthin
    `vm-<vmid>-disk-N`. Refused as create_vm refuses a storage without `rootdir` content."""
    cfg = config()
    scfg = storage_config(storeid, cfg)
    if "rootdir" not in scfg["content"]:
        raise StorageError(
            f"400 Parameter verification failed.\nstorage: storage '{storeid}' does not support container directories"
        )
    base = backing_dir(storeid, scfg)
    for n in range(1000):
        if scfg["type"] == "dir":
            volname = f"{vmid}/subvol-{vmid}-disk-{n}.subvol"
            path = base / "images" / volname
        else:
            volname = f"vm-{vmid}-disk-{n}"
            path = base / volname
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            return f"{storeid}:{volname}", path
    raise StorageError(f"unable to allocate an image name for VM {vmid} in storage '{storeid}'")


def free_rootfs(volid: str) -> None:
    """Remove a container's volume directory (and a dir storage's `<vmid>/` directory when it is empty)."""
    path = volume_path(volid)
    shutil.rmtree(path, ignore_errors=True)
    storeid = volid.partition(":")[0]
    if storage_config(storeid)["type"] == "dir" and path.parent.name.isdigit():
        with contextlib.suppress(OSError):
            path.parent.rmdir()


def status_rows(content: str | None = None, storage: str | None = None) -> list[dict]:
    """API2::Storage::Status index: every enabled storage (with `content`, those that support one of the
    types), its type, whether active, total/used/avail in bytes; `storage` not listed: "No such storage."."""
    cfg = config()
    wanted = {c for c in re.split(r"[,;\s]+", content or "") if c}
    rows = []
    for storeid, scfg in cfg.items():
        enabled = not scfg.get("disable")
        if wanted and (not enabled or not wanted & scfg["content"]):
            continue
        row = {
            "storage": storeid,
            "type": scfg["type"],
            "enabled": enabled,
            "active": False,
            "total": 0,
            "used": 0,
            "avail": 0,
        }
        if enabled:
            try:
                base = backing_dir(storeid, scfg)
                base.mkdir(parents=True, exist_ok=True)
                st = os.statvfs(base)
            except (OSError, StorageError):
                pass
            else:
                # PVE::Tools::df: total = blocks, avail = bavail, used = total - bfree (x frsize)
                row.update(
                    active=True,
                    total=st.f_blocks * st.f_frsize,
                    avail=st.f_bavail * st.f_frsize,
                    used=(st.f_blocks - st.f_bfree) * st.f_frsize,
                )
        rows.append(row)
    if storage is not None and storage not in {r["storage"] for r in rows}:
        raise StorageError("400 Parameter verification failed.\nstorage: No such storage.")
    return [r for r in rows if storage is None or r["storage"] == storage]


def format_status(rows: list[dict]) -> str:
    """pvesm.pm $print_status."""
    maxlen = max((len(r["storage"]) for r in rows), default=0) + 1
    out = [
        "%-*s %10s %10s %15s %15s %15s %8s"
        % (maxlen, "Name", "Type", "Status", "Total (KiB)", "Used (KiB)", "Available (KiB)", "%")
    ]
    for row in sorted(rows, key=lambda r: r["storage"]):
        active = "active" if row["active"] else "inactive"
        per = "% 7.2f%%" % (row["used"] * 100 / row["total"] if row["total"] > 0 else 0)
        if not row["enabled"]:
            active, per = "disabled", "% 8s" % "N/A"
        out.append(
            "%-*s %10s %10s %15d %15d %15d %s"
            % (
                maxlen,
                row["storage"],
                row["type"],
                active,
                row["total"] // 1024,
                row["used"] // 1024,
                row["avail"] // 1024,
                per,
            )
        )
    return "\n".join(out) + "\n"


def parse_args(args: list[str], allowed: set[str]) -> tuple[list[str], dict[str, str]]:
    positional, options = [], {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-") and len(arg) > 1:
            name, sep, value = arg.lstrip("-").partition("=")
            if name not in allowed:
                raise StorageError(f"Unknown option: {name}\n400 unable to parse option")
            if not sep:
                if i + 1 >= len(args):
                    raise StorageError(f"Option {name} requires an argument\n400 unable to parse option")
                value = args[i + 1]
                i += 1
            options[name] = value
        else:
            positional.append(arg)
        i += 1
    return positional, options


def main(argv: list[str] | None = None) -> int:
    """`pvesm path <volid>` and `pvesm status [--content <types>] [--storage <id>] [--enabled 1]`."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["path"] and len(argv) == 2:
            print(pvesm_path(argv[1]))
        elif argv[:1] == ["status"]:
            positional, options = parse_args(argv[1:], {"content", "storage", "enabled", "format", "target"})
            if positional:
                raise StorageError("400 too many arguments\npvesm status  [OPTIONS]")
            rows = status_rows(options.get("content"), options.get("storage"))
            if options.get("enabled") in ("1", "yes", "true", "on"):
                rows = [r for r in rows if r["enabled"]]
            sys.stdout.write(format_status(rows))
        else:
            sys.stderr.write("lab pvesm: only 'pvesm path <volid>' and 'pvesm status' are implemented\n")
            return 255
    except StorageError as exc:
        sys.stderr.write(f"{exc}\n")
        return 2  # a die (see lab/pve/pct.py EXIT_DIE)
    return 0
