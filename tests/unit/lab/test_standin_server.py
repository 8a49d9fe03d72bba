"""The lab's stand-in sglang server (lab/standin/sglang/launch_server.py), its parts that need no CT:
exactly sglang 0.5.12's flags, the environment it demands, and its health timeline over HTTP. (Its
JIT build with the CT's CUDA toolkit is exercised in the lab, never against this machine's CUDA.)"""

import argparse
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.timed  # its waits and fakes time what they test (tests/unit/conftest.py)

REPO = Path(__file__).resolve().parents[3]
SOURCE = REPO / "lab/standin/sglang/launch_server.py"
spec = importlib.util.spec_from_file_location("standin_launch_server", SOURCE)
server = importlib.util.module_from_spec(spec)
spec.loader.exec_module(server)
# the flag table as lab/index/build puts it into the stand-in wheel (sglang/flags.json)
build_loader = importlib.machinery.SourceFileLoader("lab_index_build", str(REPO / "lab/index/build"))
build = importlib.util.module_from_spec(importlib.util.spec_from_loader("lab_index_build", build_loader))
build_loader.exec_module(build)
launch_loader = importlib.machinery.SourceFileLoader(
    "sglang_launch", str(REPO / "roles/sglang_services/files/sglang-launch")
)
LAUNCH = importlib.util.module_from_spec(importlib.util.spec_from_loader("sglang_launch", launch_loader))
launch_loader.exec_module(LAUNCH)
PROFILE_FLAGS = yaml.safe_load((REPO / "profiles/sglang-0.5.12.yml").read_text())["flags"]


@pytest.fixture(autouse=True)
def flag_table(tmp_path_factory, monkeypatch):
    table = tmp_path_factory.getbasetemp() / "flags.json"
    if not table.exists():
        table.write_bytes(build.flag_table("0.5.12"))
    monkeypatch.setattr(server, "FLAGS", table)


REFERENCE_FLAGS = [
    "--model-path",
    "/dev/shm/model",
    "--reasoning-parser",
    "qwen3",
    "--attention-backend",
    "flashinfer",
    "--mem-fraction-static",
    "0.88",
    "--max-running-requests",
    "64",
    "--context-length",
    "8192",
    "--chunked-prefill-size",
    "4096",
    "--mamba-scheduler-strategy",
    "extra_buffer",
    "--mamba-ssm-dtype",
    "float32",
    "--trust-remote-code",
    "--served-model-name",
    "model",
    "--enable-metrics",
    "--nccl-port",
    "31000",
    "--host",
    "127.0.0.1",
    "--port",
    "30000",
]


def test_the_parser_takes_exactly_the_flags_of_sglang_0_5_12():
    parser = server.build_parser()
    args = parser.parse_args(REFERENCE_FLAGS)
    assert (args.attention_backend, args.mem_fraction_static, args.context_length) == ("flashinfer", 0.88, 8192)
    assert args.trust_remote_code and args.enable_metrics
    flags = {o for action in parser._actions for o in action.option_strings} - {"-h", "--help"}
    listed = {name for entry in PROFILE_FLAGS.values() for name in entry["names"]}
    assert flags == listed and len(listed) > 380
    assert parser.parse_args(["--model", "m", "--context-length", "8k"]).context_length == 8000


@pytest.mark.parametrize(
    "bad",
    [
        ["--model-path", "m", "--attention-backend", "fa5"],  # not one of 0.5.12's computed choices
        ["--model-path", "m", "--mamba-ssm-dtype", "int8"],
        ["--model-path", "m", "--enable-everything"],  # not a flag of 0.5.12
        ["--model-path", "m", "--port", "thirty"],
        ["--model-path", "m", "--mem-frac", "0.5"],  # no abbreviations
    ],
)
def test_anything_else_is_refused_as_argparse_does(bad, capsys):
    with pytest.raises(SystemExit) as info:
        server.build_parser().parse_args(bad)
    assert info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_it_takes_what_the_real_parser_takes():
    parser = server.build_parser()
    args = parser.parse_args(
        [
            "--model-path",
            "m",
            "--reasoning-parser",
            "auto",
            "--no-lora-strict-loading",
            "--experts-shared-outer-loras",
            "--sampling-backend",
            "pytorch",
            "--log-requests-level",
            "3",
            "--model-checksum",
            "--stream-output",
            "--lora-paths",
            "a",
            "b=c",
        ]
    )
    assert (args.reasoning_parser, args.lora_strict_loading, args.experts_shared_outer_loras) == ("auto", False, True)
    assert (args.sampling_backend, args.log_requests_level, args.model_checksum) == ("pytorch", 3, "")
    assert args.stream_output and args.lora_paths == ["a", "b=c"]
    assert parser.parse_args(["--model-path", "m", "--lora-strict-loading"]).lora_strict_loading is True


