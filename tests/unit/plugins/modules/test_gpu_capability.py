"""gpulxc.sglang.gpu_capability on recorded (H200) and written (8 x RTX PRO 6000, mixed) nvidia-smi
output and a fake NVML: every requirement and every failure path."""

from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpulxc.sglang.plugins.module_utils import _nvidia as nvidia
from ansible_collections.gpulxc.sglang.plugins.modules import gpu_capability
from conftest import ModuleExit as Exit
from conftest import ModuleFail as Fail

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures/nvidia"


def smi(query=None, header=None, rc=0, stderr=""):
    """A run_command standing in for nvidia-smi: the query form answers `query`, the plain form `header`."""
    calls = []

    def run_command(self, args, **kwargs):
        calls.append(args)
        if any(a.startswith("--query-gpu=") for a in args):
            return rc, query or "", stderr
        return 0, header or "", ""

    run_command.calls = calls
    return run_command


@pytest.fixture
def module(monkeypatch, module_exits):
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: "/usr/bin/" + name)
    monkeypatch.setattr(gpu_capability, "HAS_PYNVML", False)

    def run(runner, check_mode=False, **args):
        monkeypatch.setattr(basic.AnsibleModule, "run_command", runner)
        if check_mode:
            args["_ansible_check_mode"] = True
        with patch_module_args(args), pytest.raises((Exit, Fail)) as info:
            gpu_capability.main()
        return info.type, info.value.args[0]

    return run


def fixture(*parts):
    return (FIXTURES.joinpath(*parts)).read_text()


def test_recorded_h200(module):
    runner = smi(fixture("h200/query-gpu.csv"), fixture("h200/nvidia-smi.txt"))
    kind, result = module(runner, check_mode=True)
    assert kind is Exit and result["changed"] is False
    assert result["source"] == "nvidia_smi"
    (gpu,) = result["gpus"]
    assert gpu == {
        "index": 0,
        "name": "NVIDIA H200",
        "uuid": "GPU-94765b0c-3471-1a2e-b60b-33a94ca56fe5",
        "compute_capability": "9.0",
        "memory_total_mib": 143771,
        "driver_version": "580.159.04",
        "pci_bus_id": "00000000:00:06.0",
    }
    assert result["driver_version"] == "580.159.04"
    assert result["cuda_driver_version"] == "13.0"
    assert result["capabilities"] == ["9.0"]
    assert "attention_backends" not in result  # the stack profile's choice, not the GPU's
    assert runner.calls[0][1] == "--query-gpu=index,name,uuid,compute_cap,memory.total,driver_version,pci.bus_id"


def test_cuda_version_from_nvidia_smi_q_too():
    assert nvidia.parse_cuda_version(fixture("h200/nvidia-smi-q-head.txt")) == "13.0"


def test_reference_machine_passes_its_requirements(module):
    runner = smi(fixture("rtx-pro-6000-8gpu/query-gpu.csv"), fixture("rtx-pro-6000-8gpu/nvidia-smi.txt"))
    kind, result = module(runner, compute_capabilities=["12.0"], count=8)
    assert kind is Exit
    assert result["indexes"] == list(range(8))
    assert result["capabilities"] == ["12.0"]


def test_wrong_sm_names_each_gpu(module):
    kind, result = module(smi(fixture("h200/query-gpu.csv")), compute_capabilities=["12.0"])
    assert kind is Fail
    assert result["msg"] == "GPU 0 (NVIDIA H200, 00000000:00:06.0) has compute capability 9.0; required: 12.0"
    assert result["gpus"][0]["compute_capability"] == "9.0"  # what was found comes back too


def test_mixed_gpus_fail_only_for_the_odd_one(module):
    kind, result = module(smi(fixture("mixed/query-gpu.csv")), compute_capabilities=["12.0"])
    assert kind is Fail
    assert "GPU 0 (NVIDIA H200" in result["msg"] and "GPU 1" not in result["msg"]
    assert result["capabilities"] == ["9.0", "12.0"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"count": 8}, "found 1 GPU(s), exactly 8 required"),
        ({"min_count": 2}, "found 1 GPU(s), at least 2 required"),
        ({"min_driver": "590"}, "driver 580.159.04 is older than the required 590"),
    ],
)
def test_count_and_driver_requirements(module, args, message):
    kind, result = module(smi(fixture("h200/query-gpu.csv")), **args)
    assert kind is Fail and message in result["msg"]


