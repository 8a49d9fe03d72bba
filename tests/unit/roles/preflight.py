"""The one adapter between the bad-input cases (test_bad_input.py) and the roles' checks: refusal() walks what a
playbook runs before its first change, as ansible-playbook runs it on the lab, and returns the first refusal.

What it evaluates, in the order the playbook file gives (its plays, `roles:`, imports and includes):
- each role's argument spec at the role's entry point (the validate_argument_spec task Ansible puts first), against
  every variable the role sees, templated, under the task name and with the messages Ansible gives;
- the tasks' `when` and `loop`, and set_fact, assert, validate_argument_spec, debug, `meta: end_host`, the imports
  and includes of tasks and roles (`tasks_from`, `vars`, `rolespec_validate`); a template that raises (a lookup, a
  filter) fails its task, as in Ansible;
- the modules that only read (READS: the node, the cluster, the container, its local facts, the staging script's dry
  run): their result is data the case gives in `state`, under the task's `register` (the module's name for
  `setup`), standing in for the lab's node and containers; a callable there is given the task's templated arguments;
- the first task of any other module is the first change: the walk stops there, before its `when`, and the input
  passed (None).
-e values go through ansible-playbook's own option parser and loader, so they carry the origin Ansible gives them
(which the gpulxc.sglang.plain_text test reads).

What it simplifies:
- variable precedence: role defaults < inventory (group `all`, the other groups, the host) < role vars < task vars
  < facts and registered results < extra vars; no play vars, host_vars files or role params;
- tags: `skip_tags` skips a task (with all it imports) tagged so; --tags is modelled by the playbook the tag selects
  (`site.yml --tags=stack` runs playbooks/stack.yml's play);
- hosts one at a time: the run's other hosts first, each to its first change, then the first host, whose run_once
  tasks read their facts (Ansible runs all hosts task by task); an import's `when` is evaluated once, for all it
  imports;
- "before any change" is this static stop at the first task that may change something; that a refused run leaves
  the node and the containers byte for byte as they were stays the lab's to prove (one refused run per playbook).

Issue 49 keeps the cases as data behind this module; the next issue, which moves the checks into Python, replaces
only this adapter (refusal() and what it reads), not the cases.
"""

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml
from ansible.cli.arguments import option_helpers
from ansible.errors import AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from conftest import trusted

REPO = Path(__file__).resolve().parents[3]
LOADER = DataLoader()  # for the file lookup (remove_check.yml reads the role's argument specs)
# Modules that only read: their result is what the case says the lab's node or container answers (`state`).
READS = frozenset(
    {
        "gpulxc.sglang.pct_info",
        "gpulxc.sglang.container_info",
        "gpulxc.sglang.pve_cluster_info",
        "gpulxc.sglang.gpu_capability",
        "ansible.builtin.stat",
        "ansible.builtin.slurp",
        "ansible.builtin.setup",
        "ansible.builtin.script",  # the staging script's --dry-run, the one script before a change
    }
)
IMPORTS = ("ansible.builtin.import_tasks", "ansible.builtin.include_tasks")
ROLES = ("ansible.builtin.import_role", "ansible.builtin.include_role")
# What the walk evaluates; a task of any other module is the first change.
CHECKS = (
    READS
    | {*IMPORTS, *ROLES}
    | {
        "ansible.builtin.set_fact",
        "ansible.builtin.assert",
        "ansible.builtin.validate_argument_spec",
        "ansible.builtin.debug",
        "ansible.builtin.meta",
        "gpulxc.sglang.renamed_variables",  # reads variables only (a deprecation warning)
    }
)
# A task's keywords: its one other key is its action.
KEYWORDS = frozenset(
    {
        "name",
        "when",
        "vars",
        "tags",
        "register",
        "loop",
        "loop_control",
        "delegate_to",
        "run_once",
        "check_mode",
        "changed_when",
        "failed_when",
        "until",
        "retries",
        "delay",
        "async",
        "poll",
        "ignore_errors",
        "no_log",
        "environment",
        "notify",
        "become",
        "become_user",
    }
)


