#!/usr/bin/env python3
"""What the real-GPU runs measure on a running SGLang server (stdlib only; prints one JSON object a call).

probe.py timeline PORT DEADLINE      seconds from now until the port answered /health 503, then 200
probe.py chat PORT [--sampled] [--max-tokens N] [--model NAME]
                                     one chat completion: status, seconds, content, reasoning_content
probe.py drain PORT RUNNER_STOP...   a long stream running, then RUNNER_STOP (the unit runner's stop, which
                                     sends SIGTERM): /health right after, a chat sent 1 s after the SIGTERM,
                                     the stream's end (chunks, finish_reason, [DONE]) and the stop's time
probe.py maps PID...                 the CUDA libraries mapped by these processes (from /proc/PID/maps)
probe.py modules DIR [--dropped N..] the distributions the processes that wrote DIR/*.json import (modules_dump.py;
                                     run it in the venv's Python), and which of the dropped ones any imports
probe.py spread ROUTER SERVER...     completions through the router: each server's sglang:num_requests_total
                                     before and after
probe.py load ROUTER SECONDS CMD...  streams through the router, N at a time, while CMD runs (a drained restart):
                                     each one's end (finished, or cut: no [DONE] / an error)
"""

import argparse
import glob
import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

SAMPLED = {"temperature": 0.7, "top_p": 0.9, "top_k": 20}


def health(port, timeout=10):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return "refused"


def timeline(port, deadline):
    start, seen = time.monotonic(), {}
    while time.monotonic() - start < deadline:
        state = health(port)
        seen.setdefault(str(state), round(time.monotonic() - start, 1))
        if state == 200:
            break
        time.sleep(0.5)
    return {"port": port, "first_seen_s": seen, "healthy": "200" in seen}


def chat(port, sampled=False, max_tokens=32, model="qwen3next-tiny", *, stream=False, timeout=900, prompt=None):
    # through smg, a prompt distinct from its first character on: cache_aware sends a repeated one to one worker
    body = {
        "model": model,
        "max_tokens": max_tokens,
        "stream": stream,
        "messages": [{"role": "user", "content": prompt or "Name three colours."}],
        **(SAMPLED if sampled else {}),
    }
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            if stream:
                chunks, finish, done = 0, None, False
                for raw in response:
                    line = raw.decode().strip()
                    if line == "data: [DONE]":
                        done = True
                    elif line.startswith("data: "):
                        chunks += 1
                        choice = (json.loads(line[6:]).get("choices") or [{}])[0]
                        finish = choice.get("finish_reason") or finish
                return {
                    "status": response.status,
                    "seconds": round(time.monotonic() - started, 2),
                    "chunks": chunks,
                    "finish_reason": finish,
                    "done": done,
                }
            reply = json.loads(response.read())
    except urllib.error.HTTPError as error:
        took = round(time.monotonic() - started, 2)
        return {"status": error.code, "seconds": took, "error": error.read()[:300].decode()}
    except OSError as error:
        return {"status": "error", "seconds": round(time.monotonic() - started, 2), "error": str(error)}
    message = reply["choices"][0]["message"]
    return {
        "status": 200,
        "seconds": round(time.monotonic() - started, 2),
        "sampled": sampled,
        "content": message.get("content"),
        "reasoning_content": (message.get("reasoning_content") or "")[:80],
        "has_reasoning_content": bool(message.get("reasoning_content")),
        "usage": reply.get("usage"),
    }


