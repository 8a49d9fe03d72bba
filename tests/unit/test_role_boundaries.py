"""No role reaches into another (issue 50): a role reads what an earlier one did only through the published facts
(ansible_local.gpulxc_*), the stack object and the shared layout of the library role gpulxc (gpulxc_*), never
another role's variables, and writes no file that another role's tasks write.

A role's variables are the names prefixed with its name (`<role>_...`, `_<role>_...`). In each role's tasks,
handlers, vars, defaults, meta and templates this walks the Jinja (inside `{{ }}`/`{% %}`, and the bare expressions
of when/that/until/changed_when/failed_when, read as tools/jinja_logic.py reads them) for the variables of other
roles it reads, the YAML keys for the ones it sets or declares, the import_role/include_role of another role (a
role used as a variable file when its import is `when: false`), and the paths its tasks write (resolved through
the roles' defaults) for a file another role writes too. ALLOWED says, each with its reason, which are by design.
"""

import importlib.util
import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES = REPO / "roles"
spec = importlib.util.spec_from_file_location("jinja_logic", REPO / "tools/jinja_logic.py")
jinja_logic = importlib.util.module_from_spec(spec)
spec.loader.exec_module(jinja_logic)

NAMES = sorted(path.name for path in ROLES.iterdir() if (path / "meta").is_dir())
# the library role: its variables are the shared layout every role defaults its own knobs to, and its tasks
# (job_wait.yml) a helper the roles include with gpulxc_job_* as its arguments
LIBRARY = "gpulxc"
INCLUDE_ROLE = ("ansible.builtin.import_role", "ansible.builtin.include_role", "import_role", "include_role")
# the arguments through which a module writes a path (file_set: each entry's path)
WRITES = {
    "ansible.builtin.file": ("path", "dest", "name"),
    "ansible.builtin.copy": ("dest",),
    "ansible.builtin.template": ("dest",),
    "ansible.builtin.replace": ("path", "dest"),
    "ansible.builtin.lineinfile": ("path", "dest"),
    "ansible.builtin.blockinfile": ("path", "dest"),
    "gpulxc.sglang.file_set": ("directories", "files", "links"),
    "gpulxc.sglang.uv_stack": ("venv", "dir", "stacks_dir"),
}
# (role, what, name): why it is by design. `what` is read or set (a variable), imports (`<role>: <tasks_from>`, or
# `<role>: only its defaults` for a `when: false` import) or writes (a path, resolved through the roles' defaults).
_UV = "uv_venv's setting for the container's one uv (the air-gap wheelhouse, the node's shared cache and its lock)"
_WH = "the wheelhouse holds what the container's roles install"
ALLOWED = {
    ("jit_toolchain", "read", "uv_venv_wheelhouse"): _UV + ": names it in apt's failure hint",
    ("sglang_router", "read", "uv_venv_wheelhouse"): _UV + ": names it in apt's and uv's failure hints",
    ("sglang_router", "read", "uv_venv_cache_dir"): _UV + ": smg's install holds the cache's lock",
    ("sglang_stack", "read", "uv_venv_wheelhouse"): _UV + ": no index when air-gapped, named in the hint",
    ("sglang_stack", "read", "uv_venv_cache_dir"): _UV + ": the resolve holds the cache's lock, shows its progress",
    ("sglang_stack", "read", "uv_venv_python"): _UV + ": a new stack's venv is made from the same interpreter",
    # The wheelhouse builds, on a connected machine, what uv_venv, sglang_stack and sglang_router install in an
    # air-gapped container: it must resolve from their very settings (a copy under wheelhouse_* names would drift
    # from what the container then installs). Passing them from the playbook instead would only move these reads
    # out of this test's sight; the roles publish no fact for them, for nothing runs in the container.
    ("wheelhouse", "imports", "uv_venv: only its defaults"): _WH + ": uv_venv's defaults (the uv pin, the index)",
    ("wheelhouse", "imports", "sglang_router: only its defaults"): _WH + ": sglang_router's defaults (the smg pin)",
    ("wheelhouse", "imports", "sglang_stack: preflight"): _WH + ": the stack's own profile read and checks",
    ("wheelhouse", "set", "uv_venv_container_result"): _WH + ": the stack preflight's Python is the wheelhouse's",
    ("wheelhouse", "set", "sglang_stack_python_choice"): _WH + ": the stack preflight names wheelhouse_python_version",
    ("wheelhouse", "read", "sglang_stack_profile_data"): _WH + ": the profile the stack preflight read",
    ("wheelhouse", "read", "sglang_stack_profile"): _WH + ": the profile's name, in the lock's label",
    ("wheelhouse", "read", "sglang_stack_extra_packages"): _WH + ": the stack's resolve takes them",
    ("wheelhouse", "read", "sglang_stack_overrides"): _WH + ": the stack's resolve takes them",
    ("wheelhouse", "read", "sglang_stack_extra_index_urls"): _WH + ": the indexes the stack resolves from",
    ("wheelhouse", "read", "uv_venv_index_url"): _WH + ": the index uv resolves from",
    ("wheelhouse", "read", "uv_venv_uv_wheel_url"): _WH + ": the uv wheel the container installs",
    ("wheelhouse", "read", "uv_venv_uv_wheel_sha256"): _WH + ": the uv wheel's pin, checked and passed on",
    ("wheelhouse", "read", "sglang_router_version"): _WH + ": the smg pin, checked and resolved",
    # a failed canary goes back through the owners' own entry points, not by writing their files (issue 50)
    ("sglang_services", "imports", "sglang_stack: switch"): "a canary's rollback: the stack's owner switches the venv",
    ("sglang_services", "set", "sglang_stack_switch_to"): "a canary's rollback: the argument of sglang_stack's switch",
    ("sglang_services", "imports", "cuda_surgery: toolkit"): "a canary's rollback: the env file's owner rewrites it",
    # the inventory's word for where the container lives, a default for the servers' metric label `node`
    ("sglang_services", "read", "pct_container_node"): "the inventory's node of the container, a metric label",
    # the Python the venv is made from, as uv_venv read it in the container this run (its register)
    ("sglang_stack", "read", "uv_venv_container_result"): _UV + ": the profile must have wheels for its Python",
    # the library role's layout: each role writes its own .fact file there and makes sure the directory exists
    ("sglang_router", "writes", "/etc/ansible/facts.d"): "the shared facts directory (gpulxc_facts_dir)",
    ("sglang_stack", "writes", "/etc/ansible/facts.d"): "the shared facts directory (gpulxc_facts_dir)",
}
WORD = re.compile(r"(?<![.\w])_?[a-z][a-z0-9_]*")
SUBSCRIPT = re.compile(r"\[\s*['\"](_?[a-z][a-z0-9_]*)['\"]\s*\]")
HOSTVARS = re.compile(r"hostvars\[[^\]]*\]\.(_?[a-z][a-z0-9_]*)")


