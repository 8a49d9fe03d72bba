"""pct_container's input rules for the Proxmox settings it passes through, its check for GPUs two containers
of one node ask for, and the settings it sends (preflight.yml, config.yml templated as Ansible does)."""

from pathlib import Path

import pytest
import yaml
from ansible.template import Templar, trust_as_template
from conftest import trusted

ROLE = Path(__file__).resolve().parents[3] / "roles/pct_container"


def task(file, name):
    (found,) = [t for t in yaml.safe_load((ROLE / "tasks" / file).read_text()) if t.get("name") == name]
    return found


def variables(**extra):
    """The role's defaults for a container of the play whose node was not read (no node rules apply)."""
    defaults = yaml.safe_load((ROLE / "defaults/main.yml").read_text())
    return {**trusted(defaults), "proxmox_vmid": 200, "inventory_hostname": "ct200", "pct_container_node": "pve",
            "hostvars": {"pve": {}}, "pct_container_probe_result": {"skipped": True, "changed": False},
            "pct_container_installer_stat_result": {"skipped": True}, "ansible_play_hosts_all": [],
            **extra}  # fmt: skip


def errors(**extra):
    rules = task("preflight.yml", "Check the role's input and that the node can take the container")
    templar = Templar(variables={**variables(**extra), **trusted(rules["vars"])})
    return templar.template(trust_as_template("{{ _errors }}"))


GOOD = {
    "pct_container_tags": ["gpu", "SGLang_2", "a+b.c-d"],
    "pct_container_startup": "order=2,up=60,down=30",
    "pct_container_cpulimit": "12.5",
    "pct_container_protection": True,
    "pct_container_description": "x\ny",
    "pct_container_nameserver": "1.1.1.1 2001:db8::53 fe80::1%vmbr0",
    "pct_container_searchdomain": "lab.example x",
}


def test_the_defaults_and_good_settings_pass():
    assert errors() == []
    assert errors(**GOOD) == []


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("pct_container_tags", ["ok", "b@d"]),  # pve-tag: [a-z0-9_][a-z0-9_+.-]*
        ("pct_container_tags", ["-lead"]),
        ("pct_container_tags", "gpu"),  # a list
        ("pct_container_startup", "order=1,x=2"),  # pve_parse_startup_order: order, up, down only
        ("pct_container_startup", "up=a"),
        ("pct_container_startup", "0"),  # `return undef if !$value`: Proxmox refuses 0
        ("pct_container_cpulimit", "8193"),  # number, 0..8192
        ("pct_container_cpulimit", "-1"),
        ("pct_container_cpulimit", "two"),
        ("pct_container_protection", "maybe"),
        ("pct_container_description", "x" * 8193),  # maxLength 8 KiB
        ("pct_container_nameserver", "1.1.1.1 dns.example"),  # lxc-ip-with-ll-iface-list
        ("pct_container_searchdomain", "good.example -bad"),  # dns-name-list
    ],
)  # fmt: skip
def test_a_bad_setting_is_refused_naming_its_variable(variable, value):
    (message,) = errors(**{**GOOD, variable: value})
    assert message.startswith("pct_container: " + variable)


def settings(**extra):
    config = task("config.yml", "Create the container or bring its config to what is asked")
    return Templar(variables={**variables(**extra), **trusted(config["vars"])}).template(
        trust_as_template("{{ _pct_container_settings }}")
    )


def test_empty_settings_are_not_managed_and_set_ones_are_sent():
    assert settings() == {}
    sent = {key[len("pct_container_") :]: value for key, value in GOOD.items()}
    assert settings(**GOOD) == {**sent, "tags": "gpu;SGLang_2;a+b.c-d"}
    assert settings(pct_container_protection=False, pct_container_cpulimit=0) == {"protection": False, "cpulimit": "0"}


OVERLAPS = "Note the GPUs of this container that another container of the node asks for or uses"


def overlaps(mine, others, users=None, shared=False):
    """The overlap message for CT 200 on node pve asking for GPUs `mine`; others: {host: hostvars}."""
    fact = task("preflight.yml", OVERLAPS)
    hostvars = {"ct200": {}, **others}
    extra = {"hostvars": hostvars, "ansible_play_hosts_all": ["ct200", *[h for h in others if others[h].get("play")]],
             "groups": {"all": list(hostvars)}, "_pct_container_gpu_indexes": mine, "pct_container_gpus_shared": shared,
             "pct_container_probe_result": {"gpu_users": users or {}}}  # fmt: skip
    return Templar(variables={**variables(**extra), **trusted(fact["vars"])}).template(
        trust_as_template(fact["ansible.builtin.set_fact"]["_pct_container_gpu_overlaps"])
    )


def other(vmid, gpus, node="pve", play=True, shared=False):
    return {"proxmox_vmid": vmid, "pct_container_node": node, "_pct_container_gpu_indexes": gpus, "play": play,
            "inventory_hostname": "ct%d" % vmid, "pct_container_gpus_shared": shared}  # fmt: skip


