#!/usr/bin/env python3
"""Count the lines of Jinja logic in the collection's task, handler, vars, defaults and playbook YAML (issue 50).

    tools/jinja_logic.py [--limit N] [--show] [--root DIR] [FILE ...]

Decisions belong in Python (plugins/filter, plugins/action): what is left in YAML should be references to
variables and plain conditions. Without FILE, the files counted are roles/*/{tasks,handlers,vars,defaults}/**/*.yml,
playbooks/**/*.yml, site.yml, rolling.yml and remove.yml under --root (default: this checkout); templates are
not counted (a template is where Jinja belongs). Prints each file with its count, the largest first, then the
total; exits 1 when the total is above --limit (default 100).

What a line of logic is. Only the Jinja in a YAML scalar is read: the text inside `{{ }}` and `{% %}`, and the
whole value of a key Ansible evaluates as a bare expression (`when`, `changed_when`, `failed_when`, `until`,
`break_when`, and `that` of an assert). Comments, keys, and text around the delimiters (a shell script, a
message) are not. A physical line of the file is one line of logic when:
  1. it holds part of a scalar that contains a Jinja statement (`{% %}`: a set, for, if, macro...): every
     non-blank line of such a scalar counts, its plain `{{ ns.items }}` too, for the whole scalar is a program; or
  2. its Jinja text, string literals removed, has one of:
     - `~` (a string built by concatenation);
     - the keyword `if` or `else` (an inline conditional; a continued one counts on each line that has either);
     - a call of a filter or test that reshapes data: see SHAPING below (select, reject, map, combine, zip,
       regex_replace, ternary, ...).
A plain reference is not logic, with its conversions and fallbacks: `{{ x }}`, `{{ x | default(y) | int }}`,
`{{ lookup('...', x).key }}`, a comparison, `and`/`or`/`not`. A line is counted once, however much logic it holds.
Standard library and PyYAML only.
"""

import argparse
import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
LIMIT = 100
PATTERNS = (
    "roles/*/tasks/**/*.yml",
    "roles/*/handlers/**/*.yml",
    "roles/*/vars/**/*.yml",
    "roles/*/defaults/**/*.yml",
    "playbooks/**/*.yml",
    "site.yml",
    "rolling.yml",
    "remove.yml",
)
# keys whose value Ansible evaluates as a Jinja expression without delimiters
BARE = {"when", "changed_when", "failed_when", "until", "break_when", "that"}
# filters and tests that select, transform or combine data: a loop or a computation written in Jinja
SHAPING = {
    "batch",
    "combine",
    "community.general.dict",
    "dict",
    "dict2items",
    "difference",
    "flatten",
    "groupby",
    "intersect",
    "items2dict",
    "map",
    "max",
    "min",
    "namespace",
    "product",
    "regex_findall",
    "regex_replace",
    "regex_search",
    "reject",
    "rejectattr",
    "select",
    "selectattr",
    "slice",
    "sort",
    "split",
    "subelements",
    "sum",
    "symmetric_difference",
    "ternary",
    "union",
    "unique",
    "zip",
    "zip_longest",
}
STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
CALLED = re.compile(r"(?:\|\s*|\bis\s+(?:not\s+)?)([A-Za-z_][A-Za-z0-9_.]*)")
TAG = re.compile(r"(\{\{|\{%|\{#|\}\}|%\}|#\})")
BLOCK_HEADER = re.compile(r"^\s*[|>][-+0-9]*\s*$")


def shaping(text):
    """Whether Jinja expression text (string literals removed) has a `~`, an inline if/else or a shaping call."""
    text = STRING.sub("''", text)
    if "~" in text or {"if", "else"} & set(WORD.findall(text)):
        return True
    # `map('select', ...)`-style names are string literals, removed above: the outer map already counts
    return any(name in SHAPING or name.rsplit(".", 1)[-1] in SHAPING for name in CALLED.findall(text))


