"""The node's Proxmox VE release as `pveversion` reports it (lab stand-in, test infrastructure).

The lab setting GPULXC_LAB_PVE (8, 9 or 8.1; lab/setup stores it in /var/lib/gpulxc-lab/pve) picks one of the
releases below. The output follows pve-manager's bin/pveversion (print_status: `<pkg>: <version>`, with
`(running kernel: ...)` for proxmox-ve and `(running version: <version>/<repoid>)` for pve-manager; without
-v one line `pve-manager/<version>/<repoid> (running kernel: ...)`) and the package order of
PVE::API2::APT versions (proxmox-ve, pve-manager, the kernels, then the rest by name). The list is abridged
to the packages that matter here; pve-container's versions are the releases the lab models
(5.3.5 = stable-bookworm 6475873, 6.1.10 = master 5eb5574; 5.0.6 = fd67677, one before devN).
"""

from __future__ import annotations

import os
from pathlib import Path

SETTING = Path(os.environ.get("GPULXC_LAB_STATE", "/var/lib/gpulxc-lab")) / "pve"
DEFAULT = "9"

RELEASES = {
    "9": {
        "proxmox-ve": "9.1.0",
        "pve-manager": "9.1.1",
        "repoid": "42db4a6cf33dac83",
        "kernel": "6.17.2-1-pve",
        "lxc-pve": "6.0.5-3",
        "pve-container": "6.1.10",
    },
    "8": {
        "proxmox-ve": "8.4.0",
        "pve-manager": "8.4.14",
        "repoid": "b502d23c55afcba1",
        "kernel": "6.8.12-16-pve",
        "lxc-pve": "6.0.0-1",
        "pve-container": "5.3.5",
    },
    "8.1": {
        "proxmox-ve": "8.1.0",
        "pve-manager": "8.1.3",
        "repoid": "b46aac3b42da5d15",
        "kernel": "6.5.11-4-pve",
        "lxc-pve": "5.0.2-4",
        "pve-container": "5.0.6",
    },
}


def setting() -> str:
    try:
        value = SETTING.read_text().strip()
    except OSError:
        value = ""
    return value if value in RELEASES else DEFAULT


def release() -> dict:
    return RELEASES[setting()]


def output(verbose: bool) -> str:
    rel = release()
    if not verbose:
        return f"pve-manager/{rel['pve-manager']}/{rel['repoid']} (running kernel: {rel['kernel']})\n"
    kernel_pkg = "proxmox-kernel-" + rel["kernel"] + "-signed"
    lines = [
        f"proxmox-ve: {rel['proxmox-ve']} (running kernel: {rel['kernel']})",
        f"pve-manager: {rel['pve-manager']} (running version: {rel['pve-manager']}/{rel['repoid']})",
        f"{kernel_pkg}: {rel['kernel'].rsplit('-pve', 1)[0]}",
        f"lxc-pve: {rel['lxc-pve']}",
        f"pve-container: {rel['pve-container']}",
    ]
    return "".join(line + "\n" for line in lines)
