# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Installed distributions read from their C(*.dist-info) metadata, as pip and uv see them, without running
the environment's own Python (the module runs on the container's system Python)."""

from __future__ import annotations

import csv
import fnmatch
import glob
import importlib.metadata
import os
import pathlib
import re

_SEPARATORS = re.compile(r"[-_.]+")


def canonical(name):
    """A project name as PEP 503 normalises it (packaging.utils.canonicalize_name: each run of C(-), C(_) and C(.)
    one C(-), lower case). The collection's one normaliser: modules run on the container's Python, where the
    C(packaging) package is not installed (a minbase Debian has none), so the rule is written out here and a unit
    test compares it with packaging's over a table of names."""
    return _SEPARATORS.sub("-", name).lower()


def installed_versions(site_dirs, names):
    """{name: version} for each of `names` (canonical) installed in one of `site_dirs`; a later dir wins."""
    wanted = {canonical(name) for name in names}
    found = {}
    for site in site_dirs:
        for dist in importlib.metadata.distributions(path=[site]):
            name = canonical(dist.metadata["Name"] or "")
            if name in wanted:
                found[name] = dist.version
    return found


def site_dirs(venv):
    """The site-packages directories of a virtual environment (C(lib/pythonX.Y/site-packages))."""
    return sorted(glob.glob(os.path.join(venv, "lib", "python*", "site-packages")))


def damaged_files(site_dirs, unchecked=(), limit=5):
    """{name: (count, [up to `limit` paths])} of each installed distribution whose C(RECORD) lists a file that
    is gone or has another size than the one installed: a wheel's files deleted while its C(dist-info) stays,
    which version checks do not see. Byte code (C(.pyc)) is left out: Python rewrites it; so are the RECORD
    paths matching an C(unchecked) pattern (fnmatch, relative to site-packages): files another step owns."""
    damaged = {}
    for site in site_dirs:
        for record in glob.glob(os.path.join(site, "*.dist-info", "RECORD")):
            bad = []
            with open(record, newline="", encoding="utf-8", errors="replace") as handle:
                for row in csv.reader(handle):
                    if not row or row[0].endswith(".pyc") or any(fnmatch.fnmatch(row[0], p) for p in unchecked):
                        continue
                    path = os.path.normpath(os.path.join(site, row[0]))
                    size = row[2] if len(row) > 2 else ""
                    try:
                        actual = os.stat(path).st_size
                    except OSError:
                        bad.append(path)
                        continue
                    if size.isdigit() and int(size) != actual:
                        bad.append(path)
            if bad:
                name = _record_name(record)
                damaged[name] = (len(bad), bad[:limit])
    return damaged


def _record_name(record):
    """The canonical project name of a C(RECORD)'s distribution, from its METADATA (the directory name's
    spelling may differ)."""
    dist = importlib.metadata.PathDistribution(pathlib.Path(os.path.dirname(record)))
    return canonical(dist.metadata["Name"] or os.path.basename(os.path.dirname(record)).split("-", 1)[0])