def test_gpus_asked_for_by_another_container_of_the_play_are_named():
    assert overlaps([0, 1], {"ct201": other(201, [1, 2])}) == "CT 201 (ct201) asks for GPU 1"
    assert overlaps([0, 1], {"ct201": other(201, [2, 3])}) == ""
    assert overlaps([0, 1], {"ct201": other(201, [0, 1], node="pve2")}) == ""  # another node
    # sharing declared on one side only is no sharing; on both it is
    assert overlaps([0], {"ct201": other(201, [0], shared=True)}) == "CT 201 (ct201) asks for GPU 0"
    assert overlaps([0], {"ct201": other(201, [0])}, shared=True) == "CT 201 (ct201) asks for GPU 0"
    assert overlaps([0], {"ct201": other(201, [0], shared=True)}, shared=True) == ""


def test_gpus_another_ct_config_of_the_node_passes_through_are_named():
    # CT 202: not in the inventory; CT 203: in the inventory, not in the play; CT 201's config is superseded by
    # what the play asks for it
    others = {"ct201": other(201, [3]), "ct203": other(203, [], play=False)}
    users = {"201": [0], "202": [0, 1], "203": [1]}
    assert overlaps([0, 1], others, users) == (
        "CT 202 (not in the inventory) passes GPU 0, 1 through now; CT 203 (ct203) passes GPU 1 through now"
    )
    assert overlaps([0, 1], {"ct203": other(203, [], play=False, shared=True)}, {"203": [1]}, shared=True) == ""
    assert overlaps([0, 1], {}, {"202": [0]}, shared=True) == ""  # outside the inventory: this CT's setting


def test_the_overlap_is_a_refusal_naming_both_containers_and_the_gpu():
    (message,) = errors(_pct_container_gpu_indexes=[0, 1], _pct_container_gpu_overlaps="CT 201 (ct201) asks for GPU 1")
    assert "CT 200 (ct200) asks for GPU(s) 0, 1" in message and "CT 201 (ct201) asks for GPU 1" in message
    assert "pct_container_gpus_shared: true on both" in message


def leader(me, hosts):
    """_pct_container_node_leader for `me` among the play's hosts {host: hostvars} (in play order)."""
    role_vars = yaml.safe_load((ROLE / "vars/main.yml").read_text())
    extra = {"inventory_hostname": me, "pct_container_node": hosts[me]["pct_container_node"],
             "hostvars": hosts, "ansible_play_hosts": list(hosts)}  # fmt: skip
    return Templar(variables={**variables(**extra), **trusted(role_vars)}).template(
        trust_as_template("{{ _pct_container_node_leader }}")
    )


def test_each_node_has_one_leader_the_first_gpu_container_of_the_play_on_it():
    hosts = {
        "ct300": {"inventory_hostname": "ct300", "pct_container_node": "pve", "pct_container_gpu_passthrough": "none"},
        "ct301": {"inventory_hostname": "ct301", "pct_container_node": "pve"},
        "ct302": {"inventory_hostname": "ct302", "pct_container_node": "pve2"},
        "ct303": {"inventory_hostname": "ct303", "pct_container_node": "pve"},
        "ct304": {"inventory_hostname": "ct304", "pct_container_node": "pve2"},
    }
    assert {host: leader(host, hosts) for host in hosts if host != "ct300"} == {
        "ct301": "ct301", "ct303": "ct301", "ct302": "ct302", "ct304": "ct302"}  # fmt: skip
    del hosts["ct301"]  # failed before the node's steps: the next one of its node leads
    assert leader("ct303", hosts) == "ct303"


def test_containers_of_one_node_that_disagree_on_its_boot_unit_are_refused_naming_each():
    def node_errors(me, peers):
        defaults = yaml.safe_load((ROLE / "defaults/main.yml").read_text())  # as hostvars have them
        hostvars = {host: {**defaults, "inventory_hostname": host, "pct_container_node": "pve", **v}
                    for host, v in peers.items()}  # fmt: skip
        return errors(**{**peers[me], "inventory_hostname": me, "hostvars": {"pve": {}, **hostvars},
                         "ansible_play_hosts_all": list(peers)})  # fmt: skip

    same = {"ct200": {}, "ct201": {"pct_container_nvidia_caps": False}}
    assert node_errors("ct200", same) == []
    caps = {"ct200": {}, "ct201": {"pct_container_nvidia_caps": True}}
    (message,) = node_errors("ct200", caps)
    assert "the containers of node pve in this run disagree on its boot unit" in message
    assert "pct_container_nvidia_caps (ct200 false, ct201 true)" in message
    (message,) = node_errors("ct201", {"ct200": {}, "ct201": {"pct_container_boot_unit": False}})
    assert "pct_container_boot_unit (ct200 true, ct201 false)" in message
    other_node = {"ct200": {}, "ct201": {"pct_container_nvidia_modprobe": "/opt/nv", "pct_container_node": "pve2"}}
    assert node_errors("ct200", other_node) == []
    no_gpu = {"ct200": {}, "ct201": {"pct_container_nvidia_caps": True, "pct_container_gpu_passthrough": "none"}}
    assert node_errors("ct200", no_gpu) == []
