"""sglang_services hands its instances, in the published shape (ansible_local.gpulxc_services: name, index, unit,
port, url, gpu), to gpulxc.sglang.sglang_health from tasks/start.yml, restart_batch.yml and verify.yml (each through
health_wait.yml): the module's argument spec must take that shape as it is."""

from pathlib import Path

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args
from ansible.template import Templar, trust_as_template
from ansible_collections.gpulxc.sglang.plugins.modules import sglang_health
from conftest import ModuleExit as Exit
from conftest import ModuleFail as Fail

REPO = Path(__file__).resolve().parents[3]
PUBLISHED = [  # the contract's shape of ansible_local.gpulxc_services.instances
    {
        "name": f"sglang@{i}",
        "index": i,
        "gpu": 0,
        "unit": f"sglang@{i}.service",
        "port": 30000 + i,
        "url": f"http://127.0.0.1:{30000 + i}",
    }
    for i in range(2)
]


def health_instances(task_file):
    """The instances expression the file hands to health_wait.yml, which passes it to its sglang_health task, or
    its own sglang_health task (restart_batch.yml writes the wait out)."""
    tasks = yaml.safe_load((REPO / "roles/sglang_services/tasks" / task_file).read_text())
    own = [t["gpulxc.sglang.sglang_health"]["instances"] for t in tasks if "gpulxc.sglang.sglang_health" in t]
    if own:
        return own[0]
    (task,) = [t for t in tasks if t.get("ansible.builtin.include_tasks") == "health_wait.yml"]
    (wait,) = yaml.safe_load((REPO / "roles/sglang_services/tasks/health_wait.yml").read_text())
    assert wait["gpulxc.sglang.sglang_health"]["instances"] == "{{ sglang_services_wait_instances }}"
    return task["vars"]["sglang_services_wait_instances"]


@pytest.mark.parametrize(
    ("task_file", "variables"),
    [
        ("verify.yml", {"ansible_local": {"gpulxc_services": {"instances": PUBLISHED}}}),
        ("start.yml", {"_sglang_services_plan": {"instances": PUBLISHED}}),
        ("restart_batch.yml", {"_batch": PUBLISHED}),
    ],
)
def test_the_instances_passed_are_accepted(task_file, variables, module_exits, monkeypatch):
    instances = Templar(variables=variables).template(trust_as_template(health_instances(task_file)))
    ready = [{"name": i["name"], "url": i["url"], "state": "ready"} for i in instances]
    monkeypatch.setattr(sglang_health, "wait_all", lambda *args, **kwargs: ready)
    with patch_module_args({"instances": instances, "deadline": 1}), pytest.raises((Exit, Fail)) as info:
        sglang_health.main()
    assert info.type is Exit, info.value.args[0]["msg"]
    assert info.value.args[0]["healthy"] is True
