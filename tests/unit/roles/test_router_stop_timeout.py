"""smg.service gives smg the time smg itself takes to stop: on SIGTERM smg 1.13.0 keeps admitting for 5 s, then
waits up to its --shutdown-grace-period-secs (default 180) for what runs, streams included (smg-project/smg
model_gateway/src/main.rs:672-674, server.rs:1444-1493 at f8daa88, the same flag and default in the 1.13.0 wheel's
smg/router_args.py). systemd's default TimeoutStopSec (90 s) would SIGKILL it half-way."""

import json

import pytest
import router_role

SERVICES = {"instances": [{"unit": "sglang@0.service", "url": "http://127.0.0.1:30000"}]}


def render(name, **overrides):
    return router_role.render(name, **{"sglang_router_services": SERVICES, **overrides})


def stop_timeout(unit):
    (line,) = [x for x in unit.splitlines() if x.startswith("TimeoutStopSec=")]
    return int(line.split("=", 1)[1])


@pytest.mark.parametrize("grace", [None, 30, 600])
def test_the_unit_waits_longer_than_smg_drains(grace):
    overrides = {} if grace is None else {"sglang_router_shutdown_grace_period": grace}
    args = json.loads(render("router-args.json.j2", **overrides))
    passed = int(args[args.index("--shutdown-grace-period-secs") + 1])
    assert passed == (180 if grace is None else grace)
    assert stop_timeout(render("smg.service.j2", **overrides)) > passed
