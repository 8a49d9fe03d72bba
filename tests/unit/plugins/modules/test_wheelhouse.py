"""gpulxc.sglang.wheelhouse: the uv wheel checked against its sha256, one hashed resolve per lock for the
target, the locked wheels downloaded once into a staging directory, stale and corrupt wheels removed,
SHA256SUMS, check and diff mode, and every failure leaving the wheelhouse as it was.

uv and pip are replaced by a stand-in index: `uv pip compile` locks the requirements' pins with their
wheels' sha256 (lines as uv 0.13.9 writes them, see LOCK), `pip download` writes the wheels it is asked
for. The lab suite builds a real wheelhouse from the lab's index with the real uv and pip
(tests/lab/test_offline.py)."""

import hashlib
import importlib
import io
import os
import sys
import zipfile
from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpulxc.sglang.plugins.module_utils import _uv_stack, _wheelhouse
from ansible_collections.gpulxc.sglang.plugins.modules import wheelhouse
from conftest import ModuleExit as Exit
from conftest import ModuleFail as Fail

# Lines of a real `uv pip compile --generate-hashes --python-platform x86_64-manylinux_2_36` lock (the lab index)
LOCK = """aiohappyeyeballs==2.7.1 \\
    --hash=sha256:08fa096a87546046acb02ebabbc07b8f8ab870b43f67c6344210ef0141e970e4
    # via aiohttp
annotated-doc==0.0.7 \\
    --hash=sha256:7dc9b53d0e2f633498e9f9f3dc6d80519e57911b3ee5c0e415ace2cbdd646147
    # via
    #   fastapi
    #   typer
nvidia-cuda-runtime==13.2.75 \\
    --hash=sha256:aaaa096a87546046acb02ebabbc07b8f8ab870b43f67c6344210ef0141e970e4 \\
    --hash=sha256:bbbb096a87546046acb02ebabbc07b8f8ab870b43f67c6344210ef0141e970e4
    # via
    #   -r requirements.in
    #   --override overrides.txt
"""
UV_URL = "http://index.invalid/files/uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"


def uv_wheel_bytes():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        wheel.writestr("uv-0.13.9.data/scripts/uv", "#!/bin/sh\n")
    return buffer.getvalue()


UV_WHEEL = uv_wheel_bytes()
UV_SHA = hashlib.sha256(UV_WHEEL).hexdigest()


@pytest.fixture
def index(tmp_path, monkeypatch, module_exits):
    """The stand-in index: {name: {version: wheel bytes}}, and what uv and pip were asked."""
    fake = {
        "wheels": {
            "sglang": {"0.5.12": b"sglang 0.5.12", "0.5.11": b"sglang 0.5.11"},
            "torch": {"2.11.0": b"torch"},
            "smg": {"1.13.0": b"smg"},
            "nvidia-cuda-runtime": {"13.2.75": b"runtime"},
        },
        "calls": [],
        "pip_fails": False,
        "uv_bytes": UV_WHEEL,
        "requirements": {},
        "pip_missing": False,
        "uv_runs": True,
    }

    def digest(data):
        return hashlib.sha256(data).hexdigest()

    def run_command(self, args, **kwargs):
        if args[1:] == ["-m", "pip", "--version"]:
            return (1, "", "No module named pip") if fake["pip_missing"] else (0, "pip 24.2", "")
        if args[1:] == ["--version"]:
            if not fake["uv_runs"]:
                raise OSError(8, "Exec format error")
            return 0, "uv 0.13.9", ""
        if args[1:3] == ["pip", "compile"]:
            fake["calls"].append("compile")
            args = [str(Path(kwargs["cwd"], a)) if a.startswith(("stack.", "router.")) else a for a in args]
            requirements = Path(args[args.index("--override") - 1]).read_text()
            fake["requirements"][Path(args[-1]).stem] = requirements
            assert args[args.index("--python-platform") + 1] == "x86_64-manylinux_2_36"
            pins = {
                **_uv_stack.pins(requirements),
                **_uv_stack.pins(Path(args[args.index("--override") + 1]).read_text()),
            }
            lines = "".join(
                f"{n}=={v} \\\n    --hash=sha256:{digest(fake['wheels'][n][v])}\n    # via -r x\n"
                for n, v in sorted(pins.items())
            )
            lines += "".join(
                f"{line} \\\n    --hash=sha256:{'b' * 64}\n" for line in requirements.splitlines() if " @ " in line
            )
            Path(args[args.index("-o") + 1]).write_text(lines)
            return 0, "", ""
        if args[1:4] == ["-m", "pip", "download"]:
            fake["calls"].append("download")
            if fake["pip_fails"]:
                return 1, "", "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE."
            assert "--require-hashes" in args and "manylinux_2_36_x86_64" in args and "cp311" in args
            target = Path(args[args.index("-d") + 1])
            target.mkdir()
            for name, (version, _) in _wheelhouse.locked(Path(args[args.index("-r") + 1]).read_text())[0].items():
                (target / f"{name.replace('-', '_')}-{version}-py3-none-any.whl").write_bytes(
                    fake["wheels"][name][version]
                )
            return 0, "", ""
        raise AssertionError(args)

    def fetch_url(module, url, **kwargs):
        fake["calls"].append("fetch")
        return io.BytesIO(fake["uv_bytes"]), {"status": 200}

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(wheelhouse, "fetch_url", fetch_url)
    fake["dest"] = tmp_path / "wheelhouse"
    return fake


