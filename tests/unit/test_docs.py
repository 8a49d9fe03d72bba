"""The documentation's links work where it is read, and the README stays a front door.

A doc that ships in the tarball (galaxy.yml's build_ignore leaves it in) may link relatively only to
files that ship too; anything else (tests/, lab/, ...) is linked by its repository URL, which must name a
file of this checkout.
"""

import fnmatch
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
GALAXY = yaml.safe_load((REPO / "galaxy.yml").read_text())
REPOSITORY_FILE = re.compile(re.escape(GALAXY["repository"]) + r"/(?:blob|tree)/main/([^#?]+)")
# What ansible-galaxy leaves out whatever build_ignore says (ansible/galaxy/collection/__init__.py).
ALWAYS_LEFT_OUT = ["MANIFEST.json", "FILES.json", "galaxy.yml", "galaxy.yaml", ".git", "*.pyc", "*.retry"]
ALWAYS_LEFT_OUT += ["tests/output", "%s-%s-*.tar.gz" % (GALAXY["namespace"], GALAXY["name"])]
LEFT_OUT = [*ALWAYS_LEFT_OUT, *GALAXY.get("build_ignore", [])]
README_LIMIT = 10 * 1024

DOCS = sorted(
    {"README.md", "CONTRIBUTING.md", "plugins/README.md", "lab/README.md", "tests/README.md"}
    | {path.relative_to(REPO).as_posix() for path in (REPO / "docs").glob("*.md")}
    | {path.relative_to(REPO).as_posix() for path in (REPO / "roles").glob("*/README.md")}
)
CODE = re.compile(r"^```.*?^```|`[^`\n]*`", re.M | re.S)  # links inside code are not links
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def ships(path):
    """Whether `path` (relative to the repository) is in the tarball: ansible-galaxy skips a file when it
    or one of its directories matches a pattern (fnmatch on the relative path)."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    return not any(fnmatch.fnmatch(prefix, pattern) for prefix in prefixes for pattern in LEFT_OUT)


def links(doc):
    """Every link target in `doc` (a path relative to the repository), outside code."""
    return LINK.findall(CODE.sub("", (REPO / doc).read_text()))


def relative_links(doc):
    """{target as written: the path it names, relative to the repository} of the doc's relative links."""
    found = {}
    for target in links(doc):
        path = target.split("#", 1)[0]
        if not path or re.match(r"^[a-z][a-z0-9+.-]*:", path):
            continue
        resolved = (REPO / doc).parent.joinpath(path).resolve()
        found[target] = resolved.relative_to(REPO).as_posix() if resolved.is_relative_to(REPO) else str(resolved)
    return found


def existing(doc):
    if not (REPO / doc).is_file():
        pytest.skip("%s is not there" % doc)
    return doc


def test_the_shipping_rule_reads_build_ignore():
    assert ships("roles/sglang_stack/tasks/main.yml") and ships("docs/services.md") and ships("README.md")
    assert not ships("tests/lab/test_drift.py") and not ships("lab/README.md") and not ships("galaxy.yml")
    assert all(not ships(pattern) for pattern in GALAXY["build_ignore"] if "*" not in pattern)


@pytest.mark.parametrize("doc", DOCS)
def test_every_relative_link_names_a_file_of_the_checkout(doc):
    broken = [target for target, path in relative_links(existing(doc)).items() if not (REPO / path).exists()]
    assert not broken, "%s links to what is not there: %s" % (doc, broken)


@pytest.mark.parametrize("doc", [doc for doc in DOCS if ships(doc)])
def test_a_shipped_doc_links_relatively_only_to_files_that_ship(doc):
    left_out = [target for target, path in relative_links(existing(doc)).items() if not ships(path)]
    assert not left_out, "%s: not in the tarball, link %s/blob/main/<path> instead: %s" % (
        doc,
        GALAXY["repository"],
        left_out,
    )


@pytest.mark.parametrize("doc", DOCS)
def test_every_repository_link_names_a_file_of_the_checkout(doc):
    named = [m.group(1).rstrip("/") for target in links(existing(doc)) if (m := REPOSITORY_FILE.match(target))]
    missing = [path for path in named if not (REPO / path).exists()]
    assert not missing, "%s links to repository paths that are not there: %s" % (doc, missing)