@pytest.mark.parametrize(
    "bad",
    [
        ["--model-path", "m", "--reasoning-parser", "qwen9"],  # the real choices, now with auto
        ["--model-path", "m", "--sampling-backend", "cuda"],  # choices the old table left open
        ["--model-path", "m", "--log-requests-level", "7"],
        ["--model-path", "m", "--load-format", "onnx"],
        ["--model-path", "m", "--collect-tokens-histogram", "yes"],  # a deprecated switch takes no value
    ],
)
def test_a_value_outside_the_real_choices_is_refused(bad, capsys):
    with pytest.raises(SystemExit) as info:
        server.build_parser().parse_args(bad)
    assert info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_a_config_file_gives_flags_and_the_command_line_wins(tmp_path):
    config = tmp_path / "gpu3.yaml"
    config.write_text(
        "# instance 3\nmodel-path: /dev/shm/model\nport: 30003\nenable-metrics: true\n"
        'trust-remote-code: false\nattention-backend: "flashinfer"\n'
    )
    args = server.parse_args(["--config", str(config), "--port", "30103"])
    assert (args.model_path, args.port, args.enable_metrics, args.trust_remote_code) == (
        "/dev/shm/model",
        30103,
        True,
        False,
    )
    assert args.attention_backend == "flashinfer"
    config.write_text("attention-backend: fa5\n")
    with pytest.raises(SystemExit):
        server.parse_args(["--config", str(config)])
    config.write_text("enable_metrics: true\n")  # 0.5.12 writes the key as it is: --enable_metrics, refused
    with pytest.raises(SystemExit):
        server.parse_args(["--config", str(config)])


def test_it_demands_a_cuda_home_nvrtc_and_its_gpu_node_as_the_real_one(monkeypatch, tmp_path, capsys):
    """deep_gemm's _find_cuda_home and FlashInfer's get_cuda_path: CUDA_HOME, CUDA_PATH, `which nvcc`, /usr/local/cuda;
    libnvrtc.so.13 through the loader or torch's nvidia/cu13/lib. On the H200 units without CUDA_HOME (the
    toolkit's bin on PATH) and without LD_LIBRARY_PATH served (evidence/gpu/runs/2026-12-02-c)."""
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    monkeypatch.setattr(server, "DEFAULT_CUDA", str(tmp_path / "no-usr-local-cuda"))
    with pytest.raises(SystemExit):
        server.check_environment(0)
    assert "assert cuda_home is not None\nAssertionError" in capsys.readouterr().err
    (tmp_path / "toolkit/bin").mkdir(parents=True)
    (tmp_path / "toolkit/bin/nvcc").write_text("#!/bin/sh\n")
    (tmp_path / "toolkit/bin/nvcc").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "toolkit/bin"))
    assert server.find_cuda_home() == str(tmp_path / "toolkit")  # two levels above nvcc
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "path"))
    assert server.find_cuda_home() == str(tmp_path / "path")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "home"))
    assert server.find_cuda_home() == str(tmp_path / "home")
    loaded = []

    def cdll(name):
        if "/" not in name:
            raise OSError(f"{name}: cannot open shared object file")
        loaded.append(name)

    monkeypatch.setattr(server.ctypes, "CDLL", cdll)
    monkeypatch.setattr(server.sys, "path", [str(tmp_path / "site")])
    with pytest.raises(SystemExit):
        server.check_environment(0)
    assert "ImportError: libnvrtc.so.13: cannot open" in capsys.readouterr().err
    (tmp_path / "site/nvidia/cu13/lib").mkdir(parents=True)
    (tmp_path / "site/nvidia/cu13/lib/libnvrtc.so.13").write_bytes(b"")
    monkeypatch.setattr(server, "DEFAULT_CUDA", str(tmp_path))
    with pytest.raises(SystemExit):
        server.check_environment(9999)  # nvrtc from torch's wheels; then no /dev/nvidia9999
    assert loaded == [str(tmp_path / "site/nvidia/cu13/lib/libnvrtc.so.13")]
    assert "no CUDA-capable device is detected (/dev/nvidia9999" in capsys.readouterr().err


