#!/usr/bin/env python3
"""The slowest tests of a test run, from the JUnit XML files its pytests wrote (tools/test).

    tools/durations.py DIRECTORY [COUNT]

Each file is named after its suite (lab-services.xml: the suite lab, its lane services); a test's time is the sum
of its set-up, call and tear-down, as pytest writes it in the testcase's `time`. Standard library only.
"""

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def testcases(directory):
    """[(seconds, suite file's stem, test id)] of every testcase in DIRECTORY/*.xml."""
    found = []
    for path in sorted(Path(directory).glob("*.xml")):
        for case in ET.parse(path).iter("testcase"):
            name = case.get("classname", "").replace(".", "/") + ".py::" + case.get("name", "")
            found.append((float(case.get("time") or 0), path.stem, name))
    return found


def slowest(directory, count=30):
    """The `count` slowest testcases, slowest first, as printable lines."""
    cases = sorted(testcases(directory), key=lambda case: -case[0])[:count]
    return [f"{seconds:8.1f} s  {suite:<16} {name}" for seconds, suite, name in cases]


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit(__doc__.strip())
    lines = slowest(argv[1], int(argv[2]) if len(argv) == 3 else 30)
    print(f"the {len(lines)} slowest tests (set-up, call and tear-down):")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv)
