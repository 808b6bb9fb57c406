"""podscribe's int8 linear layers against torchao's, on the ``base`` model's linear shapes.

    python -m bench.bench_int8_backends [--seconds 0.5] [--threads 1] [--dtype float32|bfloat16]

For each shape (in -> out) and row count: the per-call time of podscribe's ``Int8Linear`` (int8 weights,
activations per row, fbgemm) and ``WeightInt8Linear`` (int8 weights, float32 product) against torchao's
``Int8DynamicActivationInt8WeightConfig`` and ``Int8WeightOnlyConfig`` (eager, no ``torch.compile``: the
pipeline runs eager), and whether each keeps a row's output bit-identical whatever rows are beside it (the
property speculative identity rests on: ``tests/test_models.py``). Side by side in one run; on a shared
machine read the ratios, not the times. Needs torchao installed (it is not a dependency: see
docs/decisions/0035-int8-stays-on-fbgemm.md).
"""

from __future__ import annotations

import argparse
import copy
import time

import torch

from pipeline.backend.quantize import Int8Linear, WeightInt8Linear

SHAPES = [(512, 512), (512, 2048), (2048, 512), (512, 51865)]  # base: attention, fc1, fc2, proj_out
ROWS = [1, 4, 8, 32, 1500]  # a decoder step of 1..32 rows; 1500: an encoder piece


def torchao_linear(linear: torch.nn.Linear, kind: str) -> torch.nn.Module:
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, Int8WeightOnlyConfig, quantize_

    config = Int8DynamicActivationInt8WeightConfig() if kind == "dynamic" else Int8WeightOnlyConfig()
    model = torch.nn.Sequential(copy.deepcopy(linear))
    quantize_(model, config)
    return model[0]


def row_independent(layer: torch.nn.Module, n_in: int, dtype: torch.dtype = torch.float32) -> bool:
    """A row's output equals the one it has alone and beside fewer rows (rows of very different scales)."""
    torch.manual_seed(1)
    x = (torch.randn(24, n_in) * torch.logspace(-2, 2, 24)[:, None]).to(dtype)
    with torch.inference_mode():
        together = layer(x)
        return all(torch.equal(layer(x[t : t + 1]), together[t : t + 1]) for t in (0, 11, 23)) and all(
            torch.equal(layer(x[: t + 1])[-1], together[t]) for t in (5, 17)
        )


def per_call_ms(layer: torch.nn.Module, x: torch.Tensor, seconds: float) -> float:
    with torch.inference_mode():
        for _ in range(3):
            layer(x)
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            layer(x)
            n += 1
    return (time.perf_counter() - start) / n * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="time per measurement")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--dtype", default="float32", help="the weight-only layers' activations (int8_<dtype>)")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, threads {args.threads}, weight-only activations {args.dtype}")
    print("shape        rows  Int8Linear  torchao-dyn  ratio | WeightInt8  torchao-wo  ratio   (ms per call)")
    independent: dict[str, bool] = {}
    for n_in, n_out in SHAPES:
        linear = torch.nn.Linear(n_in, n_out)
        layers = {
            "Int8Linear": Int8Linear(linear),
            "torchao-dyn": torchao_linear(linear, "dynamic"),
            "WeightInt8": WeightInt8Linear(linear, dtype),
            "torchao-wo": torchao_linear(copy.deepcopy(linear).to(dtype), "weight"),
        }
        checked = {
            **layers,
            "float": copy.deepcopy(linear).to(dtype),
        }  # a float layer: the weight-only layers' guarantee
        for name, layer in checked.items():
            as_dtype = dtype if name in ("WeightInt8", "torchao-wo", "float") else torch.float32
            independent[name] = independent.get(name, True) and row_independent(layer, n_in, as_dtype)
        for rows in ROWS:
            if n_out > 10000 and rows == 1500:
                continue  # the output projection never sees an encoder's frames
            x = torch.randn(rows, n_in)
            ms = {
                name: per_call_ms(layer, x.to(dtype) if name in ("WeightInt8", "torchao-wo") else x, args.seconds)
                for name, layer in layers.items()
            }
            print(
                f"{n_in:>4}->{n_out:<6} {rows:>5} {ms['Int8Linear']:>10.3f} {ms['torchao-dyn']:>12.3f} "
                f"{ms['torchao-dyn'] / ms['Int8Linear']:>6.2f} | {ms['WeightInt8']:>10.3f} {ms['torchao-wo']:>11.3f} "
                f"{ms['torchao-wo'] / ms['WeightInt8']:>6.2f}",
                flush=True,
            )
    print("row-independent (bit-identical alone and beside other rows):", independent)


if __name__ == "__main__":
    main()
