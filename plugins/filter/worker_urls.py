# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: worker_urls
short_description: The router's worker URLs in the one form smg and the drains know each worker by
version_added: 0.2.0
description:
  - smg identifies a worker by the exact string it was registered with, so V(http://localhost:30000/) and
    V(http://127.0.0.1:30000) are two workers to it, and draining one drains nothing of the other.
  - Each URL is normalised - scheme and host in lower case, no trailing slash - and one that reaches an instance
    (the same port on a loopback name, or the same host and port) becomes that instance's own URL, the one
    role C(gpulxc.sglang.sglang_services) drains.
  - What cannot be a worker is reported, by entry number, in the result's C(errors) - a scheme other than V(http) or
    V(https), no host, a port outside 1 to 65535, a path, query or fragment, credentials, whitespace - as are
    entries that name the same worker twice.
author:
  - gpulxc.sglang developers (@gpulxc)
options:
  _input:
    description: The worker URLs (C(sglang_router_worker_urls)).
    type: list
    elements: str
    required: true
  instances:
    description: The instances' URLs as C(gpulxc.sglang.sglang_services) publishes them.
    type: list
    elements: str
    default: []
  name:
    description: The variable the URLs came from, for the messages.
    type: str
    default: sglang_router_worker_urls
"""

EXAMPLES = r"""
- name: The workers smg is started with
  ansible.builtin.debug:
    msg: "{{ (['http://LOCALHOST:30000/'] | gpulxc.sglang.worker_urls(['http://127.0.0.1:30000'])).urls }}"
"""

RETURN = r"""
_value:
  description: The normalised URLs (C(urls)) and what is wrong with the others (C(errors)); a URL with an error is
    left out of C(urls).
  type: dict
  contains:
    urls:
      description: The normalised URLs, each instance's own where one reaches an instance.
      type: list
      elements: str
    errors:
      description: One message per entry that cannot be a worker, or that names a worker twice.
      type: list
      elements: str
  sample: {urls: ["http://127.0.0.1:30000"], errors: []}
"""

import re
from urllib.parse import urlsplit

from ansible_collections.gpulxc.sglang.plugins.test.loopback import loopback


def _parts(url):
    """(scheme, host, port) of a URL, or the reason it cannot be a worker."""
    if not isinstance(url, str) or not url or re.search(r"\s", url):
        return "is empty or holds whitespace"
    try:
        split = urlsplit(url)
        port = split.port
    except ValueError as e:
        return "is not a URL (%s)" % e
    wrong = [
        (split.scheme.lower() not in ("http", "https"), "needs the scheme http:// or https://"),
        (not split.hostname, "names no host"),
        (
            split.username is not None or split.password is not None,
            "carries credentials: smg would log them; give the servers' key in sglang_services_api_key",
        ),
        (
            split.path not in ("", "/") or split.query or split.fragment,
            "has a path, query or fragment: a worker is scheme://host:port",
        ),
        (port is not None and not 1 <= port <= 65535, "has a port outside 1 to 65535"),
    ]
    reasons = [why for bad, why in wrong if bad]
    return reasons[0] if reasons else (split.scheme.lower(), split.hostname.lower(), port)


def _url(scheme, host, port):
    host = "[%s]" % host if ":" in host else host
    return "%s://%s%s" % (scheme, host, "" if port is None else ":%d" % port)


def _same_worker(a, b):
    if a[0] != b[0] or a[2] != b[2]:
        return False
    return a[1] == b[1] or (loopback(a[1]) and loopback(b[1]))


def worker_urls(urls, instances=(), name="sglang_router_worker_urls"):
    known = [(url, _parts(url)) for url in instances or []]
    known = [(url, parts) for url, parts in known if isinstance(parts, tuple)]
    result, errors, seen = [], [], {}
    for n, url in enumerate(urls or []):
        parts = _parts(url)
        if isinstance(parts, str):
            errors.append("%s entry %d (%r) %s." % (name, n, url, parts))
            continue
        same = [u for u, p in known if _same_worker(parts, p)]
        normal = same[0] if same else _url(*parts)
        if normal in seen:
            errors.append(
                "%s entries %d and %d are the same worker (%s): list it once." % (name, seen[normal], n, normal)
            )
            continue
        seen[normal] = n
        result.append(normal)
    return {"urls": result, "errors": errors}


class FilterModule:
    def filters(self):
        return {"worker_urls": worker_urls}
