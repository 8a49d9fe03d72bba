#!/usr/bin/python
# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_health
short_description: Wait until every SGLang server answers HTTP 200 on /health, then send each a chat completion
version_added: 0.1.0
description:
  - Polls every server's C(/health) concurrently until all answer HTTP 200 or O(deadline) passes. What a
    poll sees is reported as the server's state - connection refused is V(loading) (SGLang binds its port
    only after the weights are loaded and the graphs captured), HTTP 503 is V(warming) (warm-up running,
    or shutting down), HTTP 200 is V(ready).
  - Each request may take O(request_timeout) seconds - a healthy SGLang C(/health) runs a one-token
    generation and takes about a second, so short probe timeouts flap.
  - On failure names every unhealthy instance with its last state, its systemd unit's state and the tail
    of its journal.
  - An instance whose O(instances[].unit) systemd has given up on (C(failed), after it crashed until the start
    limit was hit) or that is stopped (C(inactive)) will not answer before the deadline, so it is not waited for; the
    module fails as soon as every other instance is healthy or given up on too. A unit between two automatic
    restarts is C(activating) and is waited for.
  - With O(chat), sends each server a chat completion as soon as it is healthy (all at once, not one
    after another) and checks the response structure (an C(assistant) message in C(choices)). The run
    fails if any server is unhealthy or any reply is wrong.
  - The chat completion samples (temperature 0.7, top-p 0.9, top-k 20), so it takes the sampler's path that
    needs FlashInfer's top-k/top-p kernel (sglang 0.5.12 C(srt/layers/sampler.py)). On a cold JIT cache the
    first such request on a server builds it - on the H200 the first sampled chat after C(/health) 200 took
    88 s, the next 0.09 s - and stalls every request of that server meanwhile. A server counts as ready only
    once a sampled chat answers within O(chat_fast) seconds; a slower one is sent again, until the deadline.
author:
  - gpulxc.sglang developers (@gpulxc)
extends_documentation_fragment:
  - gpulxc.sglang.attributes
  - gpulxc.sglang.attributes.info_module
options:
  instances:
    description:
      - The servers - a C(name) (for messages), the C(url) of the server (scheme, host, port) and its C(unit).
      - The instances sglang_services publishes (C(ansible_local.gpulxc_services.instances)) are taken as they are.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The instance's name in messages, for example C(sglang@5).
        type: str
        required: true
      url:
        description: The server's base URL, for example C(http://127.0.0.1:30005).
        type: str
        required: true
      unit:
        description:
          - Its systemd unit; its state and journal tail are reported on failure, and the instance is not waited
            for once the unit is C(failed) or C(inactive).
        type: str
      index:
        description: Its instance number; not read (the instances sglang_services publishes carry it).
        type: int
        version_added: 0.2.0
      gpu:
        description: Its GPU index; not read (the instances sglang_services publishes carry it).
        type: int
        version_added: 0.2.0
      port:
        description: Its port; not read (the URL holds it).
        type: int
        version_added: 0.2.0
  deadline:
    description: Seconds to wait for all servers (cold starts with JIT builds take many minutes).
    type: int
    default: 1800
  request_timeout:
    description: Seconds one C(/health) request may take.
    type: int
    default: 10
  interval:
    description: Seconds between polls of a server not yet ready.
    type: float
    default: 1.0
  chat:
    description: After all are healthy, send each server one chat completion to this served model name.
    type: str
  chat_fast:
    description: Seconds within which a sampled chat completion must answer for the server to count as ready.
    type: float
    default: 5.0
    version_added: 0.2.0
  api_key:
    description: The servers' API key (C(/health) needs none, the chat completion does).
    type: str
  journal_lines:
    description: Lines of each unhealthy unit's journal to report.
    type: int
    default: 20
  crash_restarts:
    description:
      - An instance whose unit systemd restarted this many times while waited for (its C(NRestarts)) crashes at
        every start and is not waited for any longer; V(0) waits for it until the deadline.
      - A crashing sglang 0.5.12 kills itself with SIGKILL, which the unit counts as a clean exit
        (C(SuccessExitStatus)), so systemd restarts it again and again; after a long load the start limit
        may never be reached before the deadline.
    type: int
    default: 2
    version_added: 0.2.0
  slice:
    description:
      - Return after at most this many seconds (and any chat completion in flight) with RV(done=false) and a
        RV(progress) line when not every server is ready yet, instead of waiting silently until O(deadline); a
        loop passes RV(resume) on to the next call (see EXAMPLES). V(0) waits until the deadline in one call.
    type: float
    default: 0
    version_added: 0.2.0
  resume:
    description:
      - The previous slice's RV(resume) - when the wait began (the deadline counts from it), each unit's
        C(NRestarts) then (for O(crash_restarts)), and the servers already ready (not polled or chatted again).
    type: dict
    version_added: 0.2.0