def test_the_readme_is_at_most_10_kb():
    size = len((REPO / "README.md").read_bytes())
    assert size <= README_LIMIT, "README.md is %d bytes; move details to docs/ (limit %d)" % (size, README_LIMIT)


ROLE_READMES = sorted(path.relative_to(REPO).as_posix() for path in (REPO / "roles").glob("*/README.md"))


def test_every_role_has_a_readme():
    # galaxy-importer refuses a collection with a role without one ("No role readme found")
    roles = sorted(path.name for path in (REPO / "roles").iterdir() if path.is_dir())
    assert [doc.split("/")[1] for doc in ROLE_READMES] == roles


def test_the_role_readmes_list_what_their_argument_specs_say():
    argv = [sys.executable, str(REPO / "tools/role_readmes"), "--check"]
    run = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("doc", ROLE_READMES)
def test_a_role_readme_example_sets_only_variables_a_role_declares(doc):
    declared = set()
    for spec in (REPO / "roles").glob("*/meta/argument_specs.yml"):
        for entry in yaml.safe_load(spec.read_text())["argument_specs"].values():
            declared |= set(entry.get("options") or {})
    prefixes = tuple(path.name + "_" for path in (REPO / "roles").iterdir())
    examples = re.findall(r"^```yaml\n(.*?)^```", (REPO / doc).read_text(), re.M | re.S)
    named = set(re.findall(r"^\s*([a-z][a-z0-9_]*):", "".join(examples), re.M))
    unknown = sorted(name for name in named if name.startswith(prefixes) and name not in declared)
    assert not unknown, "%s sets variables no role declares: %s" % (doc, unknown)


def plugin_names():
    """Every plugin the collection has, by directory: file names, and each filter and test a file defines."""
    names = {}
    for kind in ("modules", "module_utils", "plugin_utils", "doc_fragments", "lookup", "connection"):
        names[kind] = sorted(p.stem for p in (REPO / "plugins" / kind).glob("*.py") if p.stem != "__init__")
    for kind, cls, method in (("filter", "FilterModule", "filters"), ("test", "TestModule", "tests")):
        found = set()
        for path in (REPO / "plugins" / kind).glob("*.py"):
            spec = importlib.util.spec_from_file_location("gpulxc_doc_check_" + path.stem, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            found |= set(getattr(getattr(module, cls)(), method)())
        names[kind] = sorted(found)
    return names


def test_the_plugins_readme_names_every_plugin():
    text = (REPO / "plugins/README.md").read_text()
    missing = {kind: [n for n in names if "`%s`" % n not in text] for kind, names in plugin_names().items()}
    missing = {kind: names for kind, names in missing.items() if names}
    assert not missing, "plugins/README.md does not name: %s" % missing


def test_the_version_the_released_changelog_and_the_readme_agree():
    """galaxy.yml names the release being made: the newest released one while no change waits in a fragment, a
    newer one once one does (antsibull-changelog release reads it there; a build from main must not install as the
    release it follows, which ansible-galaxy skips as "Nothing to do"). The README installs that tarball."""
    version = GALAXY["version"]
    releases = yaml.safe_load((REPO / "changelogs/changelog.yaml").read_text())["releases"]
    newest = max(releases, key=lambda v: tuple(int(part) for part in v.split(".")))
    pending = sorted(p.name for p in (REPO / "changelogs/fragments").glob("*.y*ml"))
    numbers = (tuple(int(part) for part in version.split(".")), tuple(int(part) for part in newest.split(".")))
    if pending:
        assert numbers[0] > numbers[1], "galaxy.yml says %s, released already; fragments wait: %s" % (version, pending)
    else:
        assert newest == version, "galaxy.yml says %s, the changelog's newest release is %s" % (version, newest)
    assert "\nv%s\n" % newest in (REPO / "CHANGELOG.rst").read_text()
    tarballs = set(re.findall(r"gpulxc-sglang-([0-9][^ )`]*?)\.tar\.gz", (REPO / "README.md").read_text()))
    assert tarballs == {version}, "README.md installs %s, galaxy.yml's version is %s" % (sorted(tarballs), version)
