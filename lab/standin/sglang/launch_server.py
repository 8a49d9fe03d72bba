"""The gpulxc lab's stand-in for `python -m sglang.launch_server` of sglang 0.5.12: TEST INFRASTRUCTURE.

It is carried by the lab index's stand-in `sglang` wheel (lab/index/build) and behaves, as far as a
deployment can tell, like the real server on a GPU:
- it accepts exactly sglang 0.5.12's flags (flags.json, which lab/index/build writes from the
  profile's `flags:` table, itself generated from the real parser) and refuses any other, or a value
  outside a flag's choices, as argparse does;
- it demands what the real server demands: CUDA_HOME (deep_gemm asserts it at import),
  libnvrtc.so.13 loadable through LD_LIBRARY_PATH (sgl_kernel is NEEDED on it), its GPU's
  /dev/nvidiaN openable (ENXIO, "no driver", is what an allowed lab node gives; EPERM means the
  passthrough is not effective), and a first-start JIT build with ninja + nvcc linked as FlashInfer
  links (-L$CUDA_HOME/lib64 -L$CUDA_HOME/lib64/stubs -lcudart -lcuda, <nv/target>) into the shared
  FlashInfer cache, under a file lock, counting its builds;
- its HTTP surface and health timeline: nothing listens while loading (connection refused), /health
  503 while warming up, 200 once up (after the ~1 s generation probe), 503 after SIGTERM, which ends
  with the process killing itself (SIGKILL, as kill_process_tree does) half a second later: a request
  still generating then is lost, as on the real server;
- a chat completion takes 5 ms per completion token (max_tokens, 3 when not given), streamed as
  server-sent events with "stream": true (a stream cut by SIGKILL has no [DONE]), and /metrics
  (--enable-metrics) reports the requests in flight as sglang:num_running_reqs;
- lab-only timing and faults come from GPULXC_LAB_STANDIN_PLAN, a JSON object keyed by GPU index
  (CUDA_VISIBLE_DEVICES) with load_s, warmup_s and fault (crash_at_start, never_healthy,
  die_after_s).
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FLAGS = Path(__file__).with_name("flags.json")
FLASHINFER_VERSION = "0.6.11.post1"
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
}
KERNEL = r"""
#include <cuda_fp16.h>
#include <nv/target>
#include <cuda/std/type_traits>
extern "C" __global__ void gpulxc_standin_decode(__half *out) {
  NV_IF_TARGET(NV_PROVIDES_SM_80, (out[threadIdx.x] = __float2half(1.0f);));
}
"""


# SGLang's own actions, as argparse's: the deprecated switches take no value (DeprecatedAction only
# warns, DeprecatedStoreTrueAction stores True), LoRAPathAction stores its list of paths.
ACTIONS = {
    "DeprecatedAction": {"action": "store_const", "const": None},
    "DeprecatedStoreTrueAction": {"action": "store_true"},
    "LoRAPathAction": {"action": "store"},
    "BooleanOptionalAction": {"action": argparse.BooleanOptionalAction},
}


def build_parser():
    parser = argparse.ArgumentParser(prog="python -m sglang.launch_server", allow_abbrev=False)
    for entry in json.loads(FLAGS.read_text()).values():
        names, action = entry["names"], entry["action"]
        kwargs = dict(ACTIONS.get(action, {"action": action}))  # argparse's own: store, store_true
        if action == "BooleanOptionalAction":  # argparse adds the --no- forms itself
            names = [name for name in names if not (name.startswith("--no-") and "--" + name[5:] in names)]
        if "type" in entry:
            kwargs["type"] = TYPES[entry["type"]]
        for key in ("nargs", "const", "choices"):
            if key in entry and key not in kwargs and entry[key] != 0:  # nargs 0: store_const, store_true
                kwargs[key] = entry[key]
        parser.add_argument(*names, **kwargs)
    return parser


def parse_args(argv=None):
    """Flags, with sglang's --config: a YAML file of `flag: value` lines, the command line winning."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    first = parser.parse_args(argv)
    if not first.config:
        return first
    from_file = []
    for raw in Path(first.config).read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, _, value = (part.strip() for part in line.partition(":"))
        flag, value = "--" + key.replace("_", "-"), value.strip("\"'")
        if value.lower() in ("true", "false"):
            from_file += [flag] if value.lower() == "true" else []
        else:
            from_file += [flag, value]
    return parser.parse_args(from_file + argv)


def die(message):
    print(message, file=sys.stderr, flush=True)
    sys.exit(1)


def gpu_index():
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
    return int(visible) if visible.isdigit() else 0


def check_environment(index):
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if not cuda_home or not Path(cuda_home).is_dir():
        die("Traceback (most recent call last):\n  File \"deep_gemm/__init__.py\", line 36, in <module>\n"
            "    assert cuda_home is not None\nAssertionError")  # fmt: skip
    try:
        ctypes.CDLL("libnvrtc.so.13")
    except OSError as error:
        die(f"ImportError: {error}")  # sgl_kernel's common_ops is NEEDED on it, with no RUNPATH
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