"""

EXAMPLES = r"""
- name: Wait for two servers and smoke-test them, in one call
  gpulxc.sglang.sglang_health:
    instances:
      - {name: sglang@0, url: "http://127.0.0.1:30000", unit: sglang@0.service}
      - {name: sglang@1, url: "http://127.0.0.1:30001", unit: sglang@1.service}
    deadline: 1800
    chat: Qwen3-8B

# The same wait, one line of progress every 20 s ("3/8 healthy, 5 warming after 2m10s of 30m00s ..."):
# each item is a slice; the next one resumes from the last (the loop's register holds the item just run).
- name: Wait for the servers' health
  gpulxc.sglang.sglang_health:
    instances: "{{ ansible_local.gpulxc_services.instances }}"
    deadline: 1800
    slice: 20
    resume: "{{ health.resume | default(omit) }}"
  loop: "{{ range(1800 // 20 + 2) | list }}"
  loop_control:
    label: "{{ health.progress | default(health.msg | default('')) }}"
    break_when: health.done | default(true)
  register: health
"""

RETURN = r"""
instances:
  description:
    - Per instance - name, url, last state (ready, warming, loading, or an error), seconds to healthy.
    - With O(chat), the seconds each sampled chat completion took (C(chat_seconds)) and its outcome (C(chat)).
  returned: always
  type: list
  elements: dict
healthy:
  description: Whether every instance answered 200 before the deadline.
  returned: always
  type: bool
done:
  description: Whether the wait is over (every server ready, or the module failed); V(false) only after a O(slice).
  returned: always
  type: bool
progress:
  description:
    - How many servers are healthy, how many in each other state, how long it waited of the deadline.
    - For a server not ready yet, each FlashInfer JIT build its unit runs (a C(ninja) process in its cgroup) and
      for how long.
  returned: always
  type: str
  sample: "0/8 healthy, 8 starting after 2m10s of 30m00s (waiting for sglang@0, ...; sglang@0: JIT build
    batch_decode_with_kv_cache_dtype_q_bf16_... 2m05s)"
resume:
  description: What the next slice passes as O(resume).
  returned: when RV(done) is false
  type: dict
"""

import json
import threading
import time
import urllib.error

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible_collections.gpulxc.sglang.plugins.module_utils._jit_builds import running_builds


GIVEN_UP = ("failed", "inactive")
RUN = []  # the module's run_command, set by main(); only the main thread runs commands (run_command forks)


def command(argv):
    """The command's stdout (its status is not read: systemctl is-active exits 3 for an inactive unit)."""
    return RUN[0](argv, check_rc=False)[1]


def probe(url, timeout):
    """The state one /health request shows: ready, warming, loading or a short error."""
    try:
        with open_url(url.rstrip("/") + "/health", timeout=timeout, use_proxy=False) as response:
            return "ready" if response.status == 200 else f"http {response.status}"
    except urllib.error.HTTPError as error:
        return "warming" if error.code == 503 else f"http {error.code}"
    except urllib.error.URLError as error:
        reason = getattr(error, "reason", error)
        if isinstance(reason, ConnectionRefusedError):
            return "loading"
        return f"unreachable ({reason})"
    except (TimeoutError, OSError) as error:
        return f"no answer in {timeout} s ({error})"


def unit_state(unit):
    """(ActiveState, NRestarts) of the unit; NRestarts counts systemd's automatic restarts since its last start."""
    out = command(["systemctl", "show", "-p", "ActiveState", "-p", "NRestarts", unit])
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    restarts = values.get("NRestarts", "")
    return values.get("ActiveState", ""), int(restarts) if restarts.isdigit() else 0


def given_up(unit, restarts_before, crash_restarts):
    """Why the unit will not answer, when systemd will not start it again by itself (failed, inactive) or it
    crashes at every start (restarted crash_restarts times since the wait began: a crashing sglang 0.5.12 kills
    itself with SIGKILL, which the unit counts as a clean exit, so systemd restarts it again and again, each time
    through its whole load), else None."""
    if not unit:
        return None
    state, restarts = unit_state(unit)
    if state in GIVEN_UP:
        return f"its unit is {state}: systemd will not start it again"
    if crash_restarts and restarts - restarts_before >= crash_restarts:
        return (
            f"its unit restarted {restarts - restarts_before} times while waited for (NRestarts {restarts}):"
            " it crashes at every start"
        )
    return None


