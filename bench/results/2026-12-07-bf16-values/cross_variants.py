"""The cross-attention of a decoding step (base: 8 rows x 8 heads x 1,500 frames x 64), four ways: each layer's
time and the error against torch's float32 kernel (the one podscribe runs). ``python cross_variants.py``"""

import os
import sys
import time

sys.path.insert(0, os.path.abspath(__file__).rsplit("/bench/", 1)[0])  # this checkout's pipeline
# isort: off
import pipeline  # noqa: E402, F401  (before torch: OpenMP's spin, MKL's strict mode)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
# isort: on

torch.manual_seed(0)
R, H, T, D = 8, 8, 1500, 64
q = torch.randn(R, H, 1, D) * 0.3
k = torch.randn(R, H, T, D)
v = torch.randn(R, H, T, D)
kb, vb = k.bfloat16(), v.bfloat16()


def flash():
    return F.scaled_dot_product_attention(q, k, v, scale=1.0)


def math32():
    return torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-1, -2)), -1), v)


def math_values_bf16():
    p = torch.softmax(torch.matmul(q, k.transpose(-1, -2)), -1)
    return torch.matmul(p.bfloat16(), vb).float()


def math_bf16():
    s = torch.matmul(q.bfloat16(), kb.transpose(-1, -2)).float()
    return torch.matmul(torch.softmax(s, -1).bfloat16(), vb).float()


def relative(out, ref):
    return (out - ref).norm(dim=-1) / ref.norm(dim=-1)


with torch.inference_mode():
    ref = flash()
    for name, f in [
        ("flash f32", flash),
        ("math f32", math32),
        ("math K f32 V bf16", math_values_bf16),
        ("math bf16", math_bf16),
    ]:
        for _ in range(5):
            f()
        best = 1e9
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(20):
                out = f()
            best = min(best, (time.perf_counter() - t) / 20)
        rel = relative(out, ref)
        print(f"{name:20s} {best * 1e3:6.2f} ms a layer   relative error per row and head: median {rel.median():.1e}")
    q.mul_(10)  # a peaky softmax, as a real query's
    ref = flash()
    for name, f in [("math K f32 V bf16", math_values_bf16), ("math bf16", math_bf16)]:
        rel = relative(f(), ref)
        print(f"peaky, {name:20s} relative error: median {rel.median():.1e}, max {rel.max():.1e}")