STACK = [
    {"name": "stack", "requirements": ["sglang==0.5.12", "torch==2.11.0"], "label": "sglang_stack"},
    {"name": "router", "requirements": ["smg==1.13.0"]},
    {
        "name": "stack",
        "requirements": ["nvidia-cuda-runtime==13.2.75"],
        "overrides": ["nvidia-cuda-runtime==13.2.75"],
        "label": "cuda_wheels",
    },
]


def run(index, check=False, diff=False, **args):
    args = {
        "dest": str(index["dest"]),
        "python_version": "3.11",
        "platform": "x86_64-manylinux_2_36",
        "index_url": "http://index.invalid/simple",
        "uv_wheel_url": UV_URL,
        "uv_wheel_sha256": UV_SHA,
        "locks": STACK,
        **args,
    }
    if check:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    with patch_module_args(args), pytest.raises((Exit, Fail)) as info:
        wheelhouse.main()
    return info.type is Exit, info.value.args[0]


def listing(index):
    return sorted(p.name for p in index["dest"].iterdir()) if index["dest"].exists() else []


def test_a_first_build_fills_the_wheelhouse_and_a_second_run_changes_nothing(index):
    ok, result = run(index)
    assert ok and result["changed"], result
    assert index["calls"] == ["fetch", "compile", "compile", "download"]
    assert result["resolved"] == ["stack", "router"]
    assert result["wheels"] == 5
    assert listing(index) == [
        "SHA256SUMS",
        "nvidia_cuda_runtime-13.2.75-py3-none-any.whl",
        "router.in",
        "router.lock",
        "router.overrides.txt",
        "sglang-0.5.12-py3-none-any.whl",
        "smg-1.13.0-py3-none-any.whl",
        "stack.in",
        "stack.lock",
        "stack.overrides.txt",
        "torch-2.11.0-py3-none-any.whl",
        UV_URL.rsplit("/", 1)[1],
    ]
    # both fragments of "stack" in one resolve, each under its label, for the target
    stack_in = (index["dest"] / "stack.in").read_text()
    assert stack_in.startswith(
        "# wheelhouse target: Python 3.11, x86_64-manylinux_2_36\n# index: http://index.invalid/simple\n"
    )
    assert (
        "# from sglang_stack\nsglang==0.5.12\ntorch==2.11.0\n# from cuda_wheels\nnvidia-cuda-runtime==13.2.75"
        in stack_in
    )
    assert (index["dest"] / "stack.overrides.txt").read_text() == "# from cuda_wheels\nnvidia-cuda-runtime==13.2.75\n"
    sums = (index["dest"] / "SHA256SUMS").read_text()
    assert f"{hashlib.sha256(b'torch').hexdigest()}  torch-2.11.0-py3-none-any.whl\n" in sums
    assert f"{UV_SHA}  {UV_URL.rsplit('/', 1)[1]}\n" in sums
    assert not [p for p in index["dest"].iterdir() if p.name.startswith(".")]  # no staging left
    index["calls"].clear()
    ok, result = run(index)
    assert ok and not result["changed"] and index["calls"] == [], (result, index["calls"])
    assert result["downloaded"] == [] and result["removed"] == []