def jinja_parts(lines, bare):
    """[(line number in `lines`, that line's Jinja text)], following `{{ }}`/`{% %}` across lines; for a bare
    expression, every line is Jinja."""
    if bare and not any("{{" in line or "{%" in line for line in lines):
        return list(enumerate(lines))
    parts, inside = [], None
    for number, line in enumerate(lines):
        text, position = [], 0
        for match in TAG.finditer(line):
            token = match.group()
            if inside is None and token in ("{{", "{%", "{#"):
                inside, position = token, match.end()
            elif inside is not None and token == {"{{": "}}", "{%": "%}", "{#": "#}"}[inside]:
                if inside != "{#":
                    text.append(line[position : match.start()])
                inside = None
        if inside in ("{{", "{%"):
            text.append(line[position:])
        parts.append((number, " ".join(text)))
    return parts


def scalar_lines(node, source):
    """The source lines a scalar node spans, its first cut at its start and its last at its end."""
    start, end = node.start_mark, node.end_mark
    lines = list(source[start.line : end.line + 1]) or [""]
    if start.line == end.line:
        lines[0] = lines[0][start.column : end.column]
    else:
        lines[0], lines[-1] = lines[0][start.column :], lines[-1][: end.column]
    if node.style in ("|", ">") and BLOCK_HEADER.match(lines[0]):
        lines[0] = ""
    return lines


def scalars(node, bare=False):
    """Every scalar node of the YAML tree, with whether Ansible reads it as a bare expression."""
    if isinstance(node, yaml.ScalarNode):
        yield node, bare
    elif isinstance(node, yaml.SequenceNode):
        for child in node.value:
            yield from scalars(child, bare)
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield from scalars(value, isinstance(key, yaml.ScalarNode) and key.value in BARE)


def logic_lines(text):
    """{line number (1-based): the line} of the lines of Jinja logic in one YAML file's text."""
    source = text.splitlines()
    found = {}
    for document in yaml.compose_all(text, Loader=yaml.SafeLoader):
        for node, bare in scalars(document):
            if not isinstance(node.value, str) or not (bare or "{{" in node.value or "{%" in node.value):
                continue
            first = node.start_mark.line
            lines = scalar_lines(node, source)
            program = "{%" in node.value
            for number, jinja in jinja_parts(lines, bare):
                if (program and lines[number].strip()) or (jinja.strip() and shaping(jinja)):
                    found[first + number + 1] = source[first + number]
    return found


def files(root):
    """The YAML files counted, relative to `root`."""
    root = Path(root)
    return sorted({path for pattern in PATTERNS for path in root.glob(pattern) if path.is_file()})


def count(paths, root=None):
    """{path as given or relative to root: {line number: line}} for every path with logic."""
    found = {}
    for path in paths:
        lines = logic_lines(Path(path).read_text())
        if lines:
            found[str(Path(path).relative_to(root)) if root else str(path)] = lines
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="YAML files to count (default: the collection's, under --root)")
    parser.add_argument("--root", default=str(REPO), help="the checkout to count (default: this one)")
    parser.add_argument("--limit", type=int, default=LIMIT, help=f"most lines allowed (default {LIMIT})")
    parser.add_argument("--show", action="store_true", help="print each line counted")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    found = count(args.files, None) if args.files else count(files(root), root)
    for path, lines in sorted(found.items(), key=lambda item: (-len(item[1]), item[0])):
        print(f"{len(lines):5d}  {path}")
        if args.show:
            for number, line in sorted(lines.items()):
                print(f"         {number:4d}: {line.strip()}")
    total = sum(len(lines) for lines in found.values())
    print(f"{total:5d}  total lines of Jinja logic ({len(found)} files)")
    if total > args.limit:
        print(
            f"jinja_logic: {total} lines of Jinja logic, above the limit of {args.limit}: move the decisions into "
            "a Python filter or action plugin (plugins/filter/, plugins/action/) and call it from the task",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
