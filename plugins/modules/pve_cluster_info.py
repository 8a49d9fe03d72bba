#!/usr/bin/python
# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: pve_cluster_info
short_description: Read a Proxmox VE cluster's members and where a guest id lives, through the API
version_added: 0.2.0
description:
  - Reads, with an API token, two paths of the Proxmox VE API through proxmoxer's C(https) backend and
    changes nothing; run it on the controller (delegated to C(localhost)), where proxmoxer is installed
    as it is for C(community.proxmox).
  - C(GET /cluster/status) (needs C(Sys.Audit) on C(/)) gives the cluster's name, quorum and members (a
    node that is not in a cluster answers with itself only).
  - C(GET /cluster/resources?type=vm) (needs C(VM.Audit) on the guest) gives the node, type and name of every
    guest id in the cluster, from pmxcfs's C(.vmlist), so a container on another node is seen before
    C(pct create) would take its id or write a second config.
  - The role C(PVEAuditor) on C(/) is enough; the module never writes (writes stay on C(pct), because an API
    token cannot set C(devN)).
author:
  - gpulxc.sglang developers (@gpulxc)
requirements:
  - proxmoxer and requests (its https backend's), on the host the module runs on (the controller).
extends_documentation_fragment:
  - gpulxc.sglang.attributes
  - gpulxc.sglang.attributes.info_module
options:
  api_host:
    description: Address of a cluster member's API (C(host) or C(host:port)).
    type: str
    required: true
  api_port:
    description: Port of the API.
    type: int
    default: 8006
  api_user:
    description: The token's user, C(<user>@<realm>).
    type: str
    required: true
  api_token_id:
    description: The token's id (the part after C(!) in C(<user>@<realm>!<id>)).
    type: str
    required: true
  api_token_secret:
    description: The token's secret.
    type: str
    required: true
  validate_certs:
    description: Check the API's TLS certificate (against O(ca_path) when given).
    type: bool
    default: true
  ca_path:
    description: CA bundle for the API's certificate (a cluster's own CA, C(/etc/pve/pve-root-ca.pem)).
    type: path
  timeout:
    description: Seconds to wait for each answer.
    type: int
    default: 10
  vmid:
    description: The guest id to look up.
    type: int
    required: true
  node:
    description:
      - The Proxmox node name the container belongs on. Empty means the member that answers (the one
        C(/cluster/status) marks C(local)).
    type: str
    default: ""
  hostname:
    description:
      - The container's hostname. A container with this id and name on another node is one that was
        migrated there (RV(placement) C(migrated)); another name or a VM is another guest (C(taken)).
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Read the cluster and where CT 200 is
  gpulxc.sglang.pve_cluster_info:
    api_host: pve1.example.com
    api_user: ansible@pve
    api_token_id: audit
    api_token_secret: "{{ vault_pve_audit_token }}"
    ca_path: files/pve-root-ca.pem
    vmid: 200
    node: pve1
    hostname: sglang-200
  delegate_to: localhost
  register: cluster

- name: Refuse an id another guest has
  ansible.builtin.assert:
    that: cluster.placement in ['absent', 'here']
    fail_msg: "200 is taken on {{ cluster.guest.node | default('another node') }}"
"""

RETURN = r"""
cluster:
  description: The cluster (empty on a node that is in no cluster).
  returned: always
  type: dict
  contains:
    name:
      description: Cluster name.
      type: str
    quorate:
      description: Whether the cluster has quorum.
      type: bool
    nodes:
      description: Number of nodes.
      type: int
members:
  description: The cluster's nodes, sorted by name.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Node name.
      type: str
    nodeid:
      description: Corosync node id (0 on a node in no cluster).
      type: int
    online:
      description: Whether it is online.
      type: bool
    local:
      description: Whether it is the node that answered.
      type: bool
  sample: [{name: pve1, nodeid: 1, online: true, local: true}, {name: pve2, nodeid: 2, online: true, local: false}]
local_node:
  description: The member that answered.
  returned: always
  type: str
node:
  description: O(node), or RV(local_node) when O(node) is empty.
  returned: always
  type: str
node_member:
  description: Whether RV(node) is one of RV(members).
  returned: always
  type: bool
guest:
  description: The entry of C(/cluster/resources) for O(vmid) (empty when no guest has that id).
  returned: always
  type: dict
  contains:
    node:
      description: The node the guest is on.
      type: str
    type:
      description: C(lxc) or C(qemu).
      type: str
    name:
      description: Its name (the hostname of a container); empty when the node has not reported it.
      type: str
    status:
      description: C(running), C(stopped), or C(unknown) when the node has not reported it.
      type: str
  sample: {id: lxc/200, vmid: 200, node: pve2, type: lxc, name: sglang-200, status: running}
placement:
  description:
    - C(absent) no guest has O(vmid); C(here) it is a container on RV(node); C(migrated) a container with
      O(hostname) (or whose name is not known yet) on another node; C(taken) a VM, or a container with
      another name on another node.
  returned: always
  type: str
  choices: [absent, here, migrated, taken]
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    from proxmoxer import ProxmoxAPI
    from proxmoxer.core import ResourceException

    PROXMOXER_ERROR = None
except ImportError:
    ProxmoxAPI = None
    ResourceException = Exception
    PROXMOXER_ERROR = traceback.format_exc()

try:
    # proxmoxer's https backend calls sys.exit when it cannot import requests: find out here first
    import requests  # noqa: F401  # pylint: disable=unused-import

    REQUESTS_ERROR = None
except ImportError:
    REQUESTS_ERROR = traceback.format_exc()