def test_a_new_pin_resolves_every_lock_again_downloads_the_new_wheel_and_prunes_the_old(index):
    run(index)
    index["calls"].clear()
    locks = [dict(STACK[0], requirements=["sglang==0.5.11", "torch==2.11.0"]), *STACK[1:]]
    ok, result = run(index, diff=True, locks=locks)
    # every lock from one index snapshot: the container resolves each against all of the wheelhouse's wheels
    assert ok and result["changed"] and result["resolved"] == ["stack", "router"]
    assert index["calls"] == ["compile", "compile", "download"]
    assert result["downloaded"] == ["sglang-0.5.11-py3-none-any.whl"]
    assert result["removed"] == ["sglang-0.5.12-py3-none-any.whl"]
    assert "sglang-0.5.12-py3-none-any.whl" in result["diff"]["before"]
    assert "sglang-0.5.11-py3-none-any.whl" in result["diff"]["after"]
    assert "sglang-0.5.12" not in result["diff"]["after"]
    assert "sglang-0.5.12" not in (index["dest"] / "SHA256SUMS").read_text()


def test_a_corrupt_wheel_is_downloaded_again(index):
    run(index)
    (index["dest"] / "torch-2.11.0-py3-none-any.whl").write_bytes(b"truncated")
    index["calls"].clear()
    ok, result = run(index)
    assert ok and result["changed"] and index["calls"] == ["download"]
    assert result["downloaded"] == ["torch-2.11.0-py3-none-any.whl"]
    assert (index["dest"] / "torch-2.11.0-py3-none-any.whl").read_bytes() == b"torch"


def test_check_mode_says_what_it_would_do_and_changes_nothing(index):
    ok, result = run(index, check=True, diff=True)
    assert ok and result["changed"] and not index["dest"].exists()
    assert result["resolved"] == ["stack", "router"] and result["downloaded"] == [
        UV_URL.rsplit("/", 1)[1],
        "nvidia-cuda-runtime==13.2.75",
        "sglang==0.5.12",
        "smg==1.13.0",
        "torch==2.11.0",
    ]
    assert "sglang==0.5.12" in result["diff"]["after"]
    run(index)
    (index["dest"] / "smg-1.13.0-py3-none-any.whl").unlink()
    (index["dest"] / "stray-1.0-py3-none-any.whl").write_bytes(b"stray")
    before = listing(index)
    index["calls"].clear()
    ok, result = run(index, check=True, diff=True)
    assert ok and result["changed"] and index["calls"] == []
    assert result["downloaded"] == ["smg==1.13.0"] and result["removed"] == ["stray-1.0-py3-none-any.whl"]
    assert "stray-1.0" not in result["diff"]["after"] and "smg==1.13.0" in result["diff"]["after"]
    assert listing(index) == before


def test_a_changed_pin_with_a_failed_download_leaves_locks_and_wheels_as_they_were(index):
    run(index)
    before = {p.name: p.read_bytes() for p in index["dest"].iterdir()}
    index["pip_fails"] = True
    locks = [dict(STACK[0], requirements=["sglang==0.5.11", "torch==2.11.0"]), *STACK[1:]]
    ok, result = run(index, locks=locks)
    assert not ok and "the wheelhouse was not changed" in result["msg"]
    assert {p.name: p.read_bytes() for p in index["dest"].iterdir()} == before
    index["pip_fails"] = False
    ok, result = run(index, locks=locks)  # the retry resolves again: nothing was recorded as done
    assert (
        ok
        and result["resolved"] == ["stack", "router"]
        and "sglang==0.5.11" in (index["dest"] / "stack.lock").read_text()
    )


def test_a_wheel_for_another_python_whose_hash_the_lock_lists_is_replaced(index):
    """uv's --generate-hashes lists every file of a version; a file left from another target must not pass."""
    run(index)
    (index["dest"] / "torch-2.11.0-py3-none-any.whl").rename(
        index["dest"] / "torch-2.11.0-cp310-cp310-manylinux_2_28_x86_64.whl"
    )
    ok, result = run(index)
    assert ok and result["changed"]
    assert result["downloaded"] == ["torch-2.11.0-py3-none-any.whl"]
    assert result["removed"] == ["torch-2.11.0-cp310-cp310-manylinux_2_28_x86_64.whl"]


