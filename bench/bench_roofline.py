"""podscribe's largest CPU stages against what this machine can do at all: how far each is from its floor.

    python -m bench.bench_roofline [--model base] [--rows 8] [--seconds 1]

The stage account (``bench.profile``) says where a long-form run's time goes; this says how much of each stage an
exact change could still take. It measures the machine's ceilings on the shapes that matter, a float32 matrix
product (MKL, the encoder's MLP shape), an int8 one (fbgemm's own kernel on the same shape, without the per-row
scaling ``Int8Linear`` adds around it) and a memory copy, and then podscribe's own kernels at their real shapes, each as a share of the ceiling it is bound by:

- the encoder's self-attention over 1,500 frames (torch's float32 flash kernel): compute-bound;
- the encoder's linear layers (``Int8Linear``, a piece's 1,500 rows): compute-bound;
- a decoding step's cross-attention over the batch's keys and values (``--rows`` rows, every decoder layer):
  bound by the bytes it reads, 2 x layers x rows x 1,500 x width x 4 per step;
- a decoding step's small int8 product (``--rows`` x width x width): bound by neither; its time is the call's.

Side by side in one run, on the threads torch has (the ``bench`` package imports ``pipeline`` first: its OpenMP
and MKL settings). A share near 1 leaves an exact change nothing to take there; only fewer operations or other
arithmetic (which moves tokens and must be scored on long-form audio) can.
"""

from __future__ import annotations

import argparse
import copy
import json
import time

import torch
import torch.nn.functional as F

from pipeline.backend.quantize import Int8Linear, fast_linear, quantize

WIDTHS = {"tiny": (384, 6, 4), "base": (512, 8, 6), "small": (768, 12, 12)}  # width, heads, decoder layers
FRAMES = 1500  # the encoder's output frames for a 30 s window


def per_call_s(fn, seconds: float) -> float:
    """The best of several timed runs of ``fn`` (the least disturbed by other work on the machine)."""
    fn()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds / 4:
        fn()
        calls += 1
    calls = max(calls, 1)
    best = float("inf")
    for _ in range(4):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


@torch.inference_mode()
def measure(width: int, heads: int, layers: int, rows: int, seconds: float) -> dict:
    torch.manual_seed(0)
    hidden = 4 * width
    x = torch.randn(FRAMES, width)
    fp32 = torch.nn.Linear(width, hidden)
    int8 = Int8Linear(fp32)

    fbgemm = fast_linear(quantize(torch.nn.Sequential(copy.deepcopy(fp32)), "draft")[0])  # torch's dynamic int8
    big = torch.randn(64_000_000)
    out = torch.empty_like(big)

    ceilings = {
        "float32 product GFLOP/s": 2 * FRAMES * width * hidden / per_call_s(lambda: fp32(x), seconds) / 1e9,
        "int8 product GOP/s": 2 * FRAMES * width * hidden / per_call_s(lambda: fbgemm(x), seconds) / 1e9,
        "memory copy GB/s": 2 * big.numel() * 4 / per_call_s(lambda: out.copy_(big), seconds) / 1e9,
    }

    head_dim = width // heads
    q, k, v = (torch.randn(1, heads, FRAMES, head_dim) for _ in range(3))
    attention_s = per_call_s(lambda: F.scaled_dot_product_attention(q, k, v, scale=1.0), seconds)
    attention_gflops = 4 * heads * FRAMES * FRAMES * head_dim / attention_s / 1e9

    linears = [Int8Linear(torch.nn.Linear(width, width)) for _ in range(4)] + [
        int8,
        Int8Linear(torch.nn.Linear(hidden, width)),
    ]
    inputs = [x] * 4 + [x, torch.randn(FRAMES, hidden)]
    linears_s = per_call_s(lambda: [layer(a) for layer, a in zip(linears, inputs)], seconds)
    linears_gops = 2 * FRAMES * (4 * width * width + 2 * width * hidden) / linears_s / 1e9

    query = torch.randn(rows, heads, 1, head_dim)
    keys = [torch.randn(rows, heads, FRAMES, head_dim) for _ in range(layers)]
    values = [torch.randn(rows, heads, FRAMES, head_dim) for _ in range(layers)]
    cross_s = per_call_s(
        lambda: [F.scaled_dot_product_attention(query, k_, v_, scale=1.0) for k_, v_ in zip(keys, values)], seconds
    )
    cross_bytes = 2 * layers * rows * FRAMES * width * 4

    small = Int8Linear(torch.nn.Linear(width, width))
    step_rows = torch.randn(rows, width)
    small_s = per_call_s(lambda: small(step_rows), seconds)
    small_at_ceiling_s = 2 * rows * width * width / (ceilings["int8 product GOP/s"] * 1e9)

    return {
        "threads": torch.get_num_threads(),
        "ceilings": ceilings,
        "encoder self-attention (float32 flash), GFLOP/s": attention_gflops,
        "encoder self-attention, share of the float32 product": attention_gflops / ceilings["float32 product GFLOP/s"],
        "encoder self-attention ms a layer": attention_s * 1e3,
        "encoder linear layers (int8), GOP/s": linears_gops,
        "encoder linear layers, share of the int8 product": linears_gops / ceilings["int8 product GOP/s"],
        "encoder linear layers ms a layer": linears_s * 1e3,
        "decoding step cross-attention, GB/s": cross_bytes / cross_s / 1e9,
        "decoding step cross-attention, share of the copy": cross_bytes / cross_s / 1e9 / ceilings["memory copy GB/s"],
        "decoding step cross-attention ms (all layers)": cross_s * 1e3,
        "decoding step small int8 product us": small_s * 1e6,
        "decoding step small int8 product us at the int8 ceiling": small_at_ceiling_s * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(WIDTHS), default="base", help="the shapes of this Whisper size")
    parser.add_argument("--rows", type=int, default=8, help="a decoding step's rows (the default batch: 8)")
    parser.add_argument("--seconds", type=float, default=1.0, help="time spent on each measurement")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    width, heads, layers = WIDTHS[args.model]
    result = measure(width, heads, layers, args.rows, args.seconds)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{args.model} shapes, {args.rows} rows a decoding step, {result.pop('threads')} threads")
    for name, value in result.pop("ceilings").items():
        print(f"  ceiling: {name:<70} {value:10.1f}")
    for name, value in result.items():
        print(f"  {name:<79} {value:10.2f}")


if __name__ == "__main__":
    main()