def owner(name):
    """The role whose variable `name` is (its longest prefix), else None."""
    found = [role for role in NAMES if name.startswith((f"{role}_", f"_{role}_"))]
    return max(found, key=len) if found else None


def names_read(jinja):
    """The variable names a piece of Jinja reads: no attribute (`x.name`), no string but a subscript's."""
    others = SUBSCRIPT.findall(jinja) + HOSTVARS.findall(jinja)
    return set(WORD.findall(jinja_logic.STRING.sub("''", jinja))) | set(others)


def yaml_reads(text):
    """Every name the Jinja of a YAML file's values reads."""
    found = set()
    for document in yaml.compose_all(text, Loader=yaml.SafeLoader):
        for node, bare in jinja_logic.scalars(document):
            if bare or "{{" in node.value or "{%" in node.value:
                lines = node.value.splitlines() or [""]
                found |= {name for _, jinja in jinja_logic.jinja_parts(lines, bare) for name in names_read(jinja)}
    return found


def keys(value):
    """Every mapping key of a parsed YAML value, nested ones too."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from keys(item)


def tasks(value):
    """Every task of a task file, blocks opened."""
    for task in value if isinstance(value, list) else []:
        if isinstance(task, dict):
            yield task
            for key in ("block", "rescue", "always"):
                yield from tasks(task.get(key))


def written(task):
    """The path expressions a task writes."""
    for module, arguments in WRITES.items():
        args = task.get(module) or task.get(module.rsplit(".", 1)[-1])
        if not isinstance(args, dict):
            continue
        for argument in arguments:
            value = args.get(argument)
            for entry in value if isinstance(value, list) else [value]:
                path = entry.get("path") if isinstance(entry, dict) else entry
                if isinstance(path, str):
                    yield path


DEFAULTS = {
    name: value
    for path in ROLES.glob("*/defaults/main.yml")
    for name, value in (yaml.safe_load(path.read_text()) or {}).items()
    if isinstance(value, str)
}


def resolved(path):
    """A path expression with each `{{ variable }}` replaced by that variable's default, as far as they go."""
    for _ in range(10):
        new = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: DEFAULTS.get(m.group(1), "<" + m.group(1) + ">"), path)
        if new == path:
            break
        path = new
    return re.sub(r"\s+", " ", path.strip())


