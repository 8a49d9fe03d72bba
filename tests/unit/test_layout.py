"""The roles' shape (issue 20): the container layout defined once (roles/gpulxc/defaults/main.yml), which no
other role's defaults or vars name literally; no task file more than 2 includes deep; vars/ without decisions."""

import re
from pathlib import Path

import pytest
import yaml

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


# Issue 20's role shape: tasks/main.yml an index of phases, no task file more than 2 includes deep, and vars/
# constants only (no decision reading what a task registered).
INCLUDES = ("ansible.builtin.import_tasks", "ansible.builtin.include_tasks")
ROLE_DIRS = sorted(path for path in ROLES.iterdir() if (path / "tasks").is_dir())


def task_lists(tasks):
    """Every task of a task list, blocks opened."""
    for task in tasks or []:
        yield task
        for key in ("block", "rescue", "always"):
            yield from task_lists(task.get(key))


def included(role, path):
    """The role's task files that `path` imports or includes (a templated name: each file it can name)."""
    found = set()
    for task in task_lists(yaml.safe_load(path.read_text())):
        for key in INCLUDES:
            name = task.get(key)
            name = name.get("file") if isinstance(name, dict) else name
            if not name:
                continue
            names = [re.sub(r"\{\{.*?\}\}", literal, name) for literal in re.findall(r"'([^']*)'", name)]
            names = [n for n in names if (role / "tasks" / n).is_file()] or [name]
            for candidate in names:
                found.update((role / "tasks").glob(re.sub(r"\{\{.*?\}\}", "*", candidate)))
    return found


def depth(role, path, seen=()):
    """How many includes deep the longest chain from `path` goes."""
    assert path not in seen, f"{path}: included in a loop"
    return max((1 + depth(role, child, (*seen, path)) for child in included(role, path)), default=0)


@pytest.mark.parametrize("role", ROLE_DIRS, ids=[role.name for role in ROLE_DIRS])
def test_no_task_file_is_included_more_than_two_levels_deep(role):
    deep = {path.name: depth(role, path) for path in (role / "tasks").glob("*.yml")}
    assert max(deep.values()) <= 2, f"{role.name}: include chains deeper than 2: {deep}"


REGISTERED = {
    task["register"]
    for role in ROLE_DIRS
    for path in (role / "tasks").glob("*.yml")
    for task in task_lists(yaml.safe_load(path.read_text()))
    if "register" in task
}
VARS = sorted(ROLES.glob("*/vars/main.yml"))


@pytest.mark.parametrize("path", VARS, ids=[path.parts[-3] for path in VARS])
def test_no_vars_file_reads_a_register(path):
    assert REGISTERED, "no register found: the task walk is broken"
    words = set(re.findall(r"[a-z_][a-z0-9_]*", path.read_text()))
    assert words & REGISTERED == set(), f"{path}: vars/ holds constants; decide in a task instead"
