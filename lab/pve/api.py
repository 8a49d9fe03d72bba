"""The lab's stand-in for the Proxmox VE API (pveproxy on port 8006), for exactly the two paths the collection
reads through proxmoxer's https backend: GET /cluster/status and GET /cluster/resources (type vm).

Test infrastructure. It answers as pve-manager's PVE/API2/Cluster.pm does, from the lab's /etc/pve tree as
pmxcfs presents it: `.members` (written by lab/setup in pmxcfs's format) and the guest list pmxcfs keeps in
memory (`.vmlist`), which it builds from nodes/<node>/{lxc,qemu-server}/<vmid>.conf; this stand-in builds it
the same way at each request. Authentication: an API token only (`Authorization: PVEAPIToken=<user>!<id>=<secret>`).

    python3 -m pve.api --port 8006 --cert C --key K --token-file T [--pve-root /etc/pve]
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import ssl
import subprocess
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

GUEST_DIRS = {"lxc": "lxc", "qemu-server": "qemu"}


def read_members(root):
    """/etc/pve/.members as pmxcfs writes it (status.c cfs_create_memberlist_msg): {nodename, version, cluster
    {name, version, nodes, quorate}, nodelist {<name>: {id, online, ip}}}; without a cluster only nodename, version."""
    return json.loads((Path(root) / ".members").read_text())


def vmlist(root):
    """pmxcfs's vmlist (status.c cfs_create_vmlist_msg, .vmlist): {version, ids {<vmid>: {node, type, version}}},
    one entry per nodes/<node>/lxc/<vmid>.conf (type lxc) or qemu-server/<vmid>.conf (type qemu)."""
    ids = {}
    for conf in sorted(Path(root).glob("nodes/*/*/*.conf")):
        kind = GUEST_DIRS.get(conf.parent.name)
        if kind and conf.stem.isdigit():
            ids[conf.stem] = {"node": conf.parent.parent.name, "type": kind, "version": 1}
    return {"version": 1, "ids": ids} if ids else {"version": 1}


def guest_name(root, vmid, guest):
    """The name pvestatd reports for a guest (rrd): a CT's hostname (CT<vmid> without one), a VM's name."""
    conf = Path(root) / "nodes" / guest["node"] / ("lxc" if guest["type"] == "lxc" else "qemu-server")
    text = (conf / f"{vmid}.conf").read_text(errors="replace").split("\n[", 1)[0]
    match = re.search(r"^%s: *(\S+)" % ("hostname" if guest["type"] == "lxc" else "name"), text, re.M)
    return match.group(1) if match else (f"CT{vmid}" if guest["type"] == "lxc" else f"VM {vmid}")


def guest_status(vmid, guest, local):
    """running/stopped for a CT of the local node (lxc-info), as pvestatd reports it; 'stopped' on the other lab
    node (it has no LXC of its own)."""
    if guest["type"] != "lxc" or guest["node"] != local:
        return "stopped"
    proc = subprocess.run(["lxc-info", "-n", str(vmid), "-sH"], capture_output=True, text=True, check=False)
    return "running" if proc.stdout.strip() == "RUNNING" else "stopped"


def cluster_status(root):
    """GET /cluster/status (PVE/API2/Cluster.pm, 'status'): with members, a 'cluster' entry then one 'node' entry
    per member (local = 1 for this node); without, one fake entry for the local node."""
    members = read_members(root)
    local = members["nodename"]
    if "nodelist" not in members:
        return [
            {
                "type": "node",
                "id": f"node/{local}",
                "name": local,
                "ip": "127.0.0.1",
                "local": 1,
                "nodeid": 0,
                "online": 1,
                "level": "",
            }
        ]
    res = []
    if "cluster" in members:
        c = members["cluster"]
        res.append(
            {
                "type": "cluster",
                "id": "cluster",
                "nodes": c["nodes"],
                "version": c["version"],
                "name": c["name"],
                "quorate": c["quorate"],
            }
        )
    for name, d in members["nodelist"].items():
        entry = {
            "type": "node",
            "id": f"node/{name}",
            "name": name,
            "nodeid": d["id"],
            "local": 1 if name == local else 0,
            "online": d["online"],
            "level": "",
        }
        if "ip" in d:
            entry["ip"] = d["ip"]
        res.append(entry)
    return res


def cluster_resources(root):
    """GET /cluster/resources?type=vm (Cluster.pm 'resources', API2Tools.pm extract_vm_stats): per guest, sorted
    by vmid as strings, {id: <type>/<vmid>, vmid, node, type, status, and from the rrd name, uptime, template, ...}."""
    local = read_members(root)["nodename"]
    res = []
    for vmid, guest in sorted(vmlist(root).get("ids", {}).items()):
        res.append(
            {
                "id": f"{guest['type']}/{vmid}",
                "vmid": int(vmid),
                "node": guest["node"],
                "type": guest["type"],
                "status": guest_status(vmid, guest, local),
                "name": guest_name(root, vmid, guest),
                "uptime": 0,
                "template": 0,
                "maxcpu": 1,
                "cpu": 0,
                "maxmem": 536870912,
                "mem": 0,
                "maxdisk": 0,
                "disk": 0,
                "netin": 0,
                "netout": 0,
                "diskread": 0,
                "diskwrite": 0,
            }
        )
    return res


def handler(root, token):
    class Handler(BaseHTTPRequestHandler):
        server_version = "pve-api-daemon/3.0"

        def log_message(self, *args):
            pass

        def answer(self, code, body, reason=None):
            data = json.dumps(body).encode()
            self.send_response(code, reason)
            self.send_header("Content-Type", "application/json;charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            url = urlsplit(self.path)
            if self.headers.get("Authorization", "") != f"PVEAPIToken={token}":
                # PVE::APIServer::AnyEvent: a missing or wrong token is 401 with the reason as status text
                self.answer(
                    401, {"data": None}, "invalid token value!" if "Authorization" in self.headers else "No ticket"
                )
                return
            query = parse_qs(url.query)
            if url.path == "/api2/json/cluster/status":
                self.answer(200, {"data": cluster_status(root)})
            elif url.path == "/api2/json/cluster/resources" and query.get("type", ["vm"]) == ["vm"]:
                self.answer(200, {"data": cluster_resources(root)})
            else:
                # only the paths the collection reads exist here; the real API has the rest
                self.answer(501, {"data": None}, f"Method 'GET {url.path}' not implemented")

        do_POST = do_PUT = do_DELETE = do_GET

    return Handler


def make_server(port, cert, key, token, root="/etc/pve"):
    """The TLS server on 127.0.0.1:<port> (0: a free one, server_address says which)."""
    ThreadingHTTPServer.address_family = socket.AF_INET
    server = ThreadingHTTPServer(("127.0.0.1", port), handler(root, token))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    return server


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8006)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--token-file", required=True)
    parser.add_argument("--pve-root", default="/etc/pve")
    args = parser.parse_args()
    token = Path(args.token_file).read_text().strip()
    make_server(args.port, args.cert, args.key, token, args.pve_root).serve_forever()


if __name__ == "__main__":
    main()
