"""gpulxc.sglang.uv_stack: one resolve into a lock, exact installs, drift repaired, the dependency check
accepting declared overrides only, a failing resolve changing nothing, check and diff mode.

uv is replaced by a recorder that answers like uv 0.13.9 does (its `pip check` lines are copied from a
real run against the lab index); the lab suite runs the module with the real uv.
"""

import fcntl
import os
import re
import threading
import time
from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpulxc.sglang.plugins.module_utils import _uv_stack
from ansible_collections.gpulxc.sglang.plugins.modules import uv_stack
from conftest import ModuleExit as Exit
from conftest import ModuleFail as Fail

TORCH_PIN = "nvidia-cuda-runtime==13.0.96.*"
CHECK_OVERRIDDEN = (
    "The package `cuda-toolkit` requires `nvidia-cuda-runtime==13.0.96.* ; sys_platform == 'linux'`, "
    "but `13.2.75` is installed"
)
CHECK_OTHER = "The package `sglang` requires `torch==2.11.0`, but `2.10.0` is installed"


@pytest.fixture
def uv(tmp_path, monkeypatch, module_exits):
    """A venv dir, a stack dir, and a uv stand-in: compile conflicts like torch's runtime pin does."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin/python").touch()
    fake = {
        "installed": {},
        "calls": [],
        "check": ("", 0),
        "compiled_from": None,
        "reinstalled": [],
        "reinstall_works": True,
        "synced_with": [],
        "index_fails": "",
    }

    def run_command(self, args, **kwargs):
        assert args[0] == "/usr/local/bin/uv"
        verb = args[2]
        fake["calls"].append(verb)
        if verb == "compile":
            requirements = Path(args[args.index("--override") - 1]).read_text()
            overrides = Path(args[args.index("--override") + 1]).read_text()
            fake["compiled_from"] = (requirements, overrides, args)
            pins = _uv_stack.pins(requirements)
            runtime = _uv_stack.pins(overrides).get("nvidia-cuda-runtime") or pins.get("nvidia-cuda-runtime")
            if runtime and not runtime.startswith("13.0.96") and "nvidia-cuda-runtime" not in overrides:
                return 1, "", "  x No solution found when resolving dependencies: torch depends on " + TORCH_PIN
            lock = {**pins, "nvidia-cuda-runtime": runtime or "13.0.96", "filelock": "3.20.0"}
            hashes = "--generate-hashes" in args  # as uv writes them: the pin, then one line per file
            lines = "".join(
                f"{name}=={version}"
                + (f" \\\n    --hash=sha256:{'ab' * 32}" if hashes else "")
                + "\n    # via -r requirements.in\n"
                for name, version in lock.items()
            )
            Path(args[args.index("-o") + 1]).write_text(lines)
            return 0, "", ""
        if verb == "freeze":
            return 0, "".join(f"{n}=={v}\n" for n, v in fake["installed"].items()), ""
        if verb == "sync":
            fake["synced_with"].append(args)
            if fake["index_fails"]:
                return 2, "", fake["index_fails"]
            fake["installed"] = dict(_uv_stack.pins(Path(args[-1]).read_text()))
            reinstall = [args[i + 1] for i, arg in enumerate(args) if arg == "--reinstall-package"]
            fake["reinstalled"].append(reinstall)
            for name in reinstall if fake["reinstall_works"] else []:
                install_wheel(venv, name, fake["installed"][name])
            return 0, "", ""
        if verb == "check":
            out, rc = fake["check"]
            return rc, out, ""
        raise AssertionError(args)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(uv_stack.os.path, "exists", lambda p: True if p == "/usr/local/bin/uv" else _exists(p))
    return {"venv": venv, "dir": tmp_path / "stack", "fake": fake}


_exists = uv_stack.os.path.exists
SITE = "lib/python3.12/site-packages"
# the files of a wheel as RECORD lists them: a module, a data file, a script outside site-packages, byte code
WHEEL_FILES = {"{pkg}/__init__.py": "x = 1\n", "{pkg}/kernel.cubin": "\0" * 64, "../../../bin/{pkg}-cli": "#!py\n"}


def install_wheel(venv, name, version):
    """A distribution installed as uv installs a wheel: its files, and a dist-info whose RECORD lists them with
    their sizes (the METADATA's name spelled as the project spells it, the directory as the wheel does)."""
    site = venv / SITE
    pkg = name.replace("-", "_")
    info = site / f"{pkg}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.title()}\nVersion: {version}\n")
    rows = []
    for path, body in WHEEL_FILES.items():
        target = site / path.format(pkg=pkg)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)
        rows.append(f"{path.format(pkg=pkg)},sha256=x,{len(body)}")
    rows += [f"{pkg}/__pycache__/__init__.cpython-312.pyc,,", f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    return site / pkg


def run(uv, check=False, diff=False, **args):
    args = {"venv": str(uv["venv"]), "dir": str(uv["dir"]), **args}
    if check:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    with patch_module_args(args), pytest.raises((Exit, Fail)) as info:
        uv_stack.main()
    return info.type is Exit, info.value.args[0]


PROFILE = ["sglang==0.5.12", "torch==2.11.0"]


CUDA = ["nvidia-cuda-nvcc==13.2.78", "nvidia-cuda-runtime==13.2.75"]
RUNTIME = ["nvidia-cuda-runtime==13.2.75"]


def test_first_run_resolves_once_installs_the_lock_and_a_second_run_changes_nothing(uv):
    ok, result = run(uv, requirements=PROFILE + CUDA, overrides=RUNTIME)
    assert ok and result["changed"] and result["resolved"] and result["synced"], result
    assert uv["fake"]["calls"] == ["compile", "freeze", "sync", "freeze", "check"]
    lock = (uv["dir"] / "stack.lock").read_text()
    assert "nvidia-cuda-runtime==13.2.75" in lock and "sglang==0.5.12" in lock
    assert "# from the caller\nsglang==0.5.12" in (uv["dir"] / "requirements.in").read_text()
    assert "nvidia-cuda-nvcc==13.2.78" in (uv["dir"] / "requirements.in").read_text()
    assert result["packages"] == 5 and result["locked"]["sglang"] == "0.5.12"
    uv["fake"]["calls"].clear()
    ok, result = run(uv, requirements=PROFILE + CUDA, overrides=RUNTIME)
    assert ok and not result["changed"] and result["drift"] == {}
    assert uv["fake"]["calls"] == ["freeze", "check"]  # no resolve, no install


def test_the_lock_lists_each_files_sha256_and_the_install_requires_them(uv):
    run(uv, requirements=PROFILE)
    lock = (uv["dir"] / "stack.lock").read_text()
    assert "--generate-hashes" in uv["fake"]["compiled_from"][2]
    assert _uv_stack.unhashed(lock) == [] and lock.count("--hash=sha256:") == 4
    assert all("--require-hashes" in args for args in uv["fake"]["synced_with"]) and uv["fake"]["synced_with"]


def test_a_lock_without_hashes_is_resolved_again_once(uv):
    """A lock from before the hashes (or edited by hand): resolved again, its diff saying so; then kept."""
    run(uv, requirements=PROFILE)
    lock = uv["dir"] / "stack.lock"
    lock.write_text(
        "\n".join(line for line in lock.read_text().splitlines() if "--hash=" not in line).replace(" \\", "")
    )
    assert _uv_stack.unhashed(lock.read_text()) == ["filelock", "nvidia-cuda-runtime", "sglang", "torch"]
    uv["fake"]["calls"].clear()
    ok, result = run(uv, diff=True, requirements=PROFILE)
    assert ok and result["changed"] and result["resolved"] and not result["synced"], result
    assert "4 pins without a hash, such as filelock" in result["diff"]["before"]
    assert _uv_stack.unhashed(lock.read_text()) == [] and uv["fake"]["calls"][0] == "compile"
    ok, result = run(uv, requirements=PROFILE)
    assert ok and not result["changed"]


def test_an_index_failing_during_the_install_fails_naming_it_and_a_rerun_installs(uv):
    run(uv, requirements=PROFILE)
    installed = dict(uv["fake"]["installed"])
    uv["fake"]["installed"]["torch"] = "2.10.0"
    uv["fake"]["index_fails"] = "error: Failed to fetch: `http://127.0.0.1:3141/files/torch-2.11.0-py3-none-any.whl`"
    ok, result = run(uv, requirements=PROFILE)
    assert not ok and "stops it before anything is installed" in result["msg"], result
    assert "Failed to fetch" in result["msg"] and "torch-2.11.0" in result["msg"]
    uv["fake"]["index_fails"] = ""
    ok, result = run(uv, requirements=PROFILE)
    assert ok and result["synced"] and uv["fake"]["installed"] == installed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a==1 \\\n    --hash=sha256:00\nb==2\n    # via a\n", ["b"]),
        ("a==1 --hash=sha256:00\n# c==3\n", []),
        ("", []),
    ],
)
def test_unhashed_names_the_pins_without_a_hash(text, expected):
    assert _uv_stack.unhashed(text) == expected


