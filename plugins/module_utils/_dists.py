# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Installed distributions read from their C(*.dist-info) metadata, as pip and uv see them, without running
the environment's own Python (the module runs on the container's system Python)."""

from __future__ import annotations

import importlib.metadata


def normalize(name):
    """A distribution name compared as pip compares it (lower case, C(_) and C(.) read as C(-))."""
    return name.lower().replace("_", "-").replace(".", "-")


def installed_versions(site_dirs, names):
    """{name: version} for each of `names` (normalized) installed in one of `site_dirs`; a later dir wins."""
    wanted = {normalize(name) for name in names}
    found = {}
    for site in site_dirs:
        for dist in importlib.metadata.distributions(path=[site]):
            name = normalize(dist.metadata["Name"] or "")
            if name in wanted:
                found[name] = dist.version
    return found
