"""The roles' shape (issue 20): the container layout defined once (roles/gpulxc/defaults/main.yml), which no
other role's defaults or vars name literally; no task file more than 2 includes deep; vars/ without decisions.
Issue 50: decisions in Python, not in Jinja (no `{%` block or `namespace(` in task, vars, defaults or playbook
YAML, tools/jinja_logic.py's count under its limit), short preflights, tasks/main.yml an index of phases, and vars/
constants only (no Jinja at all, no register read, directly or through a set_fact copy)."""

import importlib.util
import re
from pathlib import Path

import pytest
import yaml

ROLES = Path(__file__).resolve().parents[2] / "roles"
SHARED = re.compile(r"/opt/sglang|/etc/sglang|/var/cache/sglang|/opt/smg|/etc/smg|/etc/ansible/facts\.d")
FILES = sorted(
    path for path in [*ROLES.glob("*/defaults/main.yml"), *ROLES.glob("*/vars/main.yml")] if path.parts[-3] != "gpulxc"
)


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
VARS = sorted(ROLES.glob("*/vars/*.yml"))
SET_FACT = ("ansible.builtin.set_fact", "set_fact")


def words(value):
    """The variable-like names in a YAML value (its text, its nested keys and values)."""
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", yaml.safe_dump(value) if not isinstance(value, str) else value))


def laundered(registered, sets, defined):
    """The names that carry a register on: a set_fact's fact whose value (or its task's vars) reads a register or
    another such name, and a vars/ variable that reads one; `sets` is [(facts set, names the task reads)], `defined`
    {vars variable: names its value reads}."""
    found, tainted = set(), set(registered)
    while True:
        new = {fact for facts, read in sets for fact in facts if read & tainted}
        new |= {name for name, read in defined.items() if read & tainted}
        if new <= found:
            return found
        found |= new
        tainted |= new


def set_facts(path):
    """[(facts a set_fact task of `path` sets, the names its arguments and vars read)]."""
    found = []
    for task in task_lists(yaml.safe_load(path.read_text())):
        for key in SET_FACT:
            if isinstance(task.get(key), dict):
                facts = {name for name in task[key] if name != "cacheable"}
                found.append((facts, words(list(task[key].values())) | words(task.get("vars") or {})))
    return found


TASK_FILES = sorted(
    [*ROLES.glob("*/tasks/*.yml"), *ROLES.glob("*/handlers/*.yml"), *(ROLES.parent / "playbooks").rglob("*.yml")]
)


def registers(value):
    """Every `register` name anywhere in a parsed playbook (its plays' tasks, blocks and handlers)."""
    if isinstance(value, dict):
        yield from [value["register"]] if isinstance(value.get("register"), str) else []
        value = list(value.values())
    for item in value if isinstance(value, list) else []:
        yield from registers(item)


REGISTERED_ANYWHERE = REGISTERED | {
    name for path in (ROLES.parent / "playbooks").rglob("*.yml") for name in registers(yaml.safe_load(path.read_text()))
}
SETS = [entry for path in TASK_FILES for entry in set_facts(path)]
DEFINED = {name: words(value) for path in VARS for name, value in (yaml.safe_load(path.read_text()) or {}).items()}
LAUNDERED = laundered(REGISTERED_ANYWHERE, SETS, DEFINED)


@pytest.mark.parametrize("path", VARS, ids=[f"{path.parts[-3]}/{path.name}" for path in VARS])
def test_no_vars_file_reads_a_register(path):
    assert REGISTERED, "no register found: the task walk is broken"
    own = yaml.safe_load(path.read_text()) or {}
    # a name this file defines is reported where it reads the copy, not where it is used
    direct = sorted(words(path.read_text()) & REGISTERED_ANYWHERE)
    copied = sorted((words(list(own.values())) - set(own)) & LAUNDERED)
    assert direct == [], f"{path}: vars/ holds constants; decide in a task instead: it reads the registers {direct}"
    assert copied == [], (
        f"{path}: vars/ holds constants; decide in a task instead: it reads {copied}, a register copied through a "
        "set_fact (or a variable that reads one)"
    )


def test_a_register_copied_through_set_fact_is_caught():
    # a vars file reading `b`, where `b: "{{ a }}"` (set_fact) and `a` is registered, or `c` reading `b`
    assert laundered({"a"}, [({"b"}, {"a"}), ({"d"}, {"x"})], {"c": {"b"}, "e": {"y"}}) == {"b", "c"}
    assert laundered({"a"}, [({"b"}, {"c"}), ({"c"}, {"a"})], {}) == {"b", "c"}


@pytest.mark.parametrize("path", VARS, ids=[f"{path.parts[-3]}/{path.name}" for path in VARS])
def test_vars_holds_constants_only(path):
    jinja = [line.strip() for line in path.read_text().splitlines() if re.search(r"\{\{|\{%", line.split("#", 1)[0])]
    assert jinja == [], f"{path}: vars/ holds constants, no Jinja; set what is computed in the task that needs it"


# issue 50: decisions in Python (plugins/filter, plugins/action), the YAML a list of steps
spec = importlib.util.spec_from_file_location("jinja_logic", ROLES.parent / "tools/jinja_logic.py")
jinja_logic = importlib.util.module_from_spec(spec)
spec.loader.exec_module(jinja_logic)
YAML = jinja_logic.files(ROLES.parent)


@pytest.mark.parametrize("path", YAML, ids=[str(path.relative_to(ROLES.parent)) for path in YAML])
def test_no_jinja_block_or_namespace_outside_templates(path):
    found = [
        f"{number}: {line.strip()}"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if not line.lstrip().startswith("#") and ("{%" in line or "namespace(" in line)
    ]
    assert found == [], (
        f"{path}: a Jinja program; move it into a Python filter (plugins/filter/) and call that: {found}"
    )


PREFLIGHTS = sorted(ROLES.glob("*/tasks/preflight.yml"))


@pytest.mark.parametrize("path", PREFLIGHTS, ids=[path.parts[-3] for path in PREFLIGHTS])
def test_no_preflight_is_over_60_lines(path):
    lines = len(path.read_text().splitlines())
    assert lines <= 60, f"{path}: {lines} lines; a preflight is a call of the role's checks and one assert on them"


MAINS = sorted(ROLES.glob("*/tasks/main.yml"))


@pytest.mark.parametrize("path", MAINS, ids=[path.parts[-3] for path in MAINS])
def test_main_is_an_index_of_phases(path):
    lines = len(path.read_text().splitlines())
    steps = [
        task.get("name", "(unnamed)")
        for task in yaml.safe_load(path.read_text())
        if not any(key in task for key in INCLUDES) or {"block", "rescue", "always"} & set(task)
    ]
    assert lines <= 40, f"{path}: {lines} lines; tasks/main.yml is an index of phases, at most 40 lines"
    assert steps == [], f"{path}: tasks/main.yml imports or includes the role's phases only; move into one: {steps}"


def test_the_jinja_logic_is_under_the_limit():
    found = jinja_logic.count(YAML, ROLES.parent)
    total = sum(len(lines) for lines in found.values())
    largest = sorted(((len(lines), path) for path, lines in found.items()), reverse=True)[:10]
    assert total <= jinja_logic.LIMIT, (
        f"{total} lines of Jinja logic in task, vars and playbook YAML (tools/jinja_logic.py --show), above "
        f"{jinja_logic.LIMIT}: move decisions into Python filters; the largest: {largest}"
    )