class AnswerError(Exception):
    """The API answered with something that is not what pve-manager returns for the path."""


def _bool(value):
    # JSON booleans of pve-manager are the integers 0/1 (Perl), some answers give true/false
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    raise AnswerError("not a boolean: %r" % (value,))


def parse_status(data):
    """GET /cluster/status (pve-manager PVE/API2/Cluster.pm 'status'): a list of a 'cluster' entry (none on a
    node in no cluster) and one 'node' entry per member. Returns (cluster, members)."""
    if not isinstance(data, list):
        raise AnswerError("/cluster/status is not a list: %r" % (data,))
    cluster, members = {}, []
    for entry in data:
        if not isinstance(entry, dict) or "type" not in entry:
            raise AnswerError("/cluster/status has an entry without a type: %r" % (entry,))
        if entry["type"] == "cluster":
            cluster = {
                "name": str(entry.get("name", "")),
                "quorate": _bool(entry.get("quorate", 0)),
                "nodes": int(entry.get("nodes", 0)),
            }
        elif entry["type"] == "node":
            if not isinstance(entry.get("name"), str) or not entry["name"]:
                raise AnswerError("/cluster/status has a node without a name: %r" % (entry,))
            online, local = _bool(entry.get("online", 0)), _bool(entry.get("local", 0))
            members.append(
                {"name": entry["name"], "nodeid": int(entry.get("nodeid", 0)), "online": online, "local": local}
            )
    if not members:
        raise AnswerError("/cluster/status lists no node")
    return cluster, sorted(members, key=lambda m: m["name"])


def find_guest(data, vmid):
    """GET /cluster/resources?type=vm (extract_vm_stats): {id, vmid, node, type, status, name?, ...} per guest."""
    if not isinstance(data, list):
        raise AnswerError("/cluster/resources is not a list: %r" % (data,))
    for entry in data:
        if not isinstance(entry, dict):
            raise AnswerError("/cluster/resources has an entry that is not an object: %r" % (entry,))
        if entry.get("type") not in ("lxc", "qemu", "openvz"):
            continue  # type=vm gives only guests; a pool or node entry is not one
        try:
            entry_vmid = int(entry["vmid"])
        except (KeyError, TypeError, ValueError):
            raise AnswerError("/cluster/resources has a guest without a vmid: %r" % (entry,)) from None
        if entry_vmid == vmid:
            if not isinstance(entry.get("node"), str) or not entry["node"]:
                raise AnswerError("/cluster/resources has guest %s without a node" % vmid)
            return {
                "id": str(entry.get("id", "")),
                "vmid": entry_vmid,
                "node": entry["node"],
                "type": entry["type"],
                "name": str(entry.get("name") or ""),
                "status": str(entry.get("status") or "unknown"),
            }
    return {}


def placement(guest, node, hostname):
    """Where the id is, seen from the container that is asked for (name `hostname` on `node`)."""
    if not guest:
        return "absent"
    if guest["type"] != "lxc":
        return "taken"
    if guest["node"] == node:
        return "here"
    if not guest["name"] or not hostname or guest["name"] == hostname:
        return "migrated"
    return "taken"


def decide(status, resources, vmid, node, hostname):
    cluster, members = parse_status(status)
    local = next((m["name"] for m in members if m["local"]), "")
    node = node or local
    guest = find_guest(resources, vmid)
    return {
        "cluster": cluster,
        "members": members,
        "local_node": local,
        "node": node,
        "node_member": node in [m["name"] for m in members],
        "guest": guest,
        "placement": placement(guest, node, hostname),
    }


def main():
    module = AnsibleModule(
        argument_spec={
            "api_host": {"type": "str", "required": True},
            "api_port": {"type": "int", "default": 8006},
            "api_user": {"type": "str", "required": True},
            "api_token_id": {"type": "str", "required": True},
            "api_token_secret": {"type": "str", "required": True, "no_log": True},
            "validate_certs": {"type": "bool", "default": True},
            "ca_path": {"type": "path"},
            "timeout": {"type": "int", "default": 10},
            "vmid": {"type": "int", "required": True},
            "node": {"type": "str", "default": ""},
            "hostname": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    if PROXMOXER_ERROR:
        module.fail_json(msg=missing_required_lib("proxmoxer"), exception=PROXMOXER_ERROR)
    if REQUESTS_ERROR:
        module.fail_json(msg=missing_required_lib("requests"), exception=REQUESTS_ERROR)
    p = module.params
    where = "the Proxmox VE API at %s:%s as %s!%s" % (p["api_host"], p["api_port"], p["api_user"], p["api_token_id"])
    try:
        api = ProxmoxAPI(
            p["api_host"],
            port=p["api_port"],
            user=p["api_user"],
            token_name=p["api_token_id"],
            token_value=p["api_token_secret"],
            timeout=p["timeout"],
            verify_ssl=(p["ca_path"] or True) if p["validate_certs"] else False,
        )
        status = api.cluster.status.get()
        resources = api.cluster.resources.get(type="vm")
    except Exception as e:  # proxmoxer's refusals (ResourceException), requests' connection and TLS errors
        if ResourceException is not Exception and isinstance(e, ResourceException):
            module.fail_json(msg="%s refused: %s (the token needs PVEAuditor on /)" % (where, e))
        module.fail_json(msg="cannot read %s: %s" % (where, e))
    try:
        result = decide(status, resources, p["vmid"], p["node"], p["hostname"])
    except (AnswerError, TypeError, ValueError) as e:
        module.fail_json(msg="unexpected answer from %s: %s" % (where, e))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
