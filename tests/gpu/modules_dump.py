"""Test instrument for the real-GPU run (tests/gpu/sglang_run_b.sh puts it in the venv with a .pth, then takes it
out): every Python process of the servers writes its sys.modules when asked, so the run can show which of the
venv's packages a running server imports. Asked by touching TRIGGER; each process writes DIR/<pid>.json once per
touch. A daemon thread per process, polling once a second; spawned children (sglang's schedulers) start their own
from the .pth, forked ones from the at-fork hook.
"""

import contextlib
import json
import os
import sys
import threading
import time

DIR = "/tmp/gpulxc-modules"
TRIGGER = DIR + "/trigger"


def _dump():
    modules = {name: getattr(module, "__file__", None) for name, module in list(sys.modules.items())}
    path = f"{DIR}/{os.getpid()}.json"
    with open(path + ".tmp", "w") as handle:
        json.dump({"pid": os.getpid(), "argv": sys.argv, "modules": modules}, handle)
    os.replace(path + ".tmp", path)


def _watch():
    seen = None
    while True:
        time.sleep(1)
        try:
            stamp = os.stat(TRIGGER).st_mtime
        except OSError:
            continue
        if stamp != seen:
            seen = stamp
            with contextlib.suppress(OSError):
                _dump()


def start():
    threading.Thread(target=_watch, name="gpulxc-modules-dump", daemon=True).start()


start()
os.register_at_fork(after_in_child=start)