def role_files(role, *dirs, pattern="*.yml"):
    return sorted(path for folder in dirs for path in (ROLES / role / folder).rglob(pattern) if path.is_file())


def crossings(role):
    """[(what, name, where)] of every way `role` reaches into another role."""
    found = []
    for path in role_files(role, "tasks", "handlers", "vars", "defaults", "meta"):
        text = path.read_text()
        data = list(yaml.safe_load_all(text))
        where = str(path.relative_to(REPO))
        found += [("read", name, where) for name in yaml_reads(text)]
        found += [("set", name, where) for name in keys(data)]
        for task in tasks(data[0] if data and path.parts[-2] in ("tasks", "handlers") else None):
            for key in INCLUDE_ROLE:
                if isinstance(task.get(key), dict):
                    other = task[key].get("name", "").rsplit(".", 1)[-1]
                    how = "only its defaults" if task.get("when") is False else task[key].get("tasks_from", "main")
                    found.append(("imports", f"{other}: {how}", where))
    for path in role_files(role, "templates", pattern="*"):
        lines = path.read_text().splitlines()
        names = {name for _, jinja in jinja_logic.jinja_parts(lines, False) for name in names_read(jinja)}
        found += [("read", name, str(path.relative_to(REPO))) for name in names]
    theirs = {(what, name, where) for what, name, where in found if owner(name) not in (role, LIBRARY, None)}
    theirs |= {entry for entry in found if entry[0] == "imports" and entry[1].split(":")[0] not in (role, LIBRARY)}
    return sorted(theirs)


def writers():
    """{resolved path: {role: [files of its tasks that write it]}}."""
    found = {}
    for role in NAMES:
        for path in role_files(role, "tasks", "handlers"):
            for task in tasks(yaml.safe_load(path.read_text())):
                for dest in written(task):
                    if resolved(dest).startswith("<item"):
                        continue  # a loop's item: each item's path is not known here
                    found.setdefault(resolved(dest), {}).setdefault(role, []).append(path.name)
    return found


@pytest.mark.parametrize("role", NAMES)
def test_no_role_reads_or_sets_another_roles_variables(role):
    found = [(what, name, where) for what, name, where in crossings(role) if (role, what, name) not in ALLOWED]
    assert found == [], (
        f"{role} reaches into other roles' variables (read them from ansible_local.gpulxc_* or the stack object, "
        f"or allow one in ALLOWED with its reason): {found}"
    )


def test_no_role_writes_a_file_another_role_writes():
    shared = {
        path: roles
        for path, roles in writers().items()
        if len(roles) > 1 and not all((role, "writes", path) in ALLOWED for role in roles)
    }
    assert shared == {}, f"files written by more than one role (one owner, the others go through it): {shared}"


def test_every_allowed_entry_is_still_there():
    found = {(role, what, name) for role in NAMES for what, name, _ in crossings(role)}
    found |= {(role, "writes", path) for path, roles in writers().items() if len(roles) > 1 for role in roles}
    stale = sorted(set(ALLOWED) - found)
    assert stale == [], f"ALLOWED names crossings that are gone (or the walk no longer sees them): {stale}"
