# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lines playbooks/summary.yml shows at the end of a run (documented in summary_lines.yml next to this file):
what gpulxc.sglang.stack_info read in the container, the GPUs and the container's name, in; the container, its
GPUs, the stack, the model, the endpoint with a curl to try, and who reaches what, out."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible_collections.gpulxc.sglang.plugins.test.loopback import loopback

CURL_BODY = '{"model": "%s", "messages": [{"role": "user", "content": "What is 2+2?"}]}'


def _text(value):
    """A value as a template writes it inside a line (ansible-core 2.19 writes None as nothing)."""
    return "" if value is None else str(value)


def _unique(values):
    """Jinja's unique: the first of each, strings compared without case."""
    seen, found = set(), []
    for value in values:
        key = value.lower() if isinstance(value, str) else value
        if key not in seen:
            seen.add(key)
            found.append(value)
    return found


def _front(router):
    """Who reaches the router's front, with which key, how."""
    return (
        ("this container only" if loopback(router.get("host", "")) else "other machines")
        + (", client key required" if router.get("keyed", False) else ", no key")
        + (", TLS" if router.get("tls") else ", plain HTTP")
    )


def _curl(router, model):
    """A chat completion to try against the router (its certificate as tls.crt, the key from $SGLANG_KEY)."""
    return (
        "curl -s "
        + ("--cacert tls.crt " if router.get("tls") else "")
        + _text(router.get("url", ""))
        + "/v1/chat/completions -H 'Content-Type: application/json' "
        + ('-H "Authorization: Bearer $SGLANG_KEY" ' if router.get("keyed", False) else "")
        + "-d '"
        + CURL_BODY % _text(model)
        + "'"
    )


def _exposure(router, servers):
    """Who reaches what: the router's metrics, its certificate, and the servers by the address they bind."""
    lines = []
    if router.get("metrics"):
        lines.append("router metrics: %s/metrics, %s" % (_text(router["url"]), _front(router)))
    if router.get("tls"):
        lines.append(
            "TLS certificate: %s in the container (copy it as tls.crt where it is not signed by a CA the clients"
            " trust), sha256 %s" % (_text(router["tls"]["certificate"]), _text(router["tls"]["sha256"]))
        )
    for host in _unique([server["host"] for server in servers]):
        on = [server for server in servers if server["host"] == host]
        lines.append(
            "servers: %d on %s port %s, %s, %s"
            % (
                len(on),
                _text(host),
                ", ".join(_text(server["port"]) for server in on),
                "this container only" if loopback(host) else "other machines, plain HTTP",
                "key required" if all(server["keyed"] for server in on) else "no key",
            )
        )
    return lines


def summary_lines(summary, container="", node="?", gpus=(), model=""):
    """The summary's lines from what gpulxc.sglang.stack_info returned (summary), the container's VMID and node,
    the GPUs gpu_preflight listed and the model sglang_services published (else the one stack_info read)."""
    if not isinstance(summary, Mapping):
        raise AnsibleFilterError(
            "summary_lines expects what gpulxc.sglang.stack_info returned, got %s" % type(summary).__name__
        )
    model = model or summary.get("model")
    gpus = list(gpus or [])
    router = summary.get("router") or {}
    first = gpus[0] if gpus else {}
    capabilities = _unique([gpu["compute_capability"] for gpu in gpus])
    lines = [
        "CT %s on %s" % (_text(container), _text(node)),
        "GPUs: %d x %s, SM %s (indexes %s)"
        % (
            len(gpus),
            _text(first.get("name", "?")),
            ", ".join(_text(c) for c in capabilities),
            ",".join(_text(gpu["index"]) for gpu in gpus),
        ),
        "stack: %s" % _text(summary.get("stack")),
        "model: %s" % _text(model),
        "endpoint: %s (SGLang model gateway, %s)" % (_text(router["url"]), _front(router))
        if router
        else "endpoint: no router: one server per GPU on its own port",
        "try: " + _curl(router, model) if router else "",
    ]
    return lines + _exposure(router, list(summary.get("servers") or []))


class FilterModule:
    def filters(self):
        return {"summary_lines": summary_lines}