def test_a_lost_sha256sums_is_written_again_and_reported(index):
    run(index)
    (index["dest"] / "SHA256SUMS").unlink()
    ok, result = run(index, check=True)
    assert ok and result["changed"] and not (index["dest"] / "SHA256SUMS").exists()
    ok, result = run(index)
    assert ok and result["changed"] and (index["dest"] / "SHA256SUMS").exists()


def test_a_direct_url_requirement_fails_naming_where_requirements_come_from(index):
    locks = [dict(STACK[0], requirements=["sglang==0.5.12", "bar @ https://example.invalid/bar-1-py3-none-any.whl"])]
    ok, result = run(index, locks=locks)
    assert not ok and "'bar @ https://example.invalid/bar-1-py3-none-any.whl'" in result["msg"]
    assert "sglang_stack_extra_packages" in result["msg"] and listing(index) == []


def test_a_builder_without_pip_or_one_that_cannot_run_the_uv_fails_naming_wheelhouse_builder(index):
    index["pip_missing"] = True
    ok, result = run(index)
    assert not ok and "pip does not run" in result["msg"] and "wheelhouse_builder" in result["msg"]
    index["pip_missing"], index["uv_runs"] = False, False
    ok, result = run(index)
    assert not ok and "does not run on the builder ([Errno 8] Exec format error)" in result["msg"], result["msg"]
    assert "wheelhouse_builder" in result["msg"] and "uv_venv_uv_wheel_url" in result["msg"]
    assert listing(index) == []


def test_a_uv_wheel_with_the_wrong_sha256_fails_and_writes_nothing(index):
    index["uv_bytes"] = b"not the pinned wheel"
    ok, result = run(index)
    assert not ok and "not the pinned" in result["msg"] and UV_SHA in result["msg"]
    assert listing(index) == []


def test_a_failed_download_leaves_the_wheelhouse_as_it_was(index):
    run(index)
    (index["dest"] / "torch-2.11.0-py3-none-any.whl").unlink()
    before = {p.name: p.read_bytes() for p in index["dest"].iterdir()}
    index["pip_fails"] = True
    ok, result = run(index)
    assert not ok and "the wheelhouse was not changed" in result["msg"] and "DO NOT MATCH THE HASHES" in result["msg"]
    assert {p.name: p.read_bytes() for p in index["dest"].iterdir()} == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"platform": "linux"}, "'linux' is not a manylinux target"),
        ({"python_version": "3"}, "'3' is not a Python version such as 3.11"),
        ({"uv_wheel_sha256": "abc"}, "uv_wheel_sha256 must be a sha256"),
        ({"locks": [{"name": "Stack One"}]}, "locks: the name 'Stack One'"),
        ({"locks": []}, "locks: give at least one lock"),
    ],
)
def test_bad_input_fails_before_anything_is_written(index, args, message):
    ok, result = run(index, **args)
    assert not ok and message in result["msg"], result
    assert not index["dest"].exists() and index["calls"] == []


def test_pip_target_args_take_every_manylinux_tag_the_glibc_accepts():
    args = _wheelhouse.pip_target_args("3.11", "x86_64-manylinux_2_36")
    platforms = [args[i + 1] for i, a in enumerate(args) if a == "--platform"]
    assert platforms[0] == "manylinux_2_36_x86_64" and "manylinux_2_34_x86_64" in platforms
    assert "manylinux_2_5_x86_64" in platforms and "manylinux2014_x86_64" in platforms
    assert "manylinux_2_37_x86_64" not in platforms
    assert [args[i + 1] for i, a in enumerate(args) if a == "--abi"] == ["cp311", "abi3", "none"]
    old = _wheelhouse.pip_target_args("3.12", "aarch64-manylinux2014")
    assert "manylinux_2_17_aarch64" in old and "manylinux_2_18_aarch64" not in old and "cp312" in old