def test_the_same_requirements_under_another_label_are_rewritten_without_a_resolve(uv):
    """A converged container from before the profile (the CUDA wheels in a block of their own) is relabelled
    once: no resolve, no install, the lock kept; then nothing changes."""
    run(uv, requirements=PROFILE + CUDA, overrides=RUNTIME)
    lock = (uv["dir"] / "stack.lock").read_text()
    old = (
        (uv["dir"] / "requirements.in")
        .read_text()
        .replace("nvidia-cuda-nvcc", "# from the old fragment\nnvidia-cuda-nvcc")
    )
    (uv["dir"] / "requirements.in").write_text(old)
    uv["fake"]["calls"].clear()
    ok, result = run(uv, requirements=PROFILE + CUDA, overrides=RUNTIME)
    assert ok and result["changed"] and not result["resolved"] and not result["synced"], result
    assert uv["fake"]["calls"] == ["freeze", "check"]
    assert "# from the old fragment" not in (uv["dir"] / "requirements.in").read_text()
    assert (uv["dir"] / "stack.lock").read_text() == lock
    ok, result = run(uv, requirements=PROFILE + CUDA, overrides=RUNTIME)
    assert ok and not result["changed"]


def test_a_package_changed_by_hand_is_put_back_from_the_same_lock(uv):
    run(uv, requirements=PROFILE)
    lock_before = (uv["dir"] / "stack.lock").read_text()
    uv["fake"]["installed"]["sglang"] = "0.5.11"
    uv["fake"]["installed"]["extra-by-hand"] = "1.0"
    del uv["fake"]["installed"]["filelock"]
    uv["fake"]["calls"].clear()
    ok, result = run(uv, requirements=PROFILE)
    assert ok and result["changed"] and result["synced"] and not result["resolved"]
    assert result["drift"] == {
        "extra-by-hand": {"installed": "1.0", "locked": None},
        "filelock": {"installed": None, "locked": "3.20.0"},
        "sglang": {"installed": "0.5.11", "locked": "0.5.12"},
    }
    assert "compile" not in uv["fake"]["calls"]
    assert (uv["dir"] / "stack.lock").read_text() == lock_before
    assert uv["fake"]["installed"]["sglang"] == "0.5.12"