def jit_build():
    """FlashInfer's first-start JIT: under its per-op file lock, build the op unless its library exists
    (FlashInfer's is_compiled), with ninja linking straight into the library; then load it."""
    base = Path(os.environ.get("FLASHINFER_WORKSPACE_BASE") or Path.home())
    ops = base / ".cache/flashinfer" / FLASHINFER_VERSION / "120a" / "cached_ops"
    name = "gpulxc_standin_decode"
    built = False
    with file_lock(ops / "tmp" / f"{name}.lock"):
        target = ops / name / f"{name}.so"
        if not target.exists():
            build = ops / name
            build.mkdir(parents=True, exist_ok=True)
            (build / f"{name}.cu").write_text(KERNEL)
            (build / "build.ninja").write_text(
                "rule nvcc\n  command = nvcc -gencode arch=compute_120,code=sm_120 -Xcompiler -fPIC -c $in -o $out\n"
                "rule link\n  command = c++ -shared $in -o $out -L$$CUDA_HOME/lib64 -L$$CUDA_HOME/lib64/stubs"
                " -lcudart -lcuda\n"
                f"build {name}.o: nvcc {name}.cu\nbuild {name}.so: link {name}.o\n"
            )  # fmt: skip
            with (ops.parent / "gpulxc-standin-builds.log").open("a") as log:
                log.write(f"{time.time():.3f} pid={os.getpid()} gpu={gpu_index()} started\n")
            proc = subprocess.run(["ninja", "-C", str(build)], capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                die(f"RuntimeError: Ninja build failed for {name}:\n{proc.stdout}{proc.stderr}")
            built = True
        load_library(target)
    return built


class State:
    status = "Starting"  # Starting -> Up; UnHealthy after SIGTERM
    args = None
    running = 0  # chat completions in flight
    lock = threading.Lock()


def handler_for(state):
    args = state.args

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
                if state.status == "Up":
                    time.sleep(1.0)  # the generation probe: a healthy /health takes about a second
                return (HTTPStatus.OK if state.status == "Up" else HTTPStatus.SERVICE_UNAVAILABLE,)
            model = {"id": name, "object": "model", "owned_by": "sglang", "max_model_len": args.context_length}
            routes = {
                "/model_info": {"model_path": args.model_path, "is_generation": True, "model_type": "stand-in"},
                "/v1/models": {"object": "list", "data": [model]},
            }
            if self.path in routes:
                return 200, routes[self.path]
            if self.path == "/metrics" and args.enable_metrics:
                text = (
                    f'sglang:num_running_reqs{{model_name="{name}"}} {float(state.running)}\n'
                    f'sglang:num_queue_reqs{{model_name="{name}"}} 0.0\nsglang:gpulxc_standin 1.0\n'
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
            if state.status != "Up":
                return self.reply(HTTPStatus.SERVICE_UNAVAILABLE, {"error": "server is starting"})
            prompt = len(json.dumps(request.get("messages", []))) // 4
            completion = int(request.get("max_tokens") or 3)
            reply_id = f"gpulxc-standin-gpu{gpu_index()}-{time.time_ns()}"  # the GPU: tests see where it went
            with state.lock:
                state.running += 1
            try:
                if request.get("stream"):
                    return self.stream(reply_id, completion)
                time.sleep(completion * 0.005)  # decoding: 5 ms a token
            finally:
                with state.lock:
                    state.running -= 1
            return self.reply(200, {
                "id": reply_id, "object": "chat.completion", "created": int(time.time()),
                "model": args.served_model_name or args.model_path,
                "choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": "stand-in reply", "reasoning_content": None}}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion},
            })  # fmt: skip

        def stream(self, reply_id, completion):
            """Server-sent events, a token every 5 ms, then [DONE]; the connection's end closes the body."""
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            for n in range(completion):
                time.sleep(0.005)
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


def main(argv=None):
    args = parse_args(argv)
    index = gpu_index()
    plan = json.loads(os.environ.get("GPULXC_LAB_STANDIN_PLAN") or "{}").get(str(index), {})
    check_environment(index)
    if not (Path(args.model_path) / "config.json").is_file():  # transformers' AutoConfig, as the real one
        die(f"OSError: {args.model_path} does not appear to have a file named config.json.")
    if plan.get("fault") == "crash_at_start":
        die("RuntimeError: gpulxc lab fault injection: crash at start")
    time.sleep(float(plan.get("load_s", 0)))  # loading weights, capturing graphs: nothing listens yet
    jit_build()
    state = State()
    state.args = args
    server = ThreadingHTTPServer((args.host or "127.0.0.1", args.port or 30000), handler_for(state))

    def sigterm(signum, frame):
        state.status = "UnHealthy"  # /health 503 from now on; then kill_process_tree(include_parent)
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()

    signal.signal(signal.SIGTERM, sigterm)

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
