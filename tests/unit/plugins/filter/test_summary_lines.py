"""gpulxc.sglang.summary_lines as a plain function: the cases are in test_summary_lines.yaml (what stack_info returned,
the container, GPUs and model, the lines expected); and playbooks/summary.yml's debug passes it the run's facts."""

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.template import Templar, trust_as_template
from ansible_collections.gpulxc.sglang.plugins.filter.summary import summary_lines
from conftest import trusted

REPO = Path(__file__).resolve().parents[4]
CASES = yaml.safe_load(Path(__file__).with_suffix(".yaml").read_text())["cases"]
ARGUMENTS = ("container", "node", "gpus", "model")


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case):
    assert summary_lines(case["summary"], **{k: case[k] for k in ARGUMENTS if k in case}) == case["lines"]


def test_anything_but_what_stack_info_returned_is_an_error():
    with pytest.raises(AnsibleFilterError, match=r"expects what gpulxc\.sglang\.stack_info returned, got list"):
        summary_lines([])


SUMMARY = {"stack": "s", "model": "from-config", "router": None}
GPUS = [{"index": 0, "name": "G", "compute_capability": "9.0"}]
# the play's variables, and the first lines the summary shows from them
PLAYS = [
    (
        {
            "pct_container_vmid": 990,
            "pct_container_node": "pve",
            "gpulxc_gpus": {"gpus": GPUS},
            "ansible_local": {"gpulxc_services": {"model": "published"}, "gpulxc_gpus": {"gpus": []}},
        },
        ["CT 990 on pve", "GPUs: 1 x G, SM 9.0 (indexes 0)", "stack: s", "model: published"],
    ),
    (
        {"proxmox_vmid": 991, "ansible_local": {"gpulxc_gpus": {"gpus": GPUS}}},
        ["CT 991 on ?", "GPUs: 1 x G, SM 9.0 (indexes 0)", "stack: s", "model: from-config"],
    ),
    (
        {"pct_container_vmid": 992, "proxmox_vmid": 1, "ansible_local": {"gpulxc_services": {"model": ""}}},
        ["CT 992 on ?", "GPUs: 0 x ?, SM  (indexes )", "stack: s", "model: from-config"],
    ),
]


@pytest.mark.parametrize(("play", "lines"), PLAYS, ids=["this_run", "facts_only", "published_model_empty"])
def test_the_playbook_passes_the_runs_gpus_and_model_else_the_facts(play, lines):
    task = yaml.safe_load((REPO / "playbooks/summary.yml").read_text())[0]["tasks"][-1]
    templar = Templar(variables={"gpulxc_summary_result": SUMMARY, **play, **trusted(task["vars"])})
    assert templar.template(trust_as_template(task["ansible.builtin.debug"]["msg"]))[:4] == lines
