"""The lab package index (lab/index): its stand-ins carry exactly the recorded metadata, the recorded
metadata is PyPI's (asked again here, through pip's resolver report), and its real wheels are PyPI's
files. Needs PyPI (reachable from the lab machine) and a built lab."""

import concurrent.futures
import email.parser
import hashlib
import importlib.machinery
import importlib.util
import json
import zipfile
from pathlib import Path

import pytest
from conftest import REPO

INDEX = Path("/var/lib/gpulxc-lab/index")
DATA = json.loads((REPO / "lab/index/packages.json").read_text())


def load_recorder():
    loader = importlib.machinery.SourceFileLoader("lab_index_record", str(REPO / "lab/index/record"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def versions():
    """(name, entry) of every stand-in wheel: the recorded version, its older one, the other profiles' versions."""
    for stand_in in DATA["stand_ins"]:
        yield stand_in["name"], stand_in
        if "second" in stand_in:
            yield stand_in["name"], stand_in["second"]
        for other in stand_in.get("others", []):
            yield stand_in["name"], other


def wheel_metadata(path):
    with zipfile.ZipFile(path) as wheel:
        name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(wheel.read(name).decode()), wheel.namelist()


def test_every_stand_in_in_the_index_carries_the_recorded_metadata(lab_ready):
    checked = 0
    for name, entry in versions():
        metadata, members = wheel_metadata(INDEX / "files" / entry["filename"])
        assert metadata["Name"] == name
        assert metadata["Version"] == entry["version"]
        assert (metadata["Requires-Python"] or "") == entry["requires_python"]
        assert (metadata.get_all("Requires-Dist") or []) == entry["requires_dist"], name
        assert (metadata.get_all("Provides-Extra") or []) == entry["provides_extra"], name
        assert any(m.endswith(".dist-info/GPULXC_LAB_STAND_IN") for m in members)
        # no files but the metadata, except the two that carry something: the stand-in server, CCCL headers
        carried = [m for m in members if ".dist-info/" not in m]
        allowed = {"sglang": "sglang/", "flashinfer-python": "flashinfer/data/cccl/libcudacxx/include/"}.get(name)
        assert all(allowed and m.startswith(allowed) for m in carried), (name, carried[:3])
        if allowed:
            assert carried, name
        checked += 1
    assert checked == sum(1 + ("second" in s) + len(s.get("others", [])) for s in DATA["stand_ins"])
    assert {"sglang", "torch", "sglang-kernel", "flashinfer-python", "flashinfer-cubin", "triton"} <= {
        s["name"] for s in DATA["stand_ins"]
    }
    # every shipped profile's pins are there (the second profile's graph: its real metadata too)
    assert set(DATA["profiles"]) == {path.stem for path in (REPO / "profiles").glob("*.yml")}
    served = {(name, entry["version"]) for name, entry in versions()} | {
        (e["name"], e["version"]) for e in DATA["real"]
    }
    for requirements in DATA["profiles"].values():
        assert {tuple(r.split("==")) for r in requirements} <= served, requirements


def test_the_real_wheels_in_the_index_are_the_recorded_files(lab_ready):
    names = set()
    for entry in DATA["real"]:
        path = INDEX / "files" / entry["filename"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"], entry["filename"]
        with zipfile.ZipFile(path) as wheel:
            assert not any(m.endswith("GPULXC_LAB_STAND_IN") for m in wheel.namelist())
        names.add(entry["name"])
    assert names == {
        "nvidia-cuda-nvcc",
        "nvidia-nvvm",
        "nvidia-cuda-crt",
        "nvidia-cuda-cccl",
        "nvidia-cuda-runtime",
        "nvidia-cuda-nvrtc",
        "ninja",
        "uv",
        # the router's graph (smg and what it needs), real: the lab runs the real gateway
        "smg",
        "grpcio",
        "grpcio-health-checking",
        "protobuf",
        "pyyaml",
        "setproctitle",
        "typing-extensions",
    }


@pytest.fixture(scope="module")
def pypi_reports():
    """{which: (the recorded entries, pip's report of them)}: PyPI asked again through pip's resolver report
    (--no-deps, exact pins) for every recorded version, one version of a name per pip call, the calls side by
    side (each mostly waits on the network)."""
    first_real, other_real = {}, {}
    for entry in DATA["real"]:
        (other_real if entry["name"] in first_real else first_real)[entry["name"]] = entry
    wanted = {
        "recorded": {s["name"]: s for s in DATA["stand_ins"]} | first_real,
        "second": {s["name"]: s["second"] for s in DATA["stand_ins"] if "second" in s} | other_real,
        "others": {s["name"]: s["others"][0] for s in DATA["stand_ins"] if s.get("others")},
    }
    assert all(len(s.get("others", [])) <= 1 for s in DATA["stand_ins"])  # one other profile: one more group
    recorder = load_recorder()
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        reports = list(
            pool.map(
                lambda entries: recorder.pip_report([f"{n}=={e['version']}" for n, e in entries.items()], no_deps=True),
                wanted.values(),
            )
        )
    return {
        which: (wanted[which], list(map(recorder.entry, report))) for which, report in zip(wanted, reports, strict=True)
    }


@pytest.mark.pypi
@pytest.mark.parametrize("which", ["recorded", "second", "others"])
def test_the_recorded_metadata_is_pypis(pypi_reports, which):
    wanted, report = pypi_reports[which]
    got = {entry["name"]: entry for entry in report}
    assert set(got) == set(wanted)
    for name, entry in wanted.items():
        assert got[name]["version"] == entry["version"], name
        assert got[name]["requires_dist"] == entry["requires_dist"], name
        assert got[name]["requires_python"] == entry["requires_python"], name
        assert got[name]["provides_extra"] == entry["provides_extra"], name
        assert got[name]["filename"] == entry["filename"], name
        if "sha256" in entry:
            assert got[name]["sha256"] == entry["sha256"], name
