#!/usr/bin/python
# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: smg_workers
short_description: Drain SGLang servers at SGLang's model gateway (smg) before a restart, re-admit them after
version_added: 0.1.0
description:
  - Talks to the smg router that the role C(gpulxc.sglang.sglang_router) set up on the same host - its address
    from C(router-args.json), its control-plane admin key from the root-only C(control-plane-key), both in
    O(router_dir). Where they do not exist there is no router and nothing to do.
  - V(drained) removes each worker from the router (smg marks it C(draining) and sends it no new request), then
    waits until the requests it still runs are done - those the router counts for it and those the server
    reports on C(GET /v1/loads) (asked of its scheduler, live), or on C(/metrics) where it has no C(/v1/loads) or
    wants a key for it (C(sglang:num_running_reqs) + C(sglang:num_queue_reqs), with C(--enable-metrics); those
    gauges keep their last busy value for up to 30 s once the server is idle).
    SGLang 0.5.12 drains on SIGTERM too (what runs finishes), but the router would go on sending it new requests
    until its health checks fail, and its port stays closed for the whole restart.
  - V(admitted) registers each worker that the router does not list (smg checks its health before routing to
    it) and, with O(wait), waits until the router reports every one C(ready) and healthy.
  - A router that does not answer is reported as a warning and changes nothing - smg registers its workers from
    its arguments when it starts.
author:
  - gpulxc.sglang developers (@gpulxc)
extends_documentation_fragment:
  - gpulxc.sglang.attributes
attributes:
  check_mode:
    support: full
    details: Reads the router's worker list and reports what it would drain or admit.
  diff_mode:
    support: full
    details: The router's workers and their states, before and after.