def test_changed_inputs_resolve_again(uv):
    run(uv, requirements=PROFILE)
    ok, result = run(uv, requirements=[*PROFILE, "nvidia-cuda-nvcc==13.2.78"])
    assert (
        ok and result["resolved"] and result["drift"] == {"nvidia-cuda-nvcc": {"installed": None, "locked": "13.2.78"}}
    )
    ok, result = run(
        uv,
        requirements=[*PROFILE, "nvidia-cuda-nvcc==13.2.78"],
        extra_index_urls=["https://download.pytorch.org/whl/cu130"],
    )
    assert ok and result["resolved"]
    args = uv["fake"]["compiled_from"][2]
    assert args[args.index("--extra-index-url") + 1] == "https://download.pytorch.org/whl/cu130"


def test_without_the_override_the_resolve_fails_and_nothing_changes(uv):
    run(uv, requirements=PROFILE + RUNTIME, overrides=RUNTIME)
    before = {p.name: p.read_text() for p in uv["dir"].iterdir() if p.is_file()}
    installed = dict(uv["fake"]["installed"])
    ok, result = run(
        uv, requirements=PROFILE + RUNTIME, failure_hint="Its inputs are cuda_wheels_runtime_override and more."
    )
    assert not ok
    assert result["msg"].startswith("The resolve failed, nothing was installed or changed. Its inputs are cuda_wheels")
    assert "No solution found" in result["msg"] and TORCH_PIN in result["msg"]
    assert {p.name: p.read_text() for p in uv["dir"].iterdir() if p.is_file()} == before
    assert uv["fake"]["installed"] == installed


