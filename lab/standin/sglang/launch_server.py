"""The gpulxc lab's stand-in for `python -m sglang.launch_server` of sglang 0.5.12: TEST INFRASTRUCTURE.
(Under a second profile's stand-in wheel it takes that release's flag table and reports its version; the rest
is 0.5.12's behaviour.)

It is carried by the lab index's stand-in `sglang` wheel (lab/index/build) and behaves, as far as a
deployment can tell, like the real server on a GPU:
- it accepts exactly its release's flags (flags.json, which lab/index/build writes from the
  profile's `flags:` table, itself generated from the real parser) and refuses any other, or a value
  outside a flag's choices, as argparse does;
- it demands what the real server demands: a CUDA home (deep_gemm asserts one at import: CUDA_HOME, CUDA_PATH,
  nvcc on PATH or /usr/local/cuda), libnvrtc.so.13 loadable (sgl_kernel is NEEDED on it: LD_LIBRARY_PATH, or
  torch's nvidia/cu13/lib in the venv), its GPU's
  /dev/nvidiaN openable (ENXIO, "no driver", is what an allowed lab node gives; EPERM means the
  passthrough is not effective), and FlashInfer's JIT at every start: under the op's file lock, ninja (a
  real nvcc build linked as FlashInfer links: -L$cuda_home/lib64 -L$cuda_home/lib64/stubs -lcudart -lcuda,
  <nv/target>) into the shared FlashInfer cache, nothing to do on a warm cache, the builds counted;
- the first request with top-k/top-p sampling on each server loads FlashInfer's sampling kernel, building
  it under its lock on a cold cache inside the one scheduler loop: every request of that server stalls
  meanwhile (the H200's first sampled chat after /health 200 took 88 s; the next 0.09 s);
- its HTTP surface and health timeline: nothing listens while loading (connection refused), /health
  503 while warming up, 200 once up (after the ~1 s generation probe);
- SIGTERM drains, as 0.5.12's TokenizerManager.sigterm_watchdog does (tokenizer_manager.py:2375-2411, and
  measured on the H200: a running stream finished, a request sent after the SIGTERM answered, the exit
  8.1 s later): /health 503 at once (http_server.py:515), requests still served and new ones accepted; a
  watchdog that wakes every 5 s sees the flag, logs "Gracefully exiting... Remaining number of requests N"
  every 5 s while any runs, then the process kills its tree and itself (SIGKILL, kill_process_tree);
- a chat completion takes 5 ms per completion token (max_tokens, 3 when not given), streamed as
  server-sent events with "stream": true (a stream cut by SIGKILL has no [DONE]); requests are taken while it
  warms up already (only /health says 503: tokenizer_manager.py:516-556 checks no status);
- its load, as the real one reports it: GET /v1/loads asks the scheduler (live: v1_loads.py:135-187), while
  /metrics (--enable-metrics) shows sglang:num_running_reqs as last logged - at a request's prefill and every 40
  decoded tokens (decode_log_interval, scheduler_metrics_mixin.py), and once idle only 30 s after the last log
  (scheduler_runtime_checker_mixin.py:506-541), so it keeps its last busy value that long;
- /server_info (and the deprecated /get_server_info): the server's arguments, as http_server.py:620-644 returns
  them, the key included;
- its GPU's memory: each server takes its --mem-fraction-static when it profiles, a second after loading,
  from what the others on that GPU hold (a ledger per GPU, /dev/shm/gpulxc-lab-gpu-memory, freed when a
  process ends); one that profiles while another on its GPU is still loading, or finds too little free, dies
  as the real one did on the H200 when two started together: "RuntimeError: Not enough memory. Please try to
  increase --mem-fraction-static.";
- its fixed waits (CLOCK: the generation probe, profiling, the SIGTERM watchdog's tick, a token's decoding, the idle
  metrics log) are the real server's unless GPULXC_LAB_STANDIN_CLOCK, a JSON object {name: seconds}, sets others:
  the lab's tests run a fast clock (tests/lab/conftest.py), a test about one of these timings the real one;
- lab-only timing and faults come from GPULXC_LAB_STANDIN_PLAN, a JSON object keyed by GPU index
  (CUDA_VISIBLE_DEVICES) with load_s, warmup_s and fault (crash_at_start, never_healthy,
  die_after_s); with only_with (name or name==version), only in a stack that holds that distribution.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import fcntl
import importlib.metadata
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FLAGS = Path(__file__).with_name("flags.json")

# The real server's fixed waits, in seconds (measured on the H200, or the release's own constants).
CLOCK = {
    "health_probe_s": 1.0,  # the generation probe: a healthy /health takes about a second
    "profile_s": 1.0,  # from loaded weights to the pool's size: the window two servers on one GPU collide in
    "sigterm_tick_s": 5.0,  # TokenizerManager.sigterm_watchdog's sleep (tokenizer_manager.py:2375-2411)
    "token_s": 0.005,  # decoding: 5 ms a token
    "idle_log_s": 30.0,  # _maybe_log_idle_metrics: an idle scheduler logs 30 s after its last log
}


def standin_clock(setting):
    """CLOCK with GPULXC_LAB_STANDIN_CLOCK's values (a JSON object {name: seconds}; empty: the real server's)."""
    try:
        chosen = json.loads(setting or "{}")
        unknown = sorted(set(chosen) - set(CLOCK))
        times = {name: float(seconds) for name, seconds in chosen.items()}
    except (ValueError, TypeError, AttributeError) as error:
        sys.exit(f"GPULXC_LAB_STANDIN_CLOCK {setting!r} is not a JSON object of seconds: {error}")
    if unknown or any(seconds < 0 for seconds in times.values()):
        sys.exit(f"GPULXC_LAB_STANDIN_CLOCK {setting!r}: each name one of {sorted(CLOCK)}, each value seconds >= 0")
    return {**CLOCK, **times}


TIMES = standin_clock(os.environ.get("GPULXC_LAB_STANDIN_CLOCK"))


def _installed(dist, default):
    """The installed distribution's version (the lab wheel's: the release the stand-in stands in for)."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:  # loaded from its file (the unit tests)
        return default