def test_without_an_attention_backend_it_takes_flashinfer_where_flashinfer_imports_else_triton(monkeypatch, capsys):
    """SGLang's default for an MHA model on SM 12.x (0.5.23: arg_groups/overrides.py:1126-1139,
    model_override_base.py:331-334); a backend given is kept."""
    args = argparse.Namespace(attention_backend=None)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object() if name == "flashinfer" else None)
    assert server.attention_backend(args) == "flashinfer" and args.attention_backend == "flashinfer"
    assert "Attention backend not specified. Use flashinfer backend by default." in capsys.readouterr().out
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert server.attention_backend(argparse.Namespace(attention_backend=None)) == "triton"
    assert server.attention_backend(argparse.Namespace(attention_backend="fa3")) == "fa3"


def test_0_5_23_checks_its_kernel_packages_at_launch_as_the_real_one(monkeypatch, capsys):
    """engine.py:1947-1966 @ v0.5.23: sglang-kernel >= 0.4.9 always, flashinfer_python >= 0.7.2 with flashinfer;
    the 0.5.12 stand-in checks neither."""
    versions = {"sglang-kernel": "0.4.10", "flashinfer_python": "0.7.2"}

    def version(dist):
        if dist not in versions:
            raise importlib.metadata.PackageNotFoundError(dist)
        return versions[dist]

    monkeypatch.setattr(server.importlib.metadata, "version", version)
    monkeypatch.setattr(server, "VERSION", "0.5.23")
    server.check_packages("flashinfer")
    versions["flashinfer_python"] = "0.6.11.post1"
    server.check_packages("triton")  # only where flashinfer runs
    with pytest.raises(SystemExit):
        server.check_packages("flashinfer")
    assert "flashinfer_python is installed with version 0.6.11.post1, which is less than" in capsys.readouterr().err
    del versions["sglang-kernel"]
    with pytest.raises(SystemExit):
        server.check_packages("triton")
    assert "sglang-kernel with minimum required version 0.4.9 is not installed" in capsys.readouterr().err
    monkeypatch.setattr(server, "VERSION", "0.5.12")
    server.check_packages("flashinfer")


def get(url, key=None):
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, b""


def loads(base):
    return json.loads(get(base + "/v1/loads", "k")[1])["aggregate"]["total_reqs"]


