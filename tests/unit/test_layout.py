"""The container layout is defined once (roles/gpulxc/defaults/main.yml): no other role's defaults or vars
name a shared path literally; they read the gpulxc_* variable instead."""

import re
from pathlib import Path

import pytest

ROLES = Path(__file__).resolve().parents[2] / "roles"
SHARED = re.compile(r"/opt/sglang|/etc/sglang|/var/cache/sglang|/opt/smg|/etc/smg|/etc/ansible/facts\.d")
FILES = sorted(
    path for path in [*ROLES.glob("*/defaults/main.yml"), *ROLES.glob("*/vars/main.yml")]
    if path.parts[-3] != "gpulxc"
)  # fmt: skip


@pytest.mark.parametrize("path", FILES, ids=[f"{path.parts[-3]}/{path.parts[-2]}" for path in FILES])
def test_no_role_names_a_shared_path_literally(path):
    found = [line.strip() for line in path.read_text().splitlines() if SHARED.search(line.split("#", 1)[0])]
    assert found == [], f"{path}: read the gpulxc_* variable (roles/gpulxc/defaults/main.yml) instead: {found}"
