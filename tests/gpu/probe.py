#!/usr/bin/env python3
"""What the real-GPU runs measure on a running SGLang server (stdlib only; prints one JSON object a call).

probe.py timeline PORT DEADLINE      seconds from now until the port answered /health 503, then 200
probe.py chat PORT [--sampled] [--max-tokens N] [--model NAME]
                                     one chat completion: status, seconds, content, reasoning_content
probe.py drain PORT RUNNER_STOP...   a long stream running, then RUNNER_STOP (the unit runner's stop, which
                                     sends SIGTERM): /health right after, a chat sent 1 s after the SIGTERM,
                                     the stream's end (chunks, finish_reason, [DONE]) and the stop's time
probe.py maps PID...                 the CUDA libraries mapped by these processes (from /proc/PID/maps)
"""

import argparse
import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

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


def chat(port, sampled=False, max_tokens=32, model="qwen3next-tiny", *, stream=False, timeout=900):
    body = {"model": model, "max_tokens": max_tokens, "stream": stream,
            "messages": [{"role": "user", "content": "Name three colours."}],
            **(SAMPLED if sampled else {})}  # fmt: skip
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})  # fmt: skip
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
                return {"status": response.status, "seconds": round(time.monotonic() - started, 2), "chunks": chunks,
                        "finish_reason": finish, "done": done}  # fmt: skip
            reply = json.loads(response.read())
    except urllib.error.HTTPError as error:
        took = round(time.monotonic() - started, 2)
        return {"status": error.code, "seconds": took, "error": error.read()[:300].decode()}
    except OSError as error:
        return {"status": "error", "seconds": round(time.monotonic() - started, 2), "error": str(error)}
    message = reply["choices"][0]["message"]
    return {"status": 200, "seconds": round(time.monotonic() - started, 2), "sampled": sampled,
            "content": message.get("content"), "reasoning_content": (message.get("reasoning_content") or "")[:80],
            "has_reasoning_content": bool(message.get("reasoning_content")), "usage": reply.get("usage")}  # fmt: skip


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
    return {"pids": pids, "cuda_libraries": sorted(libraries),
            "from_usr_local_cuda": sorted(p for p in libraries if p.startswith("/usr/local/cuda"))}  # fmt: skip


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
    args = parser.parse_args()
    if args.what == "timeline":
        out = timeline(args.port, args.deadline)
    elif args.what == "chat":
        out = chat(args.port, args.sampled, args.max_tokens, args.model)
    elif args.what == "drain":
        out = drain(args.port, args.stop)
    else:
        out = maps(args.pids)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