def test_health_timeline_and_http_surface():
    state = server.State()
    state.args = server.build_parser().parse_args([*REFERENCE_FLAGS[:-4], "--api-key", "k"])
    httpd = server.ThreadingHTTPServer(("127.0.0.1", 0), server.handler_for(state))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        assert get(base + "/health")[0] == 503  # warming up
        assert get(base + "/model_info")[0] == 401  # needs the key, /health does not
        assert get(base + "/model_info", "k")[0] == 200  # answers during warm-up already
        warm_body = json.dumps({"model": "model", "messages": [{"role": "user", "content": "hi"}]}).encode()
        warm_request = urllib.request.Request(
            base + "/v1/chat/completions",
            data=warm_body,
            headers={"Authorization": "Bearer k", "content-type": "application/json"},
        )
        with urllib.request.urlopen(warm_request, timeout=5) as response:  # so do completions (no status check)
            assert response.status == 200
        info = json.loads(get(base + "/server_info", "k")[1])  # its arguments, the key included, as the real one
        assert (info["api_key"], info["version"], info["context_length"]) == ("k", "0.5.12", 8192)
        assert get(base + "/server_info")[0] == 401
        state.status = "Up"
        started = time.monotonic()
        assert get(base + "/health")[0] == 200
        assert time.monotonic() - started >= 1.0  # the generation probe
        models = json.loads(get(base + "/v1/models", "k")[1])
        assert models["data"][0]["id"] == "model" and models["data"][0]["max_model_len"] == 8192
        assert b"sglang:num_running_reqs" in get(base + "/metrics")[1]
        body = json.dumps({"model": "model", "messages": [{"role": "user", "content": "hi"}]}).encode()
        request = urllib.request.Request(
            base + "/v1/chat/completions",
            data=body,
            headers={"Authorization": "Bearer k", "content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            reply = json.loads(response.read())
        assert reply["object"] == "chat.completion" and reply["choices"][0]["message"]["role"] == "assistant"
        state.draining = True  # after SIGTERM
        assert get(base + "/health")[0] == 503
    finally:
        httpd.shutdown()


def test_its_load_is_live_on_v1_loads_and_as_last_logged_on_metrics(monkeypatch):
    """sglang 0.5.12: /v1/loads asks the scheduler (v1_loads.py:135-187); the /metrics gauges are what the scheduler
    last logged - at a prefill, every 40 decoded tokens, and once idle 30 s after the last log
    (scheduler_runtime_checker_mixin.py:506-541). On the H200 a drain reading /metrics waited 30.8 s."""
    monkeypatch.setattr(server, "IDLE_LOG_S", 1.0)
    state = server.State()
    state.args = server.build_parser().parse_args([*REFERENCE_FLAGS[:-4], "--api-key", "k"])
    state.status = "Up"
    httpd = server.ThreadingHTTPServer(("127.0.0.1", 0), server.handler_for(state))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        # a long completion (100 tokens, 5 ms each) is in flight, and /metrics counts it
        long_body = json.dumps({"model": "model", "max_tokens": 100, "messages": []}).encode()
        long_request = urllib.request.Request(
            base + "/v1/chat/completions",
            data=long_body,
            headers={"Authorization": "Bearer k", "content-type": "application/json"},
        )
        replies = []
        started = time.monotonic()
        worker = threading.Thread(target=lambda: replies.append(urllib.request.urlopen(long_request, timeout=5).read()))
        worker.start()
        time.sleep(0.2)
        gauge = 'model_name="model",moe_ep_rank="0",pp_rank="0",tp_rank="0"}'
        assert f"{gauge} 1.0".encode() in get(base + "/metrics")[1]
        assert loads(base) == 1
        worker.join()
        assert time.monotonic() - started >= 0.5
        assert json.loads(replies[0])["usage"]["completion_tokens"] == 100
        # idle: /v1/loads asks the scheduler (0), /metrics keeps the last log's value until the idle log
        assert loads(base) == 0
        assert f"{gauge} 1.0".encode() in get(base + "/metrics")[1]
        threading.Thread(target=server.idle_metrics, args=(state, 0.1), daemon=True).start()
        time.sleep(1.5)
        assert f"{gauge} 0.0".encode() in get(base + "/metrics")[1]
    finally:
        httpd.shutdown()


@pytest.fixture
def other_server():
    """A live process standing for another server on the GPU (its pid in the ledger)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc.pid
    proc.kill()
    proc.wait()


def ledger(tmp_path, entries, index=0):
    (tmp_path / f"gpu{index}.json").write_text(json.dumps(entries))


@pytest.mark.parametrize(
    "case",
    [
        ({}, 0.88, True),
        ({"allocated": 0.45}, 0.45, True),  # one after another: the second finds the first's pool
        ({"allocated": 0.6}, 0.45, False),  # too little left
        ({"loading": 0.3}, 0.3, False),  # two profiling at once (the H200's "Not enough memory")
    ],
)
def test_a_server_takes_its_gpu_memory_from_what_the_others_hold(tmp_path, monkeypatch, capsys, other_server, case):
    others, fraction, fits = case
    monkeypatch.setattr(server, "MEMORY", tmp_path)
    ledger(tmp_path, {str(other_server): {"fraction": f, "state": s} for s, f in others.items()})
    server.start_loading(0, fraction)
    if fits:
        server.allocate_pool(0, fraction)
        held = json.loads((tmp_path / "gpu0.json").read_text())
        assert held[str(os.getpid())] == {"fraction": fraction, "state": "allocated"}
    else:
        monkeypatch.setattr(server, "kill_process_tree", lambda: sys.exit(137))
        with pytest.raises(SystemExit):
            server.allocate_pool(0, fraction)
        message = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
        assert message in capsys.readouterr().err
        assert str(os.getpid()) not in json.loads((tmp_path / "gpu0.json").read_text())  # its memory is freed


def test_an_ended_server_holds_no_memory_and_other_gpus_do_not_count(tmp_path, monkeypatch):
    monkeypatch.setattr(server, "MEMORY", tmp_path)
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    ledger(tmp_path, {ended.stdout.strip(): {"fraction": 0.9, "state": "loading"}})
    ledger(tmp_path, {str(os.getppid()): {"fraction": 0.9, "state": "loading"}}, index=1)
    server.start_loading(0, 0.88)
    server.allocate_pool(0, 0.88)


def test_sigterm_drains_serving_and_taking_requests_and_exits_once_idle(capsys):
    """As 0.5.12's sigterm_watchdog (tokenizer_manager.py:2375-2411) and the H200 run: after SIGTERM /health is 503,
    a running request finishes, a new one is accepted and answered, and the process kills itself when none runs."""
    state = server.State()
    state.args = server.build_parser().parse_args(REFERENCE_FLAGS[:-4])
    state.status = "Up"
    httpd = server.ThreadingHTTPServer(("127.0.0.1", 0), server.handler_for(state))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    killed = threading.Event()
    watchdog = threading.Thread(target=server.sigterm_watchdog, args=(state, 0.2, killed.set), daemon=True)
    watchdog.start()

    def chat(tokens):
        body = json.dumps({"model": "model", "max_tokens": tokens, "messages": []}).encode()
        with urllib.request.urlopen(urllib.request.Request(base + "/v1/chat/completions", data=body), timeout=10) as r:
            return r.status, json.loads(r.read())["usage"]["completion_tokens"]

    try:
        replies = []
        running = threading.Thread(target=lambda: replies.append(chat(300)))  # 1.5 s of decoding
        running.start()
        time.sleep(0.3)
        state.draining = True  # the SIGTERM handler
        assert get(base + "/health")[0] == 503
        assert chat(20) == (200, 20)  # sent after the SIGTERM: accepted, answered
        assert not killed.is_set()  # the running one still runs
        running.join()
        assert replies == [(200, 300)]
        assert killed.wait(2)
        log = capsys.readouterr().out
        assert "Gracefully exiting... Remaining number of requests 1." in log
        assert log.rstrip().endswith("Gracefully exiting... Remaining number of requests 0.")
    finally:
        httpd.shutdown()


def test_its_load_gauges_are_named_and_labelled_as_the_real_servers(monkeypatch):
    """The gauges the drain reads, against /metrics of a real sglang 0.5.12 on the H200 (evidence/gpu/runs)."""
    real = (REPO / "tests/unit/fixtures/sglang/metrics-0.5.12-h200.txt").read_text()
    state = server.State()
    state.args = server.build_parser().parse_args([*REFERENCE_FLAGS[:-4], "--served-model-name", "qwen3next-tiny"])
    httpd = server.ThreadingHTTPServer(("127.0.0.1", 0), server.handler_for(state))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        mine = get(f"http://127.0.0.1:{httpd.server_address[1]}/metrics")[1].decode()
    finally:
        httpd.shutdown()
    for gauge in ("sglang:num_running_reqs", "sglang:num_queue_reqs"):
        (theirs,) = [line.rsplit(" ", 1)[0] for line in real.splitlines() if line.startswith(gauge + "{")]
        (ours,) = [line.rsplit(" ", 1)[0] for line in mine.splitlines() if line.startswith(gauge + "{")]
        assert ours == theirs


@pytest.fixture(scope="session")
def real_merger(tmp_path_factory):
    """ConfigArgumentMerger from the sglang 0.5.12 wheel on PyPI (its module imports only argparse and PyYAML)."""
    where = tmp_path_factory.mktemp("sglang-wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.11",
            "--platform",
            "manylinux_2_34_x86_64",
            "-d",
            str(where),
            "sglang==0.5.12",
        ],
        check=True,
    )
    (wheel,) = where.glob("sglang-0.5.12-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (where / "server_args_config_parser.py").write_bytes(archive.read("sglang/srt/server_args_config_parser.py"))
    spec = importlib.util.spec_from_file_location("real_config_parser", where / "server_args_config_parser.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ConfigArgumentMerger


def real_like_parser():
    """A parser whose actions are of the real parser's kinds, as the merger tells them apart: argparse's store and
    store_true, and for SGLang's own actions (DeprecatedStoreTrueAction, BooleanOptionalAction, ...) a class that
    is neither, which the real merger refuses."""
    parser = argparse.ArgumentParser()
    for entry in PROFILE_FLAGS.values():
        if entry["action"] in ("store", "store_true"):
            parser.add_argument(*entry["names"], action=entry["action"])
        else:
            parser.add_argument(*entry["names"], action=type(entry["action"], (argparse.Action,), {}), nargs="?")
    return parser


@pytest.mark.parametrize(
    "config",
    [
        {
            "model-path": "/dev/shm/m",
            "port": 30003,
            "mem-fraction-static": 0.3,
            "trust-remote-code": True,
            "enable-metrics": False,
            "api-key": "k",
        },
        {"mem_fraction_static": 0.3, "enable_metrics": True},  # underscore keys: written as they are
        {"json-model-override-args": '{"a": 1}', "served-model-name": None, "context-length": 4096.0},
        {"cuda-graph-bs": [1, 2, 4], "lora-paths": [], "skip-tokenizer-init": "false"},
        {"sleep-on-idle": False, "watchdog-timeout": 300, "disable-cuda-graph": True},
        {"lora-strict-loading": True},  # a BooleanOptionalAction: refused
        {"enable-flashinfer-mla": True},  # a deprecated switch: refused
        [1, 2],  # not a mapping
        None,  # an empty file
    ],
)
def test_a_config_file_becomes_the_arguments_0_5_12s_merger_makes(tmp_path, real_merger, config):
    path = tmp_path / "instance-0.yaml"
    path.write_text(yaml.safe_dump(config) if config is not None else "")
    argv = ["--config", str(path), "--port", "30100"]
    try:
        expected = real_merger(real_like_parser()).merge_config_with_args(list(argv))
    except ValueError as error:
        expected = f"ValueError: {error}"
    try:
        mine = server.merge_config(list(argv))
    except ValueError as error:
        mine = f"ValueError: {error}"
    assert mine == expected


def test_a_config_file_that_is_not_yaml_or_missing_is_refused_as_0_5_12_does(tmp_path, real_merger):
    for argv in (
        ["--config", str(tmp_path / "x.json")],
        ["--config", str(tmp_path / "x.yaml")],
        ["--config"],
        ["--config", "a.yaml", "--config", "b.yaml"],
    ):
        messages = []
        for merge in (real_merger(real_like_parser()).merge_config_with_args, server.merge_config):
            with pytest.raises(ValueError) as info:
                merge(list(argv))
            messages.append(str(info.value))
        assert messages[0] == messages[1], argv


def test_a_crash_ends_as_the_real_servers_by_sigkill():
    """sglang 0.5.12: a scheduler's exception SIGQUITs the main process, which SIGKILLs its tree and itself; on the
    H200 every such failure (ninja missing, -lcudart not found, nv/target missing) ended with status 9/KILL
    (evidence/gpu/runs/2026-12-02-c)."""
    code = f"import runpy; s = runpy.run_path({str(SOURCE)!r}); s['crash']('RuntimeError: x')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert proc.stderr.splitlines() == [
        "Scheduler hit an exception: Traceback (most recent call last):",
        "RuntimeError: x",
        "Received sigquit from a child process. It usually means the child failed.",
    ]


@pytest.fixture
def root_logging(monkeypatch):
    """The stand-in's basicConfig(force=True) replaces the root logger's handlers: put them back afterwards."""
    monkeypatch.setattr(logging.root, "handlers", list(logging.root.handlers))
    monkeypatch.setattr(logging.root, "level", logging.root.level)
    monkeypatch.setattr(logging, "_logRecordFactory", logging.getLogRecordFactory())


def test_without_the_launcher_the_stand_in_logs_the_key_as_sglang_does(root_logging, capsys):
    args = server.build_parser().parse_args(["--model-path", "/m", "--api-key", "it's-a-key"])
    server.log_server_args(args)
    logged = capsys.readouterr().err
    assert "] server_args=ServerArgs(" in logged and 'api_key="it\'s-a-key"' in logged


def test_through_the_launcher_the_stand_ins_log_has_no_key(root_logging, capsys):
    logging.setLogRecordFactory(LAUNCH.redacted_record)
    args = server.build_parser().parse_args(["--model-path", "/m", "--api-key", "it's-a-key", "--port", "30001"])
    server.log_server_args(args)
    logged = capsys.readouterr().err
    assert "it's-a-key" not in logged and "api_key='<redacted>'" in logged and "port=30001" in logged


def test_a_plan_with_only_with_applies_only_in_a_stack_holding_that_distribution(monkeypatch):
    """A new stack's own fault (test_services' canary): the entry applies where the distribution, at that version
    when one is given, is installed - here pyyaml, which this venv holds - and nowhere else."""
    held = importlib.metadata.version("pyyaml")
    for only_with, applies in [
        ("pyyaml", True),
        (f"pyyaml=={held}", True),
        ("pyyaml==0.0.1", False),
        ("gpulxc-no-such-distribution", False),
        (None, True),
    ]:
        entry = {"fault": "crash_at_start", **({"only_with": only_with} if only_with else {})}
        monkeypatch.setenv("GPULXC_LAB_STANDIN_PLAN", json.dumps({"3": entry}))
        assert server.plan_for(3) == (entry if applies else {}), only_with
        assert server.plan_for(4) == {}


def test_its_clock_is_the_real_servers_unless_the_lab_sets_one():
    real = {"health_probe_s": 1.0, "profile_s": 1.0, "sigterm_tick_s": 5.0, "token_s": 0.005, "idle_log_s": 30.0}
    assert server.standin_clock(None) == server.CLOCK == real
    fast = server.standin_clock('{"sigterm_tick_s": 0.5, "health_probe_s": 0}')
    assert fast == {**server.CLOCK, "sigterm_tick_s": 0.5, "health_probe_s": 0.0}


@pytest.mark.parametrize(
    "setting",
    ['{"sigterm_tick": 1}', '{"profile_s": -1}', '{"profile_s": "soon"}', "[1, 2]", "not json", '{"token_s": null}'],
)
def test_a_clock_that_is_not_names_to_seconds_stops_the_stand_in_naming_the_setting(setting):
    with pytest.raises(SystemExit) as stopped:
        server.standin_clock(setting)
    assert "GPULXC_LAB_STANDIN_CLOCK" in str(stopped.value) and setting in str(stopped.value)


def test_the_clock_in_the_environment_times_the_servers_waits(tmp_path):
    """A process started with GPULXC_LAB_STANDIN_CLOCK (as a server's unit starts it) takes its waits from it: a
    healthy /health answers after the probe's seconds, and the SIGTERM watchdog wakes at its tick."""
    probe = (
        "import importlib.util, sys, threading, time\n"
        f"spec = importlib.util.spec_from_file_location('s', {str(SOURCE)!r})\n"
        "s = importlib.util.module_from_spec(spec); spec.loader.exec_module(s)\n"
        "state = s.State(); threading.Timer(0.01, setattr, (state, 'draining', True)).start()\n"
        "start = time.monotonic(); s.sigterm_watchdog(state, kill=lambda: None)\n"
        "print(s.TIMES['health_probe_s'], s.PROFILE_S, round(time.monotonic() - start, 2))\n"
    )
    times = {}
    for name, clock in (("real", ""), ("fast", '{"sigterm_tick_s": 0.1, "health_probe_s": 0.05, "profile_s": 0.2}')):
        env = dict(os.environ, GPULXC_LAB_STANDIN_CLOCK=clock)
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True).stdout
        times[name] = [float(word) for word in out.splitlines()[-1].split()]
    assert times["real"][:2] == [1.0, 1.0] and times["fast"][:2] == [0.05, 0.2]
    # a SIGTERM at once, nothing running: the watchdog's first wake, a tick later, ends it
    assert 0.1 <= times["fast"][2] < 1.0 and 5.0 <= times["real"][2] < 6.0