class NeedsState(Exception):
    """A read-only module's result is not in `state`: the case must say what the node or the container answers."""


class _Refused(Exception):
    """A task failed: args[0] is (task name, [messages])."""


class _FirstChange(Exception):
    """The walk reached a task that may change something."""


class _EndHost(Exception):
    """meta: end_host (or end_play) for this host."""


@dataclass(frozen=True)
class Inventory:
    hosts: dict  # host -> its variables (its groups' and its own, merged)
    groups: dict  # group -> its hosts
    limit: tuple  # the run's hosts (-l), the first one first


def lab_inventory(**hosts):
    """What a lab test's ansible-playbook reads (tests/lab/conftest.py): inventories/lab, tests/lab/fast-clock.yml
    and the test's own hosts in sglang_containers, with their variables; limited to the test's hosts."""
    lab = REPO / "inventories/lab"
    sources = [
        _yaml(lab / "hosts.yml")["all"],
        {
            "vars": _yaml(lab / "group_vars/all.yml"),
            "children": {"sglang_containers": {"vars": _yaml(lab / "group_vars/sglang_containers.yml")}},
        },
        {"children": _yaml(REPO / "tests/lab/fast-clock.yml")},
        {"children": {"sglang_containers": {"hosts": hosts}}},
    ]
    group_vars, own, groups = {}, {}, {"all": []}

    def read(name, group, parents):
        group_vars.setdefault(name, {}).update(group.get("vars") or {})
        for host, variables in (group.get("hosts") or {}).items():
            own.setdefault(host, {}).update(variables or {})
            for member in [*parents, name]:
                if host not in groups.setdefault(member, []):
                    groups[member].append(host)
        for child, data in (group.get("children") or {}).items():
            read(child, data or {}, [*parents, name])

    for source in sources:
        read("all", source, [])
    ordered = ["all", *(group for group in group_vars if group != "all")]  # `all` first, the host's own last
    return Inventory(
        {
            host: trusted({k: v for g in ordered if host in groups[g] for k, v in group_vars[g].items()} | own[host])
            for host in own
        },
        groups,
        tuple(hosts),
    )


def refusal(play, variables, *, inventory, state=None, skip_tags=()):
    """The first refusal of `ansible-playbook playbooks/<play>.yml -e '<variables as JSON>'` on the inventory's
    hosts, whose node and containers answer `state`: (task name, [messages]), or None when the run reaches the first
    task that may change something."""
    run = _Run(inventory, _from_command_line(variables), state or {}, frozenset(skip_tags))
    first, *others = inventory.limit
    for host in [*others, first]:  # the first host last: its run_once tasks read the others' facts
        try:
            _Walk(run, host).playbook(play)
        except _Refused as refused:
            return refused.args[0]
        except _FirstChange:
            continue
    return None


def _from_command_line(variables):
    """-e '<json>' as ansible-playbook reads it: its option parser tags the text with its origin (the command line)
    and the loader keeps that origin on every value it parses."""
    if not variables:
        return {}
    parser = option_helpers.create_base_parser("gpulxc-unit")
    option_helpers.add_runtask_options(parser)
    return LOADER.load(parser.parse_args(["-e", json.dumps(variables)]).extra_vars[0])


@cache
def _yaml(path):
    """A YAML file's data ({} when there is no such file); shared, so never changed."""
    return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}


@cache
def _trusted_yaml(path):
    """A role's or a playbook's YAML as Ansible loads it: its strings templates."""
    return trusted(_yaml(path))


def _role_dir(name):
    return REPO / "roles" / name.split(".")[-1]


def _dependencies(role):
    for dependency in _yaml(_role_dir(role) / "meta/main.yml").get("dependencies") or []:
        yield dependency["role"] if isinstance(dependency, dict) else dependency


