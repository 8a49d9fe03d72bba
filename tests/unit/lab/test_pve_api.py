"""The lab's Proxmox VE API stand-in (lab/pve/api.py) read through the real proxmoxer https backend, as
pve_cluster_info reads a cluster: the two paths in pve-manager's format, built from an /etc/pve tree of two nodes
(.members as pmxcfs writes it, configs under nodes/<node>/lxc and qemu-server), the token check, and a 501 for
every other path."""

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from ansible_collections.gpulxc.sglang.plugins.modules import pve_cluster_info as mod
from proxmoxer import ProxmoxAPI
from proxmoxer.core import ResourceException

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lab"))
from pve import api

pytestmark = pytest.mark.timed  # its waits and fakes time what they test (tests/unit/conftest.py)

MEMBERS = """{
"nodename": "vm",
"version": 4,
"cluster": { "name": "gpulxc-lab", "version": 2, "nodes": 2, "quorate": 1 },
"nodelist": {
  "vm": { "id": 1, "online": 1, "ip": "127.0.0.1"},
  "lab-pve2": { "id": 2, "online": 1, "ip": "127.0.0.2"}
  }
}
"""
TOKEN = "gpulxc-audit@pve!lab=0b7f0d0e-1111-2222-3333-444455556666"
SECRET = TOKEN.split("=", 1)[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("pve")
    (root / ".members").write_text(MEMBERS)
    for node, kind in (("vm", "lxc"), ("lab-pve2", "lxc"), ("lab-pve2", "qemu-server")):
        (root / "nodes" / node / kind).mkdir(parents=True)
    (root / "nodes/vm/lxc/920.conf").write_text("arch: amd64\nhostname: ct920\n\n[pve:pending]\nhostname: x\n")
    (root / "nodes/lab-pve2/lxc/921.conf").write_text("arch: amd64\nhostname: ct920\n")
    (root / "nodes/lab-pve2/lxc/922.conf").write_text("arch: amd64\n")
    (root / "nodes/lab-pve2/qemu-server/923.conf").write_text("name: build\nmemory: 2048\n")
    cert, key = root / "pve-ssl.pem", root / "pve-ssl.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    httpd = api.make_server(0, str(cert), str(key), TOKEN, str(root))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1], cert, root
    httpd.shutdown()


def client(server, secret=SECRET, **kwargs):
    port, cert, _ = server
    return ProxmoxAPI(
        "127.0.0.1",
        port=port,
        user="gpulxc-audit@pve",
        token_name="lab",
        token_value=secret,
        verify_ssl=str(cert),
        **kwargs,
    )


def test_cluster_status_lists_both_nodes_the_local_one_marked(server):
    status = client(server).cluster.status.get()
    assert status[0] == {
        "type": "cluster",
        "id": "cluster",
        "nodes": 2,
        "version": 2,
        "name": "gpulxc-lab",
        "quorate": 1,
    }
    assert {(e["name"], e["local"], e["nodeid"]) for e in status[1:]} == {("vm", 1, 1), ("lab-pve2", 0, 2)}


def test_cluster_resources_lists_every_guest_of_the_tree(server):
    resources = client(server).cluster.resources.get(type="vm")
    assert [(r["id"], r["vmid"], r["node"], r["name"]) for r in resources] == [
        ("lxc/920", 920, "vm", "ct920"),
        ("lxc/921", 921, "lab-pve2", "ct920"),
        ("lxc/922", 922, "lab-pve2", "CT922"),
        ("qemu/923", 923, "lab-pve2", "build"),
    ]
    assert resources[1]["status"] == "stopped" and resources[1]["template"] == 0


@pytest.mark.parametrize(
    ("vmid", "hostname", "placement"),
    [
        (920, "ct920", "here"),
        (921, "ct920", "migrated"),
        (922, "ct920", "taken"),
        (923, "ct920", "taken"),
        (924, "ct924", "absent"),
    ],
)
def test_the_module_decides_on_what_the_stand_in_answers(server, vmid, hostname, placement):
    c = client(server)
    result = mod.decide(c.cluster.status.get(), c.cluster.resources.get(type="vm"), vmid, "", hostname)
    assert (result["node"], result["node_member"], result["placement"]) == ("vm", True, placement)


def test_a_wrong_token_is_refused(server):
    with pytest.raises(ResourceException, match="401"):
        client(server, secret="wrong").cluster.status.get()


def test_only_the_paths_the_collection_reads_exist(server):
    with pytest.raises(ResourceException, match="501"):
        client(server).nodes.get()


def test_vmlist_has_pmxcfs_format(server):
    assert api.vmlist(server[2])["ids"]["921"] == {"node": "lab-pve2", "type": "lxc", "version": 1}
