"""jit_toolchain checks each tool by running it (templates/tools.sh.j2, templated as Ansible does, run by bash with
stand-in tools first on PATH): a tool that fails names the Debian packages owning its path and its link target for
the reinstall (gpulxc.sglang.jit_toolchain_repair reads the script's output); one no package owns is left with none,
which stops the run naming it."""

import subprocess
from pathlib import Path

import pytest
import yaml
from ansible.template import Templar
from ansible_collections.gpulxc.sglang.plugins.filter.jit_toolchain import (
    jit_toolchain_repair,
    jit_toolchain_verify_errors,
)
from conftest import trusted

ROLE = Path(__file__).resolve().parents[3] / "roles/jit_toolchain"


def run_script(tmp_path, owners):
    """The role's tool check (templates/tools.sh.j2), templated with the role's vars (with owners: the repair's, in
    tasks/install.yml; without: the final check's, in tasks/verify.yml), run by bash with the stand-in tools first on
    PATH."""
    variables = trusted({**yaml.safe_load((ROLE / "vars/main.yml").read_text()), "_jit_toolchain_owners": owners})
    script = Templar(variables=variables).template(trusted((ROLE / "templates/tools.sh.j2").read_text()))
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}
    return subprocess.run(["/bin/bash", "-c", script], env=env, capture_output=True, text=True, check=False)


def broken(tmp_path, failing=(), owners=None):
    """_jit_toolchain_broken for stand-in tools: those in `failing` exit 1; dpkg-query knows `owners` (path -> line)."""
    bin_dir, include = tmp_path / "bin", tmp_path / "include"
    bin_dir.mkdir()
    include.mkdir()
    if "the Python headers" not in failing:
        (include / "Python.h").write_text("")
    tools = {"ninja": "ninja" in failing, "g++": "g++" in failing}
    for name, fails in tools.items():
        (bin_dir / name).write_text(f"#!/bin/sh\nexit {1 if fails else 0}\n")
    (bin_dir / "python3").write_text(f"#!/bin/sh\necho {include}\n")
    table = "\n".join(f'  "{path}") echo "{line}" ;;' for path, line in (owners or {}).items())
    (bin_dir / "dpkg-query").write_text(f'#!/bin/bash\ncase "$2" in\n{table}\n  *) exit 1 ;;\nesac\n')
    (bin_dir / "readlink").write_text('#!/bin/sh\n[ "$2" = /usr/bin/g++ ] && echo /usr/bin/g++-12 || echo "$2"\n')
    for path in bin_dir.iterdir():
        path.chmod(0o755)
    proc = run_script(tmp_path, owners=True)
    assert proc.returncode == 0, proc.stderr
    repair = jit_toolchain_repair(proc.stdout.splitlines())
    return repair["broken"], bool(repair["errors"])


def test_tools_that_run_are_left_alone(tmp_path):
    assert broken(tmp_path) == ([], False)


@pytest.mark.parametrize(
    ("tool", "owners", "packages"),
    [
        ("ninja", {"/usr/bin/ninja": "ninja-build: /usr/bin/ninja"}, ["ninja-build"]),
        # the link is g++'s, the binary it points to g++-12's: both are reinstalled
        ("g++", {"/usr/bin/g++": "g++: /usr/bin/g++", "/usr/bin/g++-12": "g++-12: /usr/bin/g++-12"}, ["g++", "g++-12"]),
        # a diverted path names two packages; an architecture-qualified name is kept as apt takes it
        ("g++", {"/usr/bin/g++-12": "g++-12:amd64, gcc-doc: /usr/bin/g++-12"}, ["g++-12:amd64", "gcc-doc"]),
    ],
)
def test_a_tool_that_fails_names_the_packages_of_its_path_and_link_target(tmp_path, tool, owners, packages):
    found, stop = broken(tmp_path, failing=[tool], owners=owners)
    assert [(b["tool"], sorted(b["packages"])) for b in found] == [(tool, packages)]
    assert stop is False


def test_missing_python_headers_name_their_package(tmp_path):
    header = str(tmp_path / "include/Python.h")
    found, _ = broken(tmp_path, failing=["the Python headers"], owners={header: f"libpython3.11-dev:amd64: {header}"})
    assert found == [{"tool": "the Python headers", "path": header, "packages": ["libpython3.11-dev:amd64"]}]


def test_a_tool_no_package_owns_stops_the_run(tmp_path):
    found, stop = broken(tmp_path, failing=["ninja", "g++"], owners={"/usr/bin/g++": "g++: /usr/bin/g++"})
    assert [(b["tool"], b["packages"]) for b in found] == [("ninja", []), ("g++", ["g++"])]
    assert stop is True


@pytest.mark.parametrize("failing", [[], ["ninja"], ["g++"], ["the Python headers"], ["ninja", "g++"]])
def test_the_final_check_fails_naming_each_tool_that_does_not_run(tmp_path, failing):
    broken(tmp_path, failing=failing)  # the stand-in tools
    proc = run_script(tmp_path, owners=False)
    assert (proc.returncode != 0) == bool(failing), proc.stderr
    assert [line.split(" (")[0] for line in proc.stderr.splitlines()] == failing, proc.stderr
    errors = jit_toolchain_verify_errors({"rc": proc.returncode, "stderr": proc.stderr}, ["ninja-build"])
    assert bool(errors) == bool(failing) and all(f"{name} (" in errors[0] for name in failing), errors