def wait_all(
    instances, deadline, timeout, interval, on_ready=None, *, crash_restarts=2, until=None, baseline=None, started=None
):
    """Poll every instance's /health at once until ready, given up on by systemd, crashing at every start, the
    deadline (seconds after `started`, a time.time(); now by default) or `until` (a time.time() that ends this
    slice of the wait). on_ready(result) runs in the instance's thread, and a slice waits for it. The threads
    only make HTTP requests; systemd is asked from this thread. `baseline` ({unit: NRestarts} when the wait
    began) is filled in for the units it lacks."""
    clock, begun = time.time, time.time()
    started = begun if started is None else started
    end = min(started + deadline, until if until is not None else float("inf"))
    baseline = {} if baseline is None else baseline
    results = [
        {"name": i["name"], "url": i["url"], "state": "not polled", "seconds_to_healthy": None} for i in instances
    ]
    units = [i.get("unit") for i in instances]
    for unit in units:
        if unit and unit not in baseline:
            baseline[unit] = unit_state(unit)[1]
    stop = [threading.Event() for _result in results]

    def watch(result, stopped):
        try:
            poll(result, stopped)
        except Exception as error:  # pylint: disable=broad-exception-caught  # reported as its state, not lost
            result["state"] = f"not polled any more ({error!r})"

    def poll(result, stopped):
        while True:
            result["state"] = probe(result["url"], timeout)
            if result["state"] == "ready":
                result["seconds_to_healthy"] = round(clock() - started, 1)
                if on_ready:
                    on_ready(result)
                return
            if stopped.is_set() or clock() >= end:
                return
            stopped.wait(interval)

    threads = [threading.Thread(target=watch, args=(r, stop[k]), daemon=True) for k, r in enumerate(results)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        for k, thread in enumerate(threads):
            if thread.is_alive() and not stop[k].is_set() and results[k]["state"] != "ready":
                reason = given_up(units[k], baseline.get(units[k], 0), crash_restarts)
                if reason:
                    results[k]["given_up"] = reason
                    stop[k].set()
        for thread in threads:
            thread.join(interval / len(threads))
    for result in results:
        reason = result.pop("given_up", None)
        if reason and result["state"] != "ready":
            result["state"] += ", and " + reason
            result["given_up"] = True
    return results


def system_state():
    """What systemd says of the whole system: running, degraded, starting, stopping (a shutdown or a reboot), ..."""
    return command(["systemctl", "is-system-running"]).strip()


def unit_report(unit, lines):
    if not unit:
        return ""
    state = command(["systemctl", "is-active", unit])
    journal = command(["journalctl", "-u", unit, "-n", str(lines), "--no-pager", "-o", "cat"])
    return f"unit {unit} is {state.strip() or 'unknown'}; journal tail:\n{journal.rstrip()}"


SAMPLED = {"temperature": 0.7, "top_p": 0.9, "top_k": 20}  # the path that needs FlashInfer's sampling kernel


def chat(url, model, api_key, timeout):
    body = json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 8, **SAMPLED}
    ).encode()
    headers = {"content-type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    try:
        with open_url(
            url.rstrip("/") + "/v1/chat/completions",
            data=body,
            headers=headers,
            method="POST",
            timeout=timeout,
            use_proxy=False,
        ) as response:
            reply = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError) as error:
        return f"chat completion failed: {error}"
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not choices or choices[0].get("message", {}).get("role") != "assistant":
        return f"chat completion without an assistant message: {json.dumps(reply)[:300]}"
    return None


def duration(seconds):
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def progress(results, waited, deadline, builds=None, units=None):
    """One line: how many are healthy, how many in each other state, how long waited of the deadline, and the JIT
    builds the servers not ready yet run ({unit: [(op, seconds)]} of running_builds; {name: unit})."""
    counts = {}
    for result in results:
        state = "healthy" if result["state"] == "ready" else result["state"].split(" (")[0]
        counts[state] = counts.get(state, 0) + 1
    healthy = counts.pop("healthy", 0)
    others = "".join(f", {n} {state}" for state, n in sorted(counts.items()))
    waiting = [r["name"] for r in results if r["state"] != "ready"]
    jit = [
        f"{name}: JIT build {op} {duration(seconds)}"
        for name in waiting
        for op, seconds in (builds or {}).get((units or {}).get(name), [])
    ]
    return f"{healthy}/{len(results)} healthy{others} after {duration(waited)} of {duration(deadline)}" + (
        f" (waiting for {', '.join(waiting)}{''.join(f'; {b}' for b in jit)})" if waiting else ""
    )


