"""Generate and build a libcuda.so link stub from cuda.h (gpulxc.sglang cuda_surgery).

Every driver API function cuda.h declares (after the preprocessor, so the _v2 names are the ones
exported) becomes a stub returning CUDA_ERROR_STUB_LIBRARY (34); the library's soname is
libcuda.so.1, so a binary linked against it loads the real driver library at run time.
    python3 make_libcuda_stub.py <CUDA_HOME> <output libcuda.so>
"""

import os
import re
import subprocess
import sys
import tempfile

cuda_home, output = sys.argv[1:]
pre = subprocess.run(
    ["gcc", "-E", "-P", "-I", cuda_home + "/include", cuda_home + "/include/cuda.h"],
    capture_output=True,
    text=True,
    check=True,
).stdout
names = sorted(set(re.findall(r"\bCUresult\s+(cu[A-Za-z0-9_]+)\s*\(", pre)))
if "cuInit" not in names:
    sys.exit("no driver API prototypes found in cuda.h")
with tempfile.TemporaryDirectory() as tmp:
    source = os.path.join(tmp, "libcuda_stub.c")
    with open(source, "w") as handle:
        handle.write("/* libcuda.so link stub generated from cuda.h by gpulxc.sglang */\n")
        handle.writelines("int %s(void) { return 34; }\n" % name for name in names)
    os.makedirs(os.path.dirname(output), exist_ok=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", output + ".tmp", source], check=True)
    os.replace(output + ".tmp", output)
print("%d driver API symbols" % len(names))
