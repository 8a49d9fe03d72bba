"""A FlashInfer decode kernel (fp16, 32 heads, head_dim 128, 4096 tokens), JIT-built on first call, against a
float64 torch reference: prints the device, the build time and the relative error (the target is 1e-2)."""

import time

import flashinfer
import torch

torch.manual_seed(0)
q = torch.randn(32, 128, dtype=torch.float16, device="cuda")
k = torch.randn(4096, 32, 128, dtype=torch.float16, device="cuda")
v = torch.randn(4096, 32, 128, dtype=torch.float16, device="cuda")
t = time.time()
o = flashinfer.single_decode_with_kv_cache(q, k, v)
torch.cuda.synchronize()
s = torch.einsum("hd,nhd->hn", q.double(), k.double()) / 128**0.5
ref = torch.einsum("hn,nhd->hd", torch.softmax(s, dim=-1), v.double())
print("device", torch.cuda.get_device_name(), "capability", torch.cuda.get_device_capability())
print("flashinfer", flashinfer.__version__, "from", flashinfer.__file__, "JIT + call %.1f s" % (time.time() - t))
print("relative error vs float64 torch: %.3e" % ((o.double() - ref).norm() / ref.norm()).item())
