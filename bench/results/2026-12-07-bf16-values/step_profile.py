"""A decoding step of base int8 (random encoder states, a cache 40-130 deep): its time, and torch's op account
over 30 steps. ``python step_profile.py [ROWS]`` (8 by default)."""

import os
import sys
import time

sys.path.insert(0, os.path.abspath(__file__).rsplit("/bench/", 1)[0])  # this checkout's pipeline
# isort: off
import pipeline  # noqa: E402, F401  (before torch: OpenMP's spin, MKL's strict mode)
import torch  # noqa: E402
from pipeline.decode.kv_cache import KVCacheDecoder  # noqa: E402
from pipeline.facts.runtime import pick_runtime  # noqa: E402
from pipeline.models.load import load_models  # noqa: E402
# isort: on

rows = int(sys.argv[1]) if len(sys.argv) > 1 else 8
models = load_models("base", None, pick_runtime("cpu", "auto"), None)
dec = KVCacheDecoder(models.main)
torch.manual_seed(0)
encoded = torch.randn(rows, 1500, 512)
with torch.inference_mode():
    dec.start(encoded, capacity=260)
    ids = torch.randint(0, 50000, (rows, 1))
    pos = torch.zeros(rows, dtype=torch.long)
    for p in range(40):  # warm, and a cache 40 deep
        dec.forward(ids, pos + p)
    t = time.perf_counter()
    n = 60
    for p in range(40, 40 + n):
        dec.forward(ids, pos + p)
    step = (time.perf_counter() - t) / n
    print(f"rows {rows}: {step * 1e3:.2f} ms a step")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for p in range(100, 130):
            dec.forward(ids, pos + p)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
