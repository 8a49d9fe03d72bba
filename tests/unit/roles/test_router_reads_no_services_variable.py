"""sglang_router reads what sglang_services published (ansible_local.gpulxc_services), never its variables.
Messages may name a services variable (the fix for the user): quoted Jinja strings and comments are skipped."""

import re
from pathlib import Path

ROUTER = Path(__file__).resolve().parents[3] / "roles/sglang_router"


def test_no_sglang_services_variable_in_the_router_role():
    hits = []
    for path in sorted(p for p in ROUTER.rglob("*") if p.is_file()):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = re.sub(r"'[^']*'", "''", line.split(" #", 1)[0])
            if not code.lstrip().startswith("#") and "sglang_services_" in code:
                hits.append(f"{path.relative_to(ROUTER)}:{number}: {line.strip()}")
    assert hits == []