def test_the_dependency_check_accepts_only_declared_overrides(uv):
    uv["fake"]["check"] = ("Found 1 incompatibility\n" + CHECK_OVERRIDDEN + "\n", 1)
    ok, result = run(uv, requirements=PROFILE, overrides=RUNTIME)
    assert ok and result["accepted_check_complaints"] == [CHECK_OVERRIDDEN]
    uv["fake"]["check"] = ("Found 2 incompatibilities\n" + CHECK_OVERRIDDEN + "\n" + CHECK_OTHER + "\n", 1)
    ok, result = run(uv, requirements=PROFILE, overrides=RUNTIME)
    assert not ok
    assert "no declared override covers" in result["msg"] and CHECK_OTHER in result["msg"]
    assert CHECK_OVERRIDDEN not in result["msg"]


def test_check_mode_predicts_and_changes_nothing_and_diff_shows_the_packages(uv):
    ok, result = run(uv, check=True, diff=True, requirements=PROFILE)
    assert ok and result["changed"] and result["resolved"] and result["synced"]
    assert not uv["dir"].exists() and uv["fake"]["installed"] == {}
    assert "sync" not in uv["fake"]["calls"]
    run(uv, requirements=PROFILE)
    uv["fake"]["installed"]["torch"] = "2.10.0"
    ok, result = run(uv, check=True, diff=True, requirements=PROFILE)
    assert ok and result["changed"] and not result["resolved"]
    assert result["diff"] == {"before": "torch==2.10.0\n", "after": "torch==2.11.0\n"}
    assert uv["fake"]["installed"]["torch"] == "2.10.0"


def test_an_override_that_is_not_a_requirement_is_refused(uv):
    ok, result = run(uv, requirements=PROFILE, overrides=["==1.0"])
    assert not ok and result["msg"] == "overrides: '==1.0' is not a requirement (for example name==1.2.3)"
    assert uv["fake"]["calls"] == []


@pytest.mark.parametrize(
    "damage",
    [
        lambda pkg: (pkg / "__init__.py").unlink(),  # a module deleted
        lambda pkg: (pkg / "kernel.cubin").write_text("truncated"),  # a file cut short
        lambda pkg: (pkg.parents[3] / "bin" / "sglang-cli").unlink(),  # a script outside site-packages
        lambda pkg: __import__("shutil").rmtree(pkg),  # the whole package directory, its dist-info left
    ],
    ids=["module-deleted", "file-changed-size", "script-deleted", "package-dir-deleted"],
)
def test_a_wheel_whose_files_are_gone_while_its_dist_info_stays_is_reinstalled_and_reported(uv, damage):
    run(uv, requirements=PROFILE)
    pkg = install_wheel(uv["venv"], "sglang", "0.5.12")
    install_wheel(uv["venv"], "torch", "2.11.0")
    uv["fake"]["reinstalled"].clear()
    ok, result = run(uv, requirements=PROFILE)
    assert ok and not result["changed"] and result["damaged"] == {}  # intact (the byte code is not looked for)
    damage(pkg)
    ok, result = run(uv, check=True, diff=True, requirements=PROFILE)
    assert ok and result["changed"] and list(result["damaged"]) == ["sglang"], result
    assert result["diff"]["before"].startswith("sglang==0.5.12 (") and uv["fake"]["reinstalled"] == []
    ok, result = run(uv, requirements=PROFILE)
    assert ok and result["changed"] and result["synced"] and result["drift"] == {}
    assert result["damaged"]["sglang"]["files"] >= 1 and result["damaged"]["sglang"]["paths"][0].startswith(
        str(uv["venv"])
    )
    assert uv["fake"]["reinstalled"] == [["sglang"]]  # only the damaged one, from the same lock
    ok, result = run(uv, requirements=PROFILE)
    assert ok and not result["changed"]


