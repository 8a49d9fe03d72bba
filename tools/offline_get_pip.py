"""Offline stand-in for ansible-test's get-pip bootstrap (its download host is unreachable here).

ansible-test runs this file as get-pip.py with pip's options and the packages to install; it
bootstraps pip from the interpreter's own ensurepip, then installs those packages from the index.
"""

import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"])
subprocess.check_call([sys.executable, "-m", "pip", "install", *args])
