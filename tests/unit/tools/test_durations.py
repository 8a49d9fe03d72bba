"""tools/durations.py: the slowest tests of a run, read from the JUnit files real pytests wrote."""

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("durations", REPO / "tools/durations.py")
durations = importlib.util.module_from_spec(spec)
spec.loader.exec_module(durations)

SLOW_AND_FAST = """
import time
import pytest

@pytest.fixture(scope="module")
def slow_setup():
    time.sleep(0.6)

def test_fast():
    pass

def test_slow_call():
    time.sleep(0.3)

def test_after_a_slow_setup(slow_setup):
    pass
"""


def junit(tmp_path, suite):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "test_timing.py").write_text(SLOW_AND_FAST)
    xml = tmp_path / "results" / f"{suite}.xml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={xml}",
            str(tmp_path / "test_timing.py"),
        ],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    return xml.parent


def test_the_slowest_first_with_set_up_counted_and_the_suite_named(tmp_path):
    lines = durations.slowest(junit(tmp_path, "lab-services"), 2)
    assert len(lines) == 2
    assert lines[0].split()[-2:] == ["lab-services", "test_timing.py::test_after_a_slow_setup"]
    assert float(lines[0].split()[0]) >= 0.6  # the module fixture's set-up is in its first test's time
    assert lines[1].endswith("test_timing.py::test_slow_call") and float(lines[1].split()[0]) >= 0.3


def test_every_file_of_the_directory_is_read(tmp_path):
    first = junit(tmp_path / "a", "unit")
    second = junit(tmp_path / "b", "lab-others")
    (first / "lab-others.xml").write_bytes((second / "lab-others.xml").read_bytes())
    suites = {case[1] for case in durations.testcases(first)}
    assert suites == {"unit", "lab-others"} and len(durations.testcases(first)) == 6