def test_a_wheel_still_damaged_after_its_reinstall_fails_the_run_naming_it(uv):
    run(uv, requirements=PROFILE)
    (install_wheel(uv["venv"], "sglang", "0.5.12") / "__init__.py").unlink()
    uv["fake"]["reinstall_works"] = False
    ok, result = run(uv, requirements=PROFILE)
    assert not ok and "--reinstall-package these distributions still lack files" in result["msg"]
    assert "sglang" in result["msg"] and "__init__.py" in result["msg"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Flash_Attn.4==4.0.0b15\n", {"flash-attn-4": "4.0.0b15"}),
        (
            "torch==2.11.0\n    # via sglang\n# comment==1\nsglang==0.5.12 ; python_version >= '3.10'\n",
            {"torch": "2.11.0", "sglang": "0.5.12"},
        ),
        ("-e file:///x\nname @ https://x/y.whl\n", {}),
    ],
)
def test_pins_reads_lock_and_freeze_lines(text, expected):
    assert _uv_stack.pins(text) == expected


def test_requirement_names_are_canonical():
    assert _uv_stack.requirement_name("Nvidia_CUDA.Runtime==13.2.75 ; sys_platform == 'linux'") == "nvidia-cuda-runtime"
    assert _uv_stack.requirement_name("  # only a comment") is None
    assert re.fullmatch(r"# from a\nx==1\n", _uv_stack.fragment_text([("a", ["x==1", "# c", ""]), ("b", ["# none"])]))


def test_files_another_step_owns_are_left_out_of_the_file_check(uv):
    """cuda_surgery checks the toolkit's headers by function and its flashinfer option replaces them: the
    patterns the caller names (fnmatch, relative to site-packages) are not judged, the rest still is."""
    run(uv, requirements=PROFILE)
    pkg = install_wheel(uv["venv"], "sglang", "0.5.12")
    (pkg / "kernel.cubin").write_text("replaced by another step")
    ok, result = run(uv, requirements=PROFILE, unchecked=["sglang/*.cubin"])
    assert ok and not result["changed"] and result["damaged"] == {}, result
    (pkg / "__init__.py").unlink()
    ok, result = run(uv, requirements=PROFILE, unchecked=["sglang/*.cubin"])
    assert ok and result["damaged"]["sglang"]["files"] == 1, result


@pytest.mark.timed  # the worker is joined within 10 s
def test_with_a_shared_cache_lock_the_resolve_and_install_wait_for_the_other_container_holding_it(uv, tmp_path):
    """cache_lock: containers sharing a node's uv cache run their resolve and install one after another, so the
    first fills the cache and the others read it. Here the test holds the lock as another container's install would."""
    lock = tmp_path / "uv-shared" / "gpulxc-install.lock"
    lock.parent.mkdir()
    other = os.open(lock, os.O_WRONLY | os.O_CREAT)
    fcntl.flock(other, fcntl.LOCK_EX)
    outcome = []
    worker = threading.Thread(
        target=lambda: outcome.append(run(uv, requirements=PROFILE, cache_lock=str(lock))), daemon=True
    )
    worker.start()
    try:
        time.sleep(0.5)
        ran = list(uv["fake"]["calls"])
    finally:
        os.close(other)
    worker.join(10)
    assert ran == [], f"uv ran {ran} while another container held the shared cache's lock"
    ok, result = outcome[0]
    assert ok, result
    assert uv["fake"]["calls"][:1] == ["compile"] and "sync" in uv["fake"]["calls"]
    assert result["cache_wait"] >= 0.5 and result["synced"]
    # the lock is given back: a second run on its own does not wait
    ok, result = run(uv, requirements=PROFILE, cache_lock=str(lock))
    assert ok and not result["changed"] and result["cache_wait"] < 0.5


def test_a_shared_cache_lock_that_cannot_be_made_fails_naming_the_variable(uv, tmp_path):
    ok, result = run(uv, requirements=PROFILE, cache_lock=str(tmp_path / "not-mounted" / "gpulxc-install.lock"))
    assert not ok
    assert "cannot open the shared uv cache's lock" in result["msg"] and "uv_venv_cache_dir" in result["msg"]
    assert uv["fake"]["calls"] == [] and not uv["dir"].exists()
