"""Packing base's int8 layers (the output projection left out): quantizing against fbgemm's prepack, seconds."""

import glob
import time
import warnings

import torch
from safetensors.torch import load_file

from pipeline.backend import quantize
from pipeline.models.registry import resolve

warnings.filterwarnings("ignore")
state = load_file(glob.glob(resolve("base").location + "/*.safetensors")[0])
weights = [
    v.float() for k, v in state.items() if v.dim() == 2 and "embed_positions" not in k and ("proj" in k or "fc" in k)
]
print(len(weights), sum(w.numel() for w in weights) / 1e6, "M params")
for _ in range(2):
    t0 = time.perf_counter()
    zeros = [torch.zeros(w.shape[0]).long() for w in weights]
    ints = [
        quantize._quantized_per_channel(w, quantize._channel_scales(w), z)  # noqa: SLF001
        for w, z in zip(weights, zeros)
    ]
    t1 = time.perf_counter()
    packed = [quantize._prepack(q) for q in ints]  # noqa: SLF001
    print(f"quantize {t1 - t0:.3f} s  prepack {time.perf_counter() - t1:.3f} s")
