"""What a gpulxc.sglang run left in the container, as JSON: the stack's versions, the served model, the
router's address and whether it wants a client key (never the key). Run by playbooks/summary.yml."""

import glob
import importlib.metadata
import json
import subprocess
import sys

WANTED = ("sglang", "torch", "flashinfer-python", "sglang-kernel", "nvidia-cuda-nvcc", "smg")


def versions(venvs):
    found = {}
    for venv in venvs:
        for site in glob.glob(venv + "/lib/python3*/site-packages"):
            for dist in importlib.metadata.distributions(path=[site]):
                name = (dist.metadata["Name"] or "").lower().replace("_", "-")
                if name in WANTED:
                    found[name] = dist.version
    return found


def instance_setting(path, key):
    try:
        with open(path) as handle:
            for line in handle:
                if line.startswith(key + ":"):
                    return line.split(":", 1)[1].strip().strip("'\"")
    except OSError:
        pass
    return None


def router(directory):
    try:
        with open(directory + "/router-args.json") as handle:
            args = json.load(handle)
    except OSError:
        return None
    option = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i] in ("--host", "--port")}
    host = option.get("--host", "0.0.0.0")
    if host in ("0.0.0.0", "::", ""):
        addresses = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=False).stdout.split()
        host = addresses[0] if addresses else host
    try:
        with open(directory + "/tenant-api-keys") as handle:
            keyed = any(line.strip() and not line.startswith("#") for line in handle)
    except OSError:
        keyed = False
    return {"url": "http://%s:%s" % (host, option.get("--port", "30000")), "keyed": keyed}


def main():
    sglang_venv, smg_venv, router_dir = sys.argv[1:4]
    config = "/etc/sglang/instance-0.yaml"
    model = instance_setting(config, "served-model-name") or instance_setting(config, "model-path")
    found = versions([sglang_venv, smg_venv])
    stack = ", ".join("%s %s" % (name, found[name]) for name in WANTED if name in found)
    print(json.dumps({"versions": found, "stack": stack, "model": model, "router": router(router_dir)}))


if __name__ == "__main__":
    main()