def _static_roles(tasks, base, seen):
    """The roles that `tasks` import statically (through import_tasks and import_role), their dependencies
    included: Ansible shows their defaults and vars to the whole play, even where the import is skipped."""
    for task in tasks:
        if isinstance(task.get(IMPORTS[0]), str) and "{{" not in task[IMPORTS[0]]:
            yield from _static_roles(_yaml(base / task[IMPORTS[0]]) or [], base, seen)
        elif ROLES[0] in task:
            yield from _static_role(task[ROLES[0]]["name"], task[ROLES[0]].get("tasks_from", "main"), seen)


def _static_role(name, entry, seen):
    if (name, entry) in seen:
        return
    seen.add((name, entry))
    for dependency in _dependencies(name):
        yield from _static_role(dependency, "main", seen)
    yield name
    tasks = _role_dir(name) / "tasks"
    yield from _static_roles(_yaml(tasks / f"{entry}.yml") or [], tasks, seen)


@dataclass
class _Run:
    """What every host's walk of one run shares."""

    inventory: Inventory
    extra: dict
    state: dict
    skip_tags: frozenset
    facts: dict = field(default_factory=dict)  # host -> its facts and registered results


class _Walk:
    """One host's way through a playbook, up to its first change."""

    def __init__(self, run, host):
        self.run, self.host = run, host
        self.facts = run.facts.setdefault(host, {})
        self.defaults, self.role_vars, self.play_hosts = {}, {}, []

    def playbook(self, play):
        path = REPO / "playbooks" / f"{play}.yml"
        for entry in _trusted_yaml(path):
            members = self.run.inventory.groups.get(entry["hosts"], [])
            self.play_hosts = [host for host in self.run.inventory.limit if host in members]
            if self.host not in self.play_hosts:
                continue
            roles = [role["role"] if isinstance(role, dict) else role for role in entry.get("roles") or []]
            seen = set()
            for role in [
                *(r for name in roles for r in _static_role(name, "main", seen)),
                *_static_roles(entry.get("tasks") or [], path.parent, seen),
            ]:
                self.defaults.update(_trusted_yaml(_role_dir(role) / "defaults/main.yml"))
                self.role_vars.update(_trusted_yaml(_role_dir(role) / "vars/main.yml"))
            try:
                for role in roles:
                    self._role(role, "main", {}, validate=True)
                self._tasks(entry.get("tasks") or [], (path.parent, None), {})
            except _EndHost:
                continue

    def _scope(self, task_vars, where):
        """Every variable a task sees (see the module's docstring for the precedence)."""
        run = self.run
        hostvars = {
            host: {**own, **run.facts.get(host, {}), **run.extra, "inventory_hostname": host}
            for host, own in run.inventory.hosts.items()
        }
        magic = {
            "inventory_hostname": self.host,
            "hostvars": hostvars,
            "groups": run.inventory.groups,
            "ansible_play_hosts": self.play_hosts,
            "ansible_play_hosts_all": self.play_hosts,
            "ansible_play_batch": self.play_hosts,
            "ansible_check_mode": False,
            "playbook_dir": str(REPO / "playbooks"),
            "ansible_playbook_python": "/usr/bin/python3",
        }
        if where[1]:
            magic.update(role_path=str(where[0].parent), role_name=where[1])
        return {
            **self.defaults,
            **run.inventory.hosts[self.host],
            **self.role_vars,
            **task_vars,
            **self.facts,
            **run.extra,
            **magic,
        }

    def _role(self, name, entry, task_vars, validate):
        """A role's entry point: its dependencies, its argument spec for `entry`, then tasks/<entry>.yml."""
        base = _role_dir(name)
        self.defaults.update(_trusted_yaml(base / "defaults/main.yml"))
        self.role_vars.update(_trusted_yaml(base / "vars/main.yml"))
        for dependency in _dependencies(name):
            self._role(dependency, "main", {}, validate=True)
        where = (base / "tasks", base.name)
        spec = _yaml(base / "meta/argument_specs.yml").get("argument_specs", {}).get(entry)
        if spec and validate:
            title = f"Validating arguments against arg spec '{entry}'"
            title += f" - {spec['short_description']}" if "short_description" in spec else ""
            self._validate(title, spec.get("options") or {}, {}, self._scope(task_vars, where))
        if (base / "tasks" / f"{entry}.yml").is_file():
            self._tasks(_trusted_yaml(base / "tasks" / f"{entry}.yml"), where, task_vars)

    def _validate(self, name, options, provided, scope):
        """ansible.builtin.validate_argument_spec: every option the task's variables hold, templated, under
        `provided`."""
        try:
            given = Templar(loader=LOADER, variables=scope).template({k: scope[k] for k in options if k in scope})
        except AnsibleError as error:
            raise _Refused((name, [str(error)])) from error
        errors = ArgumentSpecValidator(options).validate({**given, **provided}).error_messages
        if errors:
            raise _Refused((name, errors))

    def _tasks(self, tasks, where, inherited):
        for task in tasks:
            if self.run.skip_tags & set(task.get("tags") or []):
                continue
            (action,) = [key for key in task if key not in KEYWORDS]
            if action not in CHECKS or task.get("changed_when") is True:
                raise _FirstChange
            if task.get("run_once") and self.host != self.run.inventory.limit[0]:
                continue  # it runs on the run's first host only
            try:
                self._task(task, action, where, {**inherited, **(task.get("vars") or {})})
            except AnsibleError as error:  # a template that raises fails its task, with the error
                raise _Refused((task.get("name", action), [str(error)])) from error

    def _task(self, task, action, where, task_vars):
        loop_var = (task.get("loop_control") or {}).get("loop_var", "item")
        items = [None]
        if "loop" in task:
            items = Templar(loader=LOADER, variables=self._scope(task_vars, where)).template(task["loop"])
        ran = False
        for item in items:
            step_vars = {**task_vars, loop_var: item} if "loop" in task else task_vars
            scope = self._scope(step_vars, where)
            conditions, templar = task.get("when", []), Templar(loader=LOADER, variables=scope)
            if all(
                templar.evaluate_conditional(c) for c in (conditions if isinstance(conditions, list) else [conditions])
            ):
                ran = True
                self._action(task, action, where, step_vars, scope)
        if not ran and "register" in task:
            self.facts[task["register"]] = {"changed": False, "skipped": True}

    def _action(self, task, action, where, task_vars, scope):
        name, args, templar = task.get("name", action), task[action], Templar(loader=LOADER, variables=scope)
        if action in IMPORTS:
            path = templar.template(args.get("file") if isinstance(args, dict) else args)
            self._tasks(_trusted_yaml(where[0] / path), where, task_vars)
        elif action in ROLES:
            role, entry = templar.template(args["name"]), templar.template(args.get("tasks_from", "main"))
            self._role(role, entry, task_vars, validate=args.get("rolespec_validate", True))
        elif action == "ansible.builtin.set_fact":
            self.facts.update(templar.template({k: v for k, v in args.items() if k != "cacheable"}))
        elif action == "ansible.builtin.assert":
            that = args["that"] if isinstance(args["that"], list) else [args["that"]]
            if not all(templar.evaluate_conditional(condition) for condition in that):
                message = templar.template(args.get("fail_msg", args.get("msg", "Assertion failed")))
                raise _Refused((name, message if isinstance(message, list) else [message]))
        elif action == "ansible.builtin.validate_argument_spec":
            options = templar.template(args["argument_spec"])
            self._validate(name, options, templar.template(args.get("provided_arguments", {})), scope)
        elif action == "ansible.builtin.meta" and args in ("end_host", "end_play"):
            raise _EndHost
        elif action in READS:
            self._read(task, action, templar)

    def _read(self, task, action, templar):
        name, key = task.get("name", action), task.get("register", action)
        if key not in self.run.state:
            raise NeedsState(f"'{name}' ({action}) reads the node or the container: give state[{key!r}]")
        result = self.run.state[key]
        result = result(templar.template(task[action])) if callable(result) else result
        if result.get("failed"):
            raise _Refused((name, [result.get("msg", ""), *(result[k] for k in ("stderr", "stdout") if result.get(k))]))
        self.facts.update(result.get("ansible_facts") or {})
        if "register" in task:
            self.facts[key] = result