options:
  urls:
    description: The workers, as the router knows them (for example C(http://127.0.0.1:30003)).
    type: list
    elements: str
    required: true
  state:
    description: V(drained) before a restart, V(admitted) after the server is healthy again.
    type: str
    required: true
    choices: [drained, admitted]
  router_dir:
    description: The router's configuration directory (C(sglang_router_dir)).
    type: path
    default: /etc/smg
  worker_key:
    description:
      - The key the workers demand (C(sglang_services_api_key)), handed to smg with each worker it adds (smg
        1.13.0 adds a worker keyless unless the request names its key, and then cannot even detect its backend,
        its C(/v1/models) answering 401).
      - Empty is the router's own C(gateway-key) in O(router_dir) (the servers' key as the router last wrote it);
        the servers' role passes its key, which may be newer than the router's.
    type: str
    default: ""
    version_added: 0.2.0
  timeout:
    description:
      - V(drained) - seconds to wait for the requests in flight; past it the module warns and returns, and the
        restart that follows cuts what is still running.
      - V(admitted) - seconds to wait for the router to report the workers ready (with O(wait)); past it, fails.
    type: int
    default: 120
  wait:
    description: With V(admitted), wait until the router routes to every worker.
    type: bool
    default: true
  interval:
    description: Seconds between polls.
    type: float
    default: 0.25
"""

EXAMPLES = r"""
- name: Drain instance 3 at the router
  gpulxc.sglang.smg_workers:
    urls: [http://127.0.0.1:30003]
    state: drained

- name: Restart it
  ansible.builtin.systemd_service:
    name: sglang@3.service
    state: restarted

- name: Back into rotation once healthy
  gpulxc.sglang.smg_workers:
    urls: [http://127.0.0.1:30003]
    state: admitted
"""

RETURN = r"""
router:
  description: The router's address; null where there is none.
  returned: always
  type: str
  sample: http://127.0.0.1:8000
workers:
  description: What the router reports for each worker of O(urls) at the end (C(absent) where it does not list it).
  returned: always
  type: dict
  sample: {"http://127.0.0.1:30003": "absent"}
in_flight:
  description: With V(drained), the requests each worker was still running when the module returned.
  returned: when state is drained and there is a router
  type: dict
  sample: {"http://127.0.0.1:30003": 0}
waited:
  description: Seconds spent waiting.
  returned: always
  type: float
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpulxc.sglang.plugins.module_utils._smg import Router, SmgError, in_flight


def states(router, urls):
    """{url: the router's status for it, or 'absent'} and {url: its worker record}."""
    listed = {worker.get("url"): worker for worker in router.workers()}
    return {url: listed[url].get("status", "unknown") if url in listed else "absent" for url in urls}, listed


def drain(module, router, urls, status, listed):
    """(changed, states, {url: requests still in flight}, message)."""
    to_remove = [url for url in urls if status[url] not in ("absent", "draining")]
    if module.check_mode:
        return bool(to_remove), {url: "draining" if url in to_remove else status[url] for url in urls}, {}, ""
    for url in to_remove:
        router.remove(listed[url]["id"])
    deadline = time.monotonic() + module.params["timeout"]
    while True:
        status, listed = states(router, urls)
        running = {}
        for url in urls:
            routed = listed[url].get("load", 0) if url in listed else 0
            running[url] = max(int(routed or 0), in_flight(url) or 0)
        if all(status[url] in ("absent", "draining") for url in urls) and not any(running.values()):
            return bool(to_remove), status, running, ""
        if time.monotonic() > deadline:
            busy = ", ".join("%s: %s" % item for item in running.items() if item[1])
            message = "requests still in flight after %ss, going on: %s" % (module.params["timeout"], busy)
            module.warn("smg_workers: " + message)
            return bool(to_remove), status, running, message
        time.sleep(module.params["interval"])


def admit(module, router, urls, status, listed):
    """(changed, states); fails when the router does not route to them in time."""
    missing = [url for url in urls if status[url] in ("absent", "draining")]
    if module.check_mode:
        return bool(missing), {url: "ready" if url in missing else status[url] for url in urls}
    deadline = time.monotonic() + module.params["timeout"]
    added = False
    for url in missing:
        # a worker still draining out of the registry cannot be added back under its URL until it has left
        while status[url] == "draining" and time.monotonic() < deadline:
            time.sleep(module.params["interval"])
            status, listed = states(router, urls)
        added = router.add(url) or added
    while module.params["wait"]:
        not_ready = [url for url in urls if status[url] != "ready" or not listed[url].get("is_healthy", False)]
        if not not_ready:
            break
        if time.monotonic() > deadline:
            states_text = ", ".join("%s is %s" % (url, status[url]) for url in not_ready)
            module.fail_json(
                msg="smg_workers: the router at %s does not route to %s after %ss: %s"
                % (router.url, ", ".join(not_ready), module.params["timeout"], states_text),
                router=router.url,
                workers=status,
            )
        time.sleep(module.params["interval"])
        status, listed = states(router, urls)
    return added, status


def main():
    module = AnsibleModule(
        argument_spec=dict(
            urls=dict(type="list", elements="str", required=True),
            state=dict(type="str", required=True, choices=["drained", "admitted"]),
            router_dir=dict(type="path", default="/etc/smg"),
            worker_key=dict(type="str", default="", no_log=True),
            timeout=dict(type="int", default=120),
            wait=dict(type="bool", default=True),
            interval=dict(type="float", default=0.25),
        ),
        supports_check_mode=True,
    )
    started = time.monotonic()
    urls = module.params["urls"]
    try:
        router = Router.from_dir(module.params["router_dir"])
        if router is not None and module.params["worker_key"]:
            router.worker_key = module.params["worker_key"]
        if router is None:
            module.exit_json(
                changed=False,
                router=None,
                workers={},
                waited=0.0,
                msg="no router configured in %s: nothing to do" % module.params["router_dir"],
            )
        before, listed = states(router, urls)
        result = {}
        if module.params["state"] == "drained":
            changed, after, result["in_flight"], result["msg"] = drain(module, router, urls, before, listed)
        else:
            changed, after = admit(module, router, urls, before, listed)
    except SmgError as error:
        module.warn("smg_workers: %s; nothing done" % error)
        module.exit_json(
            changed=False,
            router=None,
            workers={},
            waited=round(time.monotonic() - started, 2),
            msg="%s; nothing done" % error,
        )
    if module._diff:
        result["diff"] = {
            "before": "".join("%s %s\n" % item for item in sorted(before.items())),
            "after": "".join("%s %s\n" % item for item in sorted(after.items())),
            "before_header": router.url + "/workers",
            "after_header": router.url + "/workers",
        }
    module.exit_json(
        changed=changed, router=router.url, workers=after, waited=round(time.monotonic() - started, 2), **result
    )


if __name__ == "__main__":
    main()
