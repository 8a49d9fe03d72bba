"""tools/jinja_logic.py: the lines of Jinja logic in task, vars and playbook YAML (issue 50). The cases are in
test_jinja_logic.yaml (a YAML file, the line numbers counted)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("jinja_logic", REPO / "tools/jinja_logic.py")
jinja_logic = importlib.util.module_from_spec(spec)
spec.loader.exec_module(jinja_logic)

CASES = yaml.safe_load(Path(__file__).with_suffix(".yaml").read_text())


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_case(case):
    assert sorted(jinja_logic.logic_lines(case["yaml"])) == case["lines"]


def tree(root):
    """A checkout with 3 lines of logic in a role's tasks, 1 in a playbook, and a template that is not read."""
    for name, text in {
        "roles/r/tasks/main.yml": '- set_fact:\n    a: "{{ b | map(\'int\') }}"\n    c: "{{ d ~ e }}"\n'
        '    f: "{{ g if h else i }}"\n',
        "roles/r/templates/t.yml": 'a: "{% for x in y %}{{ x ~ z }}{% endfor %}"\n',
        "roles/r/vars/main.yml": 'a: "{{ b }}"\n',
        "playbooks/tasks/t.yml": '- debug:\n    msg: "{{ a | select | list }}"\n',
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def run(*args):
    return subprocess.run(
        [sys.executable, str(REPO / "tools/jinja_logic.py"), *args], check=False, capture_output=True, text=True
    )


def test_the_files_counted_are_tasks_vars_defaults_and_playbooks_not_templates(tmp_path):
    names = [str(path.relative_to(tmp_path)) for path in jinja_logic.files(tree(tmp_path))]
    assert names == ["playbooks/tasks/t.yml", "roles/r/tasks/main.yml", "roles/r/vars/main.yml"]


def test_each_file_then_the_total_and_the_limit(tmp_path):
    result = run("--root", str(tree(tmp_path)))
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stderr
    assert [line.split() for line in lines] == [
        ["3", "roles/r/tasks/main.yml"],
        ["1", "playbooks/tasks/t.yml"],
        ["4", "total", "lines", "of", "Jinja", "logic", "(2", "files)"],
    ]
    above = run("--root", str(tmp_path), "--limit", "3")
    assert above.returncode == 1
    assert "4 lines of Jinja logic, above the limit of 3" in above.stderr
    assert run("--root", str(tmp_path), "--limit", "4").returncode == 0


def test_show_prints_each_line_counted(tmp_path):
    shown = run("--show", str(tree(tmp_path) / "roles/r/tasks/main.yml")).stdout
    assert '   4: f: "{{ g if h else i }}"' in shown