def drain(port, stop_command):
    result = {}
    stream = threading.Thread(target=lambda: result.update(stream=chat(port, max_tokens=3000, stream=True)))
    stream.start()
    time.sleep(3)
    stopped_at = time.monotonic()
    stopper = subprocess.Popen(stop_command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(0.2)
    result["health_after_sigterm"] = health(port, timeout=5)
    time.sleep(0.8)
    result["chat_sent_1s_after_sigterm"] = chat(port, max_tokens=16, timeout=60)
    stream.join()
    result["stream_ended_after_sigterm_s"] = round(time.monotonic() - stopped_at, 1)
    out, _ = stopper.communicate()
    result["stop_took_s"] = round(time.monotonic() - stopped_at, 1)
    result["stop_output"] = out.strip()[-800:]
    return result


def maps(pids):
    libraries = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as handle:
                for line in handle:
                    path = line.split(None, 5)[-1].strip() if len(line.split(None, 5)) == 6 else ""
                    if re.search(r"lib(cuda|cudart|nvrtc|cublas|nvJitLink|cudnn|nccl)[^/]*\.so", path):
                        libraries.add(path)
        except OSError:
            continue
    return {
        "pids": pids,
        "cuda_libraries": sorted(libraries),
        "from_usr_local_cuda": sorted(p for p in libraries if p.startswith("/usr/local/cuda")),
    }


def modules(directory, dropped):
    import importlib.metadata as md  # noqa: PLC0415 - the venv's own view, only this subcommand needs it

    owners = md.packages_distributions()
    processes, imported, unowned, where = [], {}, set(), {}
    for path in sorted(glob.glob(f"{directory}/*.json")):
        with open(path) as handle:
            data = json.load(handle)
        tops = {name.split(".")[0] for name in data["modules"]}
        where.update({name: file for name, file in data["modules"].items() if "." not in name and file})
        processes.append({"pid": data["pid"], "argv": " ".join(data["argv"])[:120], "modules": len(data["modules"])})
        for top in tops:
            for dist in owners.get(top, []):
                imported.setdefault(md.distribution(dist).metadata["Name"].lower().replace("_", "-"), set()).add(top)
            if top not in owners:
                unowned.add(top)
    wanted = {name.lower().replace("_", "-") for name in dropped}
    installed = sorted({d.metadata["Name"].lower().replace("_", "-") for d in md.distributions()})
    return {
        "processes": processes,
        "imported_distributions": sorted(imported),
        "installed_not_imported": [d for d in installed if d not in imported],
        "dropped_and_imported": {
            d: sorted(where.get(top, "?") for top in imported[d]) for d in sorted(wanted & set(imported))
        },
        "dropped_checked": sorted(wanted),
    }


def metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


def spread(router, servers, count=32):
    before = {port: metric(port, "sglang:num_requests_total") for port in servers}
    results = []
    for n in range(count):
        body = {
            "model": "qwen3next-tiny",
            "max_tokens": 8,
            "messages": [{"role": "user", "content": f"{uuid.uuid4().hex} count to {n}."}],
        }
        request = urllib.request.Request(
            f"http://127.0.0.1:{router}/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                results.append(response.status)
        except urllib.error.HTTPError as error:
            results.append(error.code)
        except OSError as error:
            results.append(str(error))
    after = {port: metric(port, "sglang:num_requests_total") for port in servers}
    return {
        "sent": count,
        "statuses": {str(s): results.count(s) for s in set(results)},
        "per_server": {str(port): after[port] - before[port] for port in servers},
    }


def load(router, seconds, command, parallel=4):
    results, lock, stop = [], threading.Lock(), threading.Event()

    def client():
        while not stop.is_set():
            r = chat(router, max_tokens=600, stream=True, timeout=300, prompt=f"{uuid.uuid4().hex} tell a story.")
            with lock:
                results.append(r)
            if r["status"] != 200:
                time.sleep(0.2)

    threads = [threading.Thread(target=client) for _ in range(parallel)]
    for t in threads:
        t.start()
    time.sleep(5)
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    took = round(time.monotonic() - started, 1)
    time.sleep(max(0.0, seconds - took))
    stop.set()
    for t in threads:
        t.join()
    finished = [r for r in results if r.get("done") and r.get("finish_reason")]
    return {
        "command_exit": done.returncode,
        "command_took_s": took,
        "command_output": done.stdout[-1500:],
        "command_errors": done.stderr[-600:],
        "streams": len(results),
        "finished": len(finished),
        "cut": len(results) - len(finished),
        "cut_first": [r for r in results if r not in finished][:5],
        "longest_s": max((r["seconds"] for r in results), default=None),
    }


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("timeline")
    p.add_argument("port", type=int)
    p.add_argument("deadline", type=float)
    p = sub.add_parser("chat")
    p.add_argument("port", type=int)
    p.add_argument("--sampled", action="store_true")
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--model", default="qwen3next-tiny")
    p = sub.add_parser("drain")
    p.add_argument("port", type=int)
    p.add_argument("stop", nargs=argparse.REMAINDER)
    p = sub.add_parser("maps")
    p.add_argument("pids", nargs="+", type=int)
    p = sub.add_parser("modules")
    p.add_argument("dir")
    p.add_argument("--dropped", nargs="*", default=[])
    p = sub.add_parser("spread")
    p.add_argument("router", type=int)
    p.add_argument("servers", nargs="+", type=int)
    p = sub.add_parser("load")
    p.add_argument("router", type=int)
    p.add_argument("seconds", type=float)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.what == "timeline":
        out = timeline(args.port, args.deadline)
    elif args.what == "chat":
        out = chat(args.port, args.sampled, args.max_tokens, args.model)
    elif args.what == "drain":
        out = drain(args.port, args.stop)
    elif args.what == "modules":
        out = modules(args.dir, args.dropped)
    elif args.what == "spread":
        out = spread(args.router, args.servers)
    elif args.what == "load":
        out = load(args.router, args.seconds, args.command)
    else:
        out = maps(args.pids)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