VERSION = _installed("sglang", "0.5.12")
# FlashInfer's cache directory is per version, the same shape in 0.6.11 and 0.7.2 (jit/env.py:66-70, 382-396)
FLASHINFER_VERSION = _installed("flashinfer-python", "0.6.11.post1")
TYPES = {
    "str": str,
    "int": int,
    "float": float,
    "human_readable_int": lambda v: (
        int(float(v[:-1]) * {"k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6}[v[-1]]) if v[-1] in "kKmM" else int(v)
    ),
    "json_list_type": json.loads,
    "loads": json.loads,
    "nullable_str": lambda v: None if v.lower() in ("none", "null") else v,
    # sglang 0.5.23's (srt/model_executor/cuda_graph_config.py:237-281): a retired backend, a JSON object
    "parse_cuda_graph_backend_arg": lambda v: _refuse("tc_piecewise was removed") if v == "tc_piecewise" else v,
    "parse_cuda_graph_config_arg": lambda v: json.loads(v) if v.startswith("{") else _refuse("must be a JSON object"),
}


def _refuse(message):
    raise argparse.ArgumentTypeError(message)


KERNEL = r"""
#include <cuda_fp16.h>
#include <nv/target>
#include <cuda/std/type_traits>
extern "C" __global__ void gpulxc_standin_decode(__half *out) {
  NV_IF_TARGET(NV_PROVIDES_SM_80, (out[threadIdx.x] = __float2half(1.0f);));
}
"""


# SGLang's own actions, as argparse's: the deprecated switches take no value (DeprecatedAction only
# warns, DeprecatedStoreTrueAction stores True), LoRAPathAction stores its list of paths; 0.5.23's
# DeprecatedStoreConstAction (srt/arg_groups/argparse_actions.py:103-129) takes no value, or one of its
# choices where the table records no nargs (--monokernel-backend: nargs=None, server_args.py:426-437).
ACTIONS = {
    "DeprecatedAction": {"action": "store_const", "const": None},
    "DeprecatedStoreTrueAction": {"action": "store_true"},
    "DeprecatedStoreConstAction": {"action": "store"},
    "LoRAPathAction": {"action": "store"},
    "BooleanOptionalAction": {"action": argparse.BooleanOptionalAction},
}


def build_parser():
    parser = argparse.ArgumentParser(prog="python -m sglang.launch_server", allow_abbrev=False)
    for entry in json.loads(FLAGS.read_text()).values():
        names, action = entry["names"], entry["action"]
        kwargs = dict(ACTIONS.get(action, {"action": action}))  # argparse's own: store, store_true
        if action == "DeprecatedStoreConstAction" and entry.get("nargs") == 0:
            kwargs = {"action": "store_const", "const": None}
        if action == "BooleanOptionalAction":  # argparse adds the --no- forms itself
            names = [name for name in names if not (name.startswith("--no-") and "--" + name[5:] in names)]
        if "type" in entry:
            kwargs["type"] = TYPES[entry["type"]]
        for key in ("nargs", "const", "choices"):
            if key in entry and key not in kwargs and entry[key] != 0:  # nargs 0: store_const, store_true
                kwargs[key] = entry[key]
        parser.add_argument(*names, **kwargs)
    return parser


def merge_config(argv):
    """sglang 0.5.12's --config, as prepare_server_args applies it before parsing (srt/server_args.py:7738-7744):
    ConfigArgumentMerger.merge_config_with_args (srt/server_args_config_parser.py) - one --config, a .yaml/.yml file
    that exists, a YAML mapping; each key becomes `--<key>` as written (not underscores to dashes: argparse then
    refuses an underscore key); a boolean is the bare flag for a store_true flag (false: left out) and
    `--key true|false` for any other; a list its items (empty: left out); anything else `--key str(value)`; a key
    whose flag has any action but store and store_true is refused; the file's flags first, the command line's after
    them (it wins). Action names are the real parser's (flags.json), not this stand-in's argparse classes."""
    if "--config" not in argv:
        return argv
    import yaml  # noqa: PLC0415 - as sglang, only with --config (PyYAML comes with transformers)

    at = [i for i, arg in enumerate(argv) if arg == "--config"]
    if len(at) > 1:
        raise ValueError("Multiple config files specified! Only one allowed.")
    if at[0] == len(argv) - 1:
        raise ValueError("No config file specified after --config flag!")
    path = Path(argv[at[0] + 1])
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise ValueError(f"Config file must be YAML format, got: {path.suffix}")
    if not path.exists():
        raise ValueError(f"Config file not found: {path}")
    config = yaml.safe_load(path.read_text()) or {}
    if not isinstance(config, dict):
        raise ValueError("Config file must contain a dictionary at root level")
    return config_arguments(config) + argv[: at[0]] + argv[at[0] + 2 :]


def config_arguments(config):
    """ConfigArgumentMerger._convert_config_to_args, with the real parser's action names (flags.json)."""
    actions = {}
    for entry in json.loads(FLAGS.read_text()).values():
        for name in entry["names"]:
            actions[name[2:].replace("-", "_")] = entry["action"]
    merged = []
    for key, value in config.items():
        action = actions.get(key.replace("-", "_"))
        if action not in (None, "store", "store_true") and key.replace("-", "_") not in ("config", "help"):
            raise ValueError(f"Unsupported config option '{key.replace('-', '_')}' with action '{action}'")
        if isinstance(value, bool):
            merged += ([f"--{key}"] if value else []) if action == "store_true" else [f"--{key}", str(value).lower()]
        elif isinstance(value, list):
            merged += [f"--{key}", *(str(item) for item in value)] if value else []
        else:
            merged += [f"--{key}", str(value)]
    return merged


def parse_args(argv=None):
    """Flags, with sglang's --config merged first (merge_config); a bad config file ends as the real one's
    ValueError does."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        argv = merge_config(argv)
    except ValueError as error:
        die(f"ValueError: {error}")
    return build_parser().parse_args(argv)


def die(message):
    print(message, file=sys.stderr, flush=True)
    sys.exit(1)


def kill_process_tree():
    """sglang's kill_process_tree(os.getpid(), include_parent=True) (utils/common.py:1149-1193): SIGKILL."""
    os.kill(os.getpid(), signal.SIGKILL)


def crash(message):
    """An exception in a scheduler, ended as sglang 0.5.12 ends it: the scheduler logs it and SIGQUITs the main
    process (managers/scheduler.py:4043-4046), whose handler kills the tree, itself included, with SIGKILL
    (entrypoints/engine.py:1284-1290): the unit sees status=9/KILL, which SuccessExitStatus counts as clean (the
    H200's run C: evidence/gpu/runs/2026-12-02-c)."""
    print(f"Scheduler hit an exception: Traceback (most recent call last):\n{message}", file=sys.stderr, flush=True)
    print("Received sigquit from a child process. It usually means the child failed.", file=sys.stderr, flush=True)
    kill_process_tree()


def gpu_index():
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
    return int(visible) if visible.isdigit() else 0


DEFAULT_CUDA = "/usr/local/cuda"


def find_cuda_home():
    """sgl-deep-gemm 0.1.0's _find_cuda_home (deep_gemm/__init__.py:26-38) and FlashInfer 0.6.11's get_cuda_path
    (flashinfer/jit/cpp_ext.py:48-64): CUDA_HOME, else CUDA_PATH, else two levels above `which nvcc`, else
    /usr/local/cuda where it exists; None otherwise. On the H200 a unit without CUDA_HOME and CUDA_PATH but the
    toolkit's bin on PATH served (evidence/gpu/runs/2026-12-02-c)."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home is None:
        nvcc = shutil.which("nvcc")
        home = (
            os.path.dirname(os.path.dirname(nvcc)) if nvcc else (DEFAULT_CUDA if os.path.exists(DEFAULT_CUDA) else None)
        )
    return home


def load_nvrtc():
    """sgl_kernel's common_ops is NEEDED on libnvrtc.so.13 with no RUNPATH: through LD_LIBRARY_PATH, or already
    loaded with torch's CUDA libraries from the venv's nvidia/cu13/lib (torch is imported first); on the H200 a
    unit without LD_LIBRARY_PATH served (evidence/gpu/runs/2026-12-02-c)."""
    try:
        ctypes.CDLL("libnvrtc.so.13")
        return
    except OSError as error:
        missing = error
    for entry in sys.path:
        candidate = Path(entry) / "nvidia/cu13/lib/libnvrtc.so.13"
        if candidate.is_file():
            ctypes.CDLL(str(candidate))
            return
    die(f"ImportError: {missing}")


# The kernel packages sglang 0.5.23 checks at launch, before any model loads (srt/entrypoints/engine.py:1947-1966
# @ v0.5.23, assert_pkg_version in srt/utils/common.py:2422-2437): flashinfer_python where flashinfer is one of the
# attention backends, sglang-kernel on CUDA. 0.5.12's checks are not modelled.
PACKAGE_MINIMUMS = {
    "0.5.23": (
        (
            "flashinfer_python",
            "0.7.2",
            True,
            "Please uninstall the old version and reinstall the latest version by"
            " following the instructions at https://docs.flashinfer.ai/installation.html.",
        ),
        (
            "sglang-kernel",
            "0.4.9",
            False,
            "Please reinstall the latest version with `pip install sglang-kernel --force-reinstall`",
        ),
    )
}


def _release(text):
    return tuple(int(part) for part in text.split("+")[0].split(".")[:3] if part.isdigit())


def check_packages(backend):
    for dist, minimum, flashinfer_only, advice in PACKAGE_MINIMUMS.get(VERSION, ()):
        if flashinfer_only and backend != "flashinfer":
            continue
        try:
            installed = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            die(f"Exception: {dist} with minimum required version {minimum} is not installed. {advice}")
        if _release(installed) < _release(minimum):
            die(
                f"Exception: {dist} is installed with version {installed}, which is less than the minimum"
                f" required version {minimum}. {advice}"
            )


def attention_backend(args):
    """The backend the server runs: the one asked for, else SGLang's default for an MHA model off Hopper and
    SM100 (the lab's GPUs are SM 12.0): flashinfer where the flashinfer package is importable (and the model has
    no attention sinks), else triton - 0.5.23: srt/arg_groups/overrides.py:1126-1139 (_attention_backend_default,
    its log line), model_override_base.py:277-334 (get_default_attn_backend, L331-334), utils/common.py:388-395
    (is_flashinfer_available: importlib.util.find_spec); the Qwen3.5 hybrids' own default applies on SM100 only
    (arg_groups/model_overrides/qwen3_5.py:24-27) @ v0.5.23; 0.5.12: server_args.py:2579-2646, L2627."""
    if args.attention_backend is None:
        import importlib.util  # noqa: PLC0415

        args.attention_backend = "flashinfer" if importlib.util.find_spec("flashinfer") else "triton"
        print(f"Attention backend not specified. Use {args.attention_backend} backend by default.", flush=True)
    return args.attention_backend


def check_environment(index):
    if find_cuda_home() is None:
        die(
            'Traceback (most recent call last):\n  File "deep_gemm/__init__.py", line 37, in <module>\n'
            "    assert cuda_home is not None\nAssertionError"
        )
    try:
        load_nvrtc()
    except OSError as error:
        die(f"ImportError: {error}")
    node = f"/dev/nvidia{index}"
    try:
        os.close(os.open(node, os.O_RDWR))
    except OSError as error:
        if error.errno != errno.ENXIO:  # ENXIO: allowed, no driver (the lab's simulated GPU)
            die(f"RuntimeError: CUDA error: no CUDA-capable device is detected ({node}: {error.strerror})")


@contextmanager
def file_lock(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def load_library(path):
    """What dlopen checks first: a complete ELF file (a link killed half-way leaves a truncated one)."""
    data = path.read_bytes()
    if len(data) < 64 or data[:4] != b"\x7fELF":
        die(f"OSError: {path}: file too short" if len(data) < 64 else f"OSError: {path}: invalid ELF header")
    shoff, shentsize, shnum = int.from_bytes(data[40:48], "little"), data[58] | data[59] << 8, data[60] | data[61] << 8
    if shoff + shentsize * shnum > len(data):
        die(f"OSError: {path}: file too short")


SAMPLING_KERNEL = r"""
#include <cuda_fp16.h>
#include <nv/target>
extern "C" __global__ void gpulxc_standin_sampling(int *out) {
  NV_IF_TARGET(NV_PROVIDES_SM_80, (out[threadIdx.x] = 1;));
}
"""


def jit_build(name="gpulxc_standin_decode", kernel=KERNEL):
    """FlashInfer 0.6.11's JitSpec.build_and_load (flashinfer/jit/core.py:307-319): under the op's file lock,
    write its build.ninja and run ninja every time - a warm cache too, where ninja has nothing to do (and rebuilds
    a library whose link was killed: its command line is not in ninja's log) - then load the library."""
    base = Path(os.environ.get("FLASHINFER_WORKSPACE_BASE") or Path.home())
    ops = base / ".cache/flashinfer" / FLASHINFER_VERSION / "120a" / "cached_ops"
    with file_lock(ops / "tmp" / f"{name}.lock"):
        build = ops / name
        target = build / f"{name}.so"
        build.mkdir(parents=True, exist_ok=True)
        for path, text in (
            (build / f"{name}.cu", kernel),
            (
                build / "build.ninja",
                (
                    # as FlashInfer's build.ninja names them
                    f"cuda_home = {find_cuda_home()}\nnvcc = $cuda_home/bin/nvcc\n"
                    "rule nvcc\n  command = $nvcc -gencode arch=compute_120,code=sm_120 -Xcompiler -fPIC -c $in -o"
                    " $out\n"
                    "rule link\n  command = c++ -shared $in -o $out -L$cuda_home/lib64 -L$cuda_home/lib64/stubs"
                    " -lcudart -lcuda\n"
                    f"build {name}.o: nvcc {name}.cu\nbuild {name}.so: link {name}.o\n"
                ),
            ),
        ):
            if not path.exists() or path.read_text() != text:  # write_if_different
                path.write_text(text)
        dry = subprocess.run(["ninja", "-C", str(build), "-n"], capture_output=True, text=True, check=False)
        built = "no work to do" not in dry.stdout
        if built:  # the tests count builds (a killed one too)
            with (ops.parent / "gpulxc-standin-builds.log").open("a") as log:
                log.write(f"{time.time():.3f} pid={os.getpid()} gpu={gpu_index()} op={name} started\n")
        # the command line of FlashInfer's run_ninja (flashinfer/jit/cpp_ext.py): sglang_health names the build by it
        proc = subprocess.run(
            ["ninja", "-v", "-C", str(build), "-f", str(build / "build.ninja")],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            crash(f"RuntimeError: Ninja build failed for {name}:\n{proc.stdout}{proc.stderr}")
        load_library(target)
    return built


def top_k_top_p(request):
    """Whether sglang's sampler takes FlashInfer's top_k_top_p_sampling_from_probs for the request (sampler.py:121-
    133, 236): not greedy (temperature 0 is), and a top-p below 1 or a top-k (greedy and plain sampling need none)."""
    if float(request.get("temperature", 1.0)) < 1e-6:
        return False
    return float(request.get("top_p", 1.0)) < 1.0 or int(request.get("top_k", -1)) not in (-1, 0)


MEMORY = Path(os.environ.get("GPULXC_LAB_GPU_MEMORY_DIR") or "/dev/shm/gpulxc-lab-gpu-memory")
PROFILE_S = TIMES["profile_s"]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def gpu_ledger(index):
    """{pid: {"fraction", "state": loading | allocated}} of the servers on GPU `index`, the ended ones dropped."""
    path = MEMORY / f"gpu{index}.json"
    with file_lock(MEMORY / f"gpu{index}.lock"):
        ledger = {int(pid): entry for pid, entry in (json.loads(path.read_text()) if path.exists() else {}).items()}
        ledger = {pid: entry for pid, entry in ledger.items() if alive(pid)}
        yield ledger
        path.write_text(json.dumps(ledger))


def start_loading(index, fraction):
    with gpu_ledger(index) as ledger:
        ledger[os.getpid()] = {"fraction": fraction, "state": "loading"}


def allocate_pool(index, fraction):
    """The real server sizes its pool from the memory free when it profiles (model_runner): another server on
    the GPU still loading makes that figure wrong, too little left fails."""
    with gpu_ledger(index) as ledger:
        others = {pid: entry for pid, entry in ledger.items() if pid != os.getpid()}
        held = sum(entry["fraction"] for entry in others.values() if entry["state"] == "allocated")
        if any(entry["state"] == "loading" for entry in others.values()) or held + fraction > 1.0:
            ledger.pop(os.getpid(), None)
            ok = False
        else:
            ledger[os.getpid()] = {"fraction": fraction, "state": "allocated"}
            ok = True
    if not ok:
        crash("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.")


class State:
    status = "Starting"  # Starting -> Up
    draining = False  # SIGTERM received (the real tokenizer manager's gracefully_exit)
    scheduler = threading.Lock()  # one scheduler loop: a JIT build inside it stalls every request
    sampling_loaded = False  # FlashInfer's top-k/top-p sampling module, built or loaded at its first use
    args = None
    running = 0  # chat completions in flight
    lock = threading.Lock()
    logged_running = 0  # sglang:num_running_reqs as last logged by the scheduler
    logged_at = 0.0

    def log_stats(self):
        """The scheduler's metrics log: the gauges take the live count (call with the lock held)."""
        self.logged_running, self.logged_at = self.running, time.monotonic()


IDLE_LOG_S = TIMES["idle_log_s"]
DECODE_LOG_INTERVAL = 40  # ServerArgs.decode_log_interval


def idle_metrics(state, tick=1.0):
    """Scheduler.on_idle's _maybe_log_idle_metrics: idle, and 30 s since the last log, the gauges are refreshed."""
    while True:
        time.sleep(tick)
        with state.lock:
            if state.running == 0 and time.monotonic() > state.logged_at + IDLE_LOG_S:
                state.log_stats()


def sigterm_watchdog(state, interval=TIMES["sigterm_tick_s"], kill=lambda: os.kill(os.getpid(), signal.SIGKILL)):
    """TokenizerManager.sigterm_watchdog: every `interval` s, until SIGTERM; then every `interval` s until no
    request remains; then kill_process_tree(os.getpid(), include_parent=True)."""
    while not state.draining:
        time.sleep(interval)
    while True:
        with state.lock:
            remaining = state.running
        print(f"Gracefully exiting... Remaining number of requests {remaining}.", flush=True)
        if remaining == 0:
            break
        time.sleep(interval)
    kill()


def handler_for(state):
    args = state.args

    def decoded(n):
        if (n + 1) % DECODE_LOG_INTERVAL == 0:  # the decode batch's log, every 40 steps
            with state.lock:
                state.log_stats()

    class Handler(BaseHTTPRequestHandler):
        server_version = "uvicorn"

        def log_message(self, fmt, *values):
            pass

        def reply(self, status, body=None, content_type="application/json"):
            data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def authorised(self):
            if self.path.startswith(("/health", "/metrics")) or not args.api_key:
                return True
            if self.headers.get("Authorization") == f"Bearer {args.api_key}":
                return True
            self.reply(HTTPStatus.UNAUTHORIZED, {"error": "Unauthorized"})
            return False

        def do_GET(self):
            if self.authorised():
                self.reply(*self.answer_get())

        def answer_get(self):
            name = args.served_model_name or args.model_path
            if self.path in ("/health", "/health_generate"):
                healthy = state.status == "Up" and not state.draining
                if healthy:
                    time.sleep(TIMES["health_probe_s"])  # the generation probe
                return (HTTPStatus.OK if healthy else HTTPStatus.SERVICE_UNAVAILABLE,)
            model = {"id": name, "object": "model", "owned_by": "sglang", "max_model_len": args.context_length}
            info = {**vars(args), "status": "ready", "version": VERSION}  # the key too, as the real one
            routes = {
                "/model_info": {"model_path": args.model_path, "is_generation": True, "model_type": "stand-in"},
                "/v1/models": {"object": "list", "data": [model]},
                "/server_info": info,
                "/get_server_info": info,
            }
            path = self.path.split("?", 1)[0]
            if path in routes:
                return 200, routes[path]
            if path == "/v1/loads":
                with state.lock:
                    running = state.running
                load = {"num_running_reqs": running, "num_waiting_reqs": 0, "num_total_reqs": running}
                return 200, {
                    "timestamp": datetime.now(timezone.utc).isoformat(),
                    "version": VERSION,
                    "dp_rank_count": 1,
                    "loads": [load],
                    "aggregate": {"total_running_reqs": running, "total_waiting_reqs": 0, "total_reqs": running},
                }
            if self.path == "/metrics" and args.enable_metrics:
                # the real server's labels (tests/unit/fixtures/sglang/metrics-0.5.12-h200.txt, recorded on the H200)
                # and --extra-metric-labels on every scheduler metric (scheduler_metrics_mixin.py:131-149)
                pairs = {
                    "engine_type": "unified",
                    "model_name": name,
                    "moe_ep_rank": "0",
                    "pp_rank": "0",
                    "tp_rank": "0",
                    **(args.extra_metric_labels or {}),
                }
                labels = ",".join(f'{key}="{value}"' for key, value in pairs.items())
                usage = min(1.0, state.logged_running / float(args.max_running_requests or 64))
                text = (
                    f"sglang:num_running_reqs{{{labels}}} {float(state.logged_running)}\n"
                    f"sglang:num_queue_reqs{{{labels}}} 0.0\nsglang:token_usage{{{labels}}} {usage}\n"
                    f"sglang:gen_throughput{{{labels}}} 0.0\nsglang:gpulxc_standin 1.0\n"
                )
                return 200, text.encode(), "text/plain; version=0.0.4"
            return HTTPStatus.NOT_FOUND, {"detail": "Not Found"}

        def do_POST(self):
            if not self.authorised():
                return
            length = int(self.headers.get("content-length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            if self.path != "/v1/chat/completions":
                return self.reply(HTTPStatus.NOT_FOUND, {"detail": "Not Found"})
            prompt = len(json.dumps(request.get("messages", []))) // 4
            completion = int(request.get("max_tokens") or 3)
            reply_id = f"gpulxc-standin-gpu{gpu_index()}-{time.time_ns()}"  # the GPU: tests see where it went
            with state.lock:
                state.running += 1
                state.log_stats()  # the prefill batch's log
            try:
                with state.scheduler:
                    if top_k_top_p(request) and not state.sampling_loaded:
                        jit_build("gpulxc_standin_sampling", SAMPLING_KERNEL)  # the first such request, on every server
                        state.sampling_loaded = True
                if request.get("stream"):
                    return self.stream(reply_id, completion)
                for n in range(completion):
                    with state.scheduler:
                        time.sleep(TIMES["token_s"])  # decoding a token
                    decoded(n)
            finally:
                with state.lock:
                    state.running -= 1
            return self.reply(
                200,
                {
                    "id": reply_id,
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": args.served_model_name or args.model_path,
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "stand-in reply", "reasoning_content": None},
                        }
                    ],
                    "usage": {
                        "prompt_tokens": prompt,
                        "completion_tokens": completion,
                        "total_tokens": prompt + completion,
                    },
                },
            )

        def stream(self, reply_id, completion):
            """Server-sent events, a token every 5 ms, then [DONE]; the connection's end closes the body."""
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            for n in range(completion):
                with state.scheduler:
                    time.sleep(TIMES["token_s"])
                decoded(n)
                delta = {"role": "assistant", "content": "x"} if n == 0 else {"content": "x"}
                chunk = {
                    "id": reply_id,
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                }
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.flush()
            done = {
                "id": reply_id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            }
            self.wfile.write(b"data: " + json.dumps(done).encode() + b"\n\ndata: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler


def log_server_args(args):
    """Every argument, the keys included, as 0.5.12 logs them through `logging` at start: configure_logger
    (srt/utils/common.py:1253-1271, basicConfig to stderr at --log-level) then engine.py:773,
    `logger.info(f"{server_args=}")` of the ServerArgs dataclass (its repr names every field)."""
    level = getattr(logging, (getattr(args, "log_level", None) or "info").upper())
    logging.basicConfig(level=level, format="[%(asctime)s] %(message)s", datefmt="%Y-%m-%d %H:%M:%S", force=True)
    fields = ", ".join(f"{name}={value!r}" for name, value in vars(args).items())
    logging.getLogger("sglang.srt.entrypoints.engine").info(f"server_args=ServerArgs({fields})")


def plan_for(index):
    """GPULXC_LAB_STANDIN_PLAN's entry for this GPU; one with only_with (name or name==version) only in a stack that
    holds that distribution (a new stack's own fault, the old stack unharmed)."""
    plan = json.loads(os.environ.get("GPULXC_LAB_STANDIN_PLAN") or "{}").get(str(index), {})
    if plan.get("only_with"):
        name, _, version = plan["only_with"].partition("==")
        try:
            held = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            held = None
        if held is None or (version and held != version):
            return {}
    return plan


def main(argv=None):
    args = parse_args(argv)
    index = gpu_index()
    plan = plan_for(index)
    check_environment(index)
    check_packages(attention_backend(args))
    if not (Path(args.model_path) / "config.json").is_file():  # transformers' AutoConfig, as the real one
        die(f"OSError: {args.model_path} does not appear to have a file named config.json.")
    log_server_args(args)
    if plan.get("fault") == "crash_at_start":
        crash("RuntimeError: gpulxc lab fault injection: crash at start")
    fraction = args.mem_fraction_static if args.mem_fraction_static is not None else 0.88
    start_loading(index, fraction)
    time.sleep(float(plan.get("load_s", 0)) + PROFILE_S)  # loading weights, profiling: nothing listens yet
    allocate_pool(index, fraction)
    jit_build()
    state = State()
    state.args = args
    server = ThreadingHTTPServer((args.host or "127.0.0.1", args.port or 30000), handler_for(state))

    def sigterm(signum, frame):
        print("SIGTERM received. Draining requests and shutting down...", flush=True)
        state.draining = True

    signal.signal(signal.SIGTERM, sigterm)
    threading.Thread(target=sigterm_watchdog, args=(state,), daemon=True).start()
    threading.Thread(target=idle_metrics, args=(state,), daemon=True).start()

    def warm_up():
        time.sleep(float(plan.get("warmup_s", 0)))
        if plan.get("fault") == "never_healthy":
            return
        state.status = "Up"
        print("The server is fired up and ready to roll!", flush=True)
        if "die_after_s" in plan:
            time.sleep(float(plan["die_after_s"]))
            os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=warm_up, daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
