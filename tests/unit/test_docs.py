"""The documentation's links work where it is read, and the README stays a front door.

A doc that ships in the tarball (galaxy.yml's build_ignore leaves it in) may link relatively only to
files that ship too; anything else (tests/, lab/, ...) is linked by its repository URL, which must name a
file of this checkout.
"""

import fnmatch
import re
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
    {"README.md", "plugins/README.md", "lab/README.md", "tests/README.md"}
    | {path.relative_to(REPO).as_posix() for path in (REPO / "docs").glob("*.md")}
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
