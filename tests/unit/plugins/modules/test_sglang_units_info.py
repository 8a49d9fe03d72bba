"""gpulxc.sglang.sglang_units_info on recorded systemctl output: the cases are in test_sglang_units_info.yaml
(the input, the exact run_command calls with their output, the files read, the result)."""

from pathlib import Path

import pytest
import yaml
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpulxc.sglang.plugins.modules import sglang_units_info
from conftest import ModuleExit as Exit
from conftest import ModuleFail as Fail

CASES = yaml.safe_load(Path(__file__).with_suffix(".yaml").read_text())


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case, module_exits, monkeypatch, tmp_path):
    for name, content in case["files"].items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    monkeypatch.setattr(sglang_units_info, "SYSTEMD_DIR", str(tmp_path / "systemd"))
    monkeypatch.setattr(sglang_units_info, "PROC", str(tmp_path / "proc"))
    calls = list(case["mocks"]["run_command"])

    def run_command(self, args, **kwargs):
        expected = calls.pop(0)
        assert args == expected["command"]
        return expected["rc"], expected["out"], expected.get("err", "")

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, **kw: "/usr/bin/" + name)
    args = dict(case["input"])
    for key in ("env_file", "config_dir", "instance_env_file"):
        if args.get(key):
            args[key] = str(tmp_path / args[key].lstrip("/"))
    with patch_module_args({"_ansible_check_mode": True, **args}), pytest.raises((Exit, Fail)) as info:
        sglang_units_info.main()
    assert (info.type is Fail) == case.get("failed", False)
    result = info.value.args[0]
    if info.type is Exit:  # Ansible fails a task whose result holds a true `failed`, whatever the module meant
        assert not result.get("failed"), result
    assert {key: result.get(key) for key in case["output"]} == case["output"]
    assert calls == []  # every recorded call was made