def test_a_real_hashed_lock_is_read_with_every_hash_of_a_pin():
    pins, others = _wheelhouse.locked(LOCK + "bar @ https://example.invalid/bar.whl \\\n    --hash=sha256:" + "c" * 64)
    assert others == ["bar @ https://example.invalid/bar.whl"]
    assert pins["aiohappyeyeballs"] == ("2.7.1", {"08fa096a87546046acb02ebabbc07b8f8ab870b43f67c6344210ef0141e970e4"})
    assert pins["annotated-doc"][0] == "0.0.7"
    assert len(pins["nvidia-cuda-runtime"][1]) == 2
    assert set(pins) == {"aiohappyeyeballs", "annotated-doc", "nvidia-cuda-runtime"}
    assert _wheelhouse.wheel_key("flashinfer_python-0.6.11.post1-py3-none-any.whl") == (
        "flashinfer-python",
        "0.6.11.post1",
    )
    assert _wheelhouse.wheel_key("SHA256SUMS") is None
    target = ("3.11", "x86_64-manylinux_2_36")
    assert _wheelhouse.compatible("torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl", *target)
    assert _wheelhouse.compatible("smg-1.13.0-cp38-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", *target)
    assert _wheelhouse.compatible("aiosignal-1.3.2-py2.py3-none-any.whl", *target)
    assert _wheelhouse.compatible("interegular-0.3.3-py37-none-any.whl", *target)  # the lab index's, as on PyPI
    assert not _wheelhouse.compatible("a-1-py312-none-any.whl", *target)
    assert not _wheelhouse.compatible("torch-2.11.0-cp310-cp310-manylinux_2_28_x86_64.whl", *target)
    assert not _wheelhouse.compatible("a-1-cp311-cp311-manylinux_2_38_x86_64.whl", *target)  # newer glibc
    assert not _wheelhouse.compatible("a-1-cp311-cp311-manylinux_2_28_aarch64.whl", *target)
    assert not _wheelhouse.compatible("a-1-cp312-abi3-manylinux_2_17_x86_64.whl", *target)
    assert os.path.basename(UV_URL) == "uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"


@pytest.mark.parametrize(
    ("wheel", "installs"),
    [
        ("a-1-cp311-none-manylinux_2_17_x86_64.whl", True),  # CPython-specific, no ABI
        ("a-1-py3-none-manylinux_2_17_x86_64.whl", True),
        ("a-1-2-cp311-cp311-manylinux_2_28_x86_64.whl", True),  # a build tag
        ("a-1-cp311-cp311-linux_x86_64.whl", False),  # not manylinux: built for one machine
        ("a-1-cp311-cp311-musllinux_1_2_x86_64.whl", False),
        ("a-1-pp310-pypy310_pp73-manylinux_2_17_x86_64.whl", False),
        ("a-1-cp311-cp311-manylinux1_x86_64.whl", True),
        ("not-a-wheel.tar.gz", False),
    ],
)
def test_a_wheel_is_for_the_target_as_packaging_tags_say(wheel, installs):
    assert _wheelhouse.compatible(wheel, "3.11", "x86_64-manylinux_2_36") is installs


def test_without_the_packaging_package_the_copy_pip_vendors_is_used(monkeypatch):
    monkeypatch.setitem(sys.modules, "packaging", None)
    monkeypatch.setitem(sys.modules, "packaging.tags", None)
    monkeypatch.setitem(sys.modules, "packaging.utils", None)
    try:
        fallback = importlib.reload(_wheelhouse)
        assert fallback.PACKAGING_IMPORT_ERROR is None
        assert fallback.parse_wheel_filename.__module__.startswith("pip._vendor.packaging")
        assert fallback.compatible(
            "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl", "3.11", "x86_64-manylinux_2_36"
        )
        monkeypatch.setitem(sys.modules, "pip._vendor.packaging.tags", None)
        assert "pip._vendor.packaging.tags" in importlib.reload(_wheelhouse).PACKAGING_IMPORT_ERROR
    finally:
        monkeypatch.undo()
        importlib.reload(_wheelhouse)


def test_with_neither_packaging_nor_pip_it_fails_naming_them_before_anything_is_written(index, monkeypatch):
    monkeypatch.setattr(wheelhouse, "PACKAGING_IMPORT_ERROR", "Traceback ... ImportError")
    ok, result = run(index)
    assert not ok and "packaging (or pip, which vendors it)" in result["msg"], result
    assert not index["dest"].exists() and index["calls"] == []


def test_a_lock_no_longer_asked_for_goes_with_its_wheels(index):
    run(index)
    ok, result = run(index, locks=[STACK[0], STACK[2]])
    assert ok and result["changed"] and result["resolved"] == []
    assert result["removed"] == ["router.in", "router.lock", "router.overrides.txt", "smg-1.13.0-py3-none-any.whl"]
    assert not [name for name in listing(index) if name.startswith(("router.", "smg-"))]
    assert "smg-1.13.0" not in (index["dest"] / "SHA256SUMS").read_text()
