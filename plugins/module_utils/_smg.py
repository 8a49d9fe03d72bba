# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SGLang's model gateway (smg) as gpulxc.sglang.sglang_router leaves it on a container: its control plane.

The role writes, in its directory (``/etc/smg``): ``router-args.json``, smg's arguments as a JSON list (smg on
loopback, behind the role's front); ``control-plane-key``, root only, the admin key that its launcher hands smg as
``--control-plane-api-keys``; ``gateway-key``, root only, smg's ``--api-key``, which smg sends the workers it
starts with but not those added later through ``POST /workers`` unless the request names it
(model_gateway/src/worker/service.rs:271 of lightseekorg/smg at 73da68c warns and adds the worker keyless).
Everything here reads those files; nothing else about the router is assumed.
"""

from __future__ import annotations

import json
import os
import urllib.error

from ansible.module_utils.urls import open_url

ARGS_FILE = "router-args.json"
KEY_FILE = "control-plane-key"
WORKER_KEY_FILE = "gateway-key"
# a router bound to every address is reached on loopback
_ANY_ADDRESS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


class SmgError(Exception):
    """The router answered with an error, or not at all."""


def _option(args, name, default):
    """The value after ``name`` in an argument list, as argparse reads it."""
    for index, arg in enumerate(args):
        if arg == name and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def read_key(path):
    """The first line of a key file that is neither empty nor a comment."""
    with open(path) as handle:
        for line in handle:
            if line.strip() and not line.startswith("#"):
                return line.strip()
    raise SmgError("%s holds no key" % path)


class Router:
    """smg's worker API, authenticated with the control-plane admin key."""

    def __init__(self, url, key, timeout=10, worker_key=None):
        self.url = url
        self.key = key
        self.timeout = timeout
        self.worker_key = worker_key

    @classmethod
    def from_dir(cls, directory, timeout=10):
        """The router configured in ``directory``, or None where sglang_router has not put one."""
        args_path = os.path.join(directory, ARGS_FILE)
        key_path = os.path.join(directory, KEY_FILE)
        if not (os.path.isfile(args_path) and os.path.isfile(key_path)):
            return None
        with open(args_path) as handle:
            args = json.load(handle)
        host = _option(args, "--host", "0.0.0.0")
        host = _ANY_ADDRESS.get(host, host)
        if ":" in host:
            host = "[%s]" % host
        worker_key_path = os.path.join(directory, WORKER_KEY_FILE)
        worker_key = read_key(worker_key_path) if os.path.isfile(worker_key_path) else None
        return cls("http://%s:%s" % (host, _option(args, "--port", "30000")), read_key(key_path), timeout, worker_key)

    def call(self, method, path, body=None):
        """(status, decoded JSON or None); SmgError when the router cannot be reached."""
        headers = {"Authorization": "Bearer " + self.key}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            with open_url(
                self.url + path, data=data, headers=headers, method=method, timeout=self.timeout, use_proxy=False
            ) as response:
                status, text = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read()
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise SmgError("the router at %s does not answer: %s" % (self.url, reason)) from None
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, None

    def workers(self):
        """Every worker the router knows: dicts with id, url, status (ready, draining, ...), is_healthy, load."""
        status, body = self.call("GET", "/workers")
        if status != 200 or not isinstance(body, dict):
            raise SmgError("GET %s/workers answered HTTP %s: %s" % (self.url, status, body))
        return body.get("workers", [])

    def remove(self, worker_id):
        """Start smg's removal: the worker drains (no new requests), then leaves the registry."""
        status, body = self.call("DELETE", "/workers/" + worker_id)
        if status not in (200, 202, 404):
            raise SmgError("DELETE %s/workers/%s answered HTTP %s: %s" % (self.url, worker_id, status, body))

    def add(self, url):
        """Register a worker (smg detects it and health-checks it first); True if it was not there."""
        spec = {"url": url}
        if self.worker_key:
            spec["api_key"] = self.worker_key  # as smg sends it the workers of --worker-urls
        status, body = self.call("POST", "/workers", spec)
        if status in (200, 201, 202):
            return True
        if status == 409 or (isinstance(body, dict) and body.get("code") == "WORKER_ALREADY_EXISTS"):
            return False
        raise SmgError("POST %s/workers (%s) answered HTTP %s: %s" % (self.url, url, status, body))


def in_flight(url, timeout=5):
    """Requests an SGLang server is running or queueing; None where it cannot tell.

    From GET /v1/loads, which asks the scheduler (sglang 0.5.12 srt/entrypoints/v1_loads.py:135-187: its
    aggregate's total_reqs); the /metrics gauges lag - once idle they keep their last busy value until the
    scheduler's idle refresh 30 s later (srt/managers/scheduler_runtime_checker_mixin.py:506-541). A server
    without /v1/loads, or one that wants a key for it (/metrics never does), is read from /metrics, as smg
    1.13.0's load monitor falls back (model_gateway/src/worker/monitor.rs)."""
    base = url.rstrip("/")
    try:
        with open_url(base + "/v1/loads?include=core", timeout=timeout, use_proxy=False) as response:
            return int(json.loads(response.read())["aggregate"]["total_reqs"])
    except urllib.error.HTTPError as error:
        if error.code not in (401, 403, 404, 405, 501):
            return None
    except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
        return None
    try:
        with open_url(base + "/metrics", timeout=timeout, use_proxy=False) as response:
            text = response.read().decode()
    except (urllib.error.URLError, OSError):
        return None
    total = 0.0
    for line in text.splitlines():
        if line.startswith(("sglang:num_running_reqs", "sglang:num_queue_reqs")):
            total += float(line.rsplit(None, 1)[-1])
    return int(total)