def test_default_minimum_driver_is_r580(module):
    old = fixture("h200/query-gpu.csv").replace("580.159.04", "575.57.08")
    kind, result = module(smi(old))
    assert kind is Fail and "driver 575.57.08 is older than the required 580" in result["msg"]


def test_version_mismatch_says_what_to_do(module):
    kind, result = module(smi(rc=18, query=fixture("mismatch.txt")))
    assert kind is Fail
    assert "Driver/library version mismatch" in result["msg"]
    assert "(580.82)" in result["msg"]
    assert "pct_container_driver_install" in result["msg"]


def test_no_driver_asks_about_passthrough(module):
    kind, result = module(smi(rc=9, query=fixture("no-driver.txt")))
    assert kind is Fail
    assert "no NVIDIA driver visible" in result["msg"] and "Is GPU passthrough configured" in result["msg"]


def test_no_gpu(module):
    kind, result = module(smi(rc=6, query="No devices were found\n"))
    assert kind is Fail and "no GPU visible" in result["msg"]


def test_missing_nvidia_smi(module, monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: None)
    kind, result = module(smi())
    assert kind is Fail and "nvidia-smi not found" in result["msg"]


class FakeNVML:
    """nvidia-ml-py's calls with the values NVML gave on the recorded H200 (fixtures/nvidia/h200/README.md)."""

    class NVMLError(Exception):
        pass

    def __init__(self, fail=None):
        self.fail = fail

    def nvmlInit(self):
        if self.fail:
            raise self.NVMLError(self.fail)

    def nvmlShutdown(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return "580.159.04"

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return 13000

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        return 9, 0

    def nvmlDeviceGetName(self, handle):
        return "NVIDIA H200"

    def nvmlDeviceGetUUID(self, handle):
        return "GPU-94765b0c-3471-1a2e-b60b-33a94ca56fe5"

    def nvmlDeviceGetMemoryInfo(self, handle):
        return type("Memory", (), {"total": 150754820096})

    def nvmlDeviceGetPciInfo(self, handle):
        return type("Pci", (), {"busId": b"00000000:00:06.0"})


def test_nvml_gives_the_same_inventory_as_nvidia_smi(module, monkeypatch):
    monkeypatch.setattr(gpu_capability, "HAS_PYNVML", True)
    monkeypatch.setattr(gpu_capability, "pynvml", FakeNVML())
    _, from_nvml = module(smi())
    monkeypatch.setattr(gpu_capability, "HAS_PYNVML", False)
    _, from_smi = module(smi(fixture("h200/query-gpu.csv"), fixture("h200/nvidia-smi.txt")))
    assert from_nvml["source"] == "nvml"
    assert from_nvml["gpus"] == from_smi["gpus"]
    assert from_nvml["cuda_driver_version"] == "13.0"


def test_nvml_mismatch(module, monkeypatch):
    monkeypatch.setattr(gpu_capability, "HAS_PYNVML", True)
    monkeypatch.setattr(gpu_capability, "pynvml", FakeNVML(fail="Driver/library version mismatch"))
    kind, result = module(smi())
    assert kind is Fail and result["msg"].startswith("NVML: Driver/library version mismatch")


def test_nvml_asked_for_but_missing(module):
    kind, result = module(smi(), source="nvml")
    assert kind is Fail and "nvidia-ml-py is not importable" in result["msg"]


def test_the_module_util_holds_no_backend_table():
    """The SM -> attention backend table lives in the stack profile only (recipe fix 8)."""
    assert not hasattr(nvidia, "ATTENTION_BACKENDS") and not hasattr(nvidia, "FALLBACK_BACKEND")