def main():
    module = AnsibleModule(
        argument_spec={
            "instances": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "name": {"type": "str", "required": True},
                    "url": {"type": "str", "required": True},
                    "unit": {"type": "str"},
                    "index": {"type": "int"},  # the published instances' shape (ansible_local.gpulxc_services)
                    "gpu": {"type": "int"},
                    "port": {"type": "int"},
                },
            },
            "deadline": {"type": "int", "default": 1800},
            "request_timeout": {"type": "int", "default": 10},
            "interval": {"type": "float", "default": 1.0},
            "chat": {"type": "str"},
            "chat_fast": {"type": "float", "default": 5.0},
            "api_key": {"type": "str", "no_log": True},
            "journal_lines": {"type": "int", "default": 20},
            "crash_restarts": {"type": "int", "default": 2},
            "slice": {"type": "float", "default": 0},
            "resume": {"type": "dict"},
        },
        supports_check_mode=True,
    )
    RUN[:] = [module.run_command]
    params = module.params
    if params["crash_restarts"] < 0:
        module.fail_json(msg=f"crash_restarts is {params['crash_restarts']}: give 0 (wait until the deadline) or more.")
    if params["slice"] < 0:
        module.fail_json(msg=f"slice is {params['slice']}: give 0 (wait until the deadline) or more seconds.")
    resume = params["resume"] or {}
    started = float(resume.get("started", time.time()))
    baseline = dict(resume.get("baseline") or {})
    finished = {r["name"]: r for r in resume.get("finished") or []}
    end = started + params["deadline"]

    def smoke_test(result):
        """Sampled chats until one is fast (the first on a cold cache builds the sampling kernel)."""
        result["chat_seconds"] = []
        while True:
            sent = time.time()
            problem = chat(result["url"], params["chat"], params["api_key"], max(60, end - sent))
            result["chat_seconds"].append(round(time.time() - sent, 2))
            if problem or result["chat_seconds"][-1] <= params["chat_fast"]:
                break
            if time.time() >= end:
                problem = (
                    f"no sampled chat completion within {params['chat_fast']} s before the deadline"
                    f" (took {result['chat_seconds']} s)"
                )
                break
        result["chat"] = problem or "ok"

    waiting = [i for i in params["instances"] if i["name"] not in finished]
    polled = wait_all(
        waiting,
        params["deadline"],
        params["request_timeout"],
        params["interval"],
        smoke_test if params["chat"] else None,
        crash_restarts=params["crash_restarts"],
        baseline=baseline,
        started=started,
        until=time.time() + params["slice"] if params["slice"] else None,
    )
    by_name = {**finished, **{r["name"]: r for r in polled}}
    results = [by_name[i["name"]] for i in params["instances"]]
    gave_up = {r["name"]: r.pop("given_up", False) for r in results}
    unhealthy = [r for r in results if r["state"] != "ready"]
    units = {i["name"]: i.get("unit") for i in params["instances"]}
    line = progress(
        results,
        time.time() - started,
        params["deadline"],
        running_builds() if len(results) > sum(r["state"] == "ready" for r in results) else None,
        units,
    )
    if params["slice"] and unhealthy and time.time() < end and not all(gave_up[r["name"]] for r in unhealthy):
        # only this slice of the wait is over: say how far it got, and what the next slice resumes from
        done = [r for r in results if r["state"] == "ready"]
        module.exit_json(
            changed=False,
            done=False,
            healthy=False,
            progress=line,
            instances=results,
            resume={"started": started, "baseline": baseline, "finished": done},
        )
    if unhealthy and system_state() == "stopping":
        # a shutdown or a reboot stops every unit: not a crash, and nothing the role can repair now
        module.fail_json(
            msg="the container is shutting down (a shutdown or a reboot: systemctl is-system-running says stopping),"
            f" which stopped {', '.join(r['name'] for r in unhealthy)} while waited for; not a crash: run the play"
            " again once the container is up",
            instances=results,
            healthy=False,
            done=True,
            progress=line,
        )
    if unhealthy:
        details = [
            f"{r['name']} ({r['url']}): {r['state']}; {unit_report(units[r['name']], params['journal_lines'])}"
            for r in unhealthy
        ]
        module.fail_json(
            msg=f"{len(unhealthy)} of {len(results)} SGLang servers not healthy "
            + (
                f"after {params['deadline']} s (last seen: {line}): "
                if not all(gave_up[r["name"]] for r in unhealthy)
                else "(systemd gave up on them or they crash at every start; not waited for): "
            )
            + " | ".join(details),
            instances=results,
            healthy=False,
            done=True,
            progress=line,
        )
    failed = [f"{r['name']}: {r['chat']}" for r in results if r.get("chat", "ok") != "ok"]
    if failed:
        module.fail_json(
            msg="smoke test failed: " + " | ".join(failed), instances=results, healthy=True, done=True, progress=line
        )
    module.exit_json(changed=False, instances=results, healthy=True, done=True, progress=line)


if __name__ == "__main__":
    main()
