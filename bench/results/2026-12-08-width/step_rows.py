"""A decoding step of base int8 by live rows, 1 to 16 (random encoder states, a cache 10-70 deep), at the threads
the job uses; medians of three sweeps in one process. What a step of one more row costs beyond eight rows.

    .venv/bin/python bench/results/2026-12-08-width/step_rows.py
"""

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

models = load_models("base", None, pick_runtime("cpu", "auto"), None)
decoder = KVCacheDecoder(models.main)
time.sleep(1)  # the packing thread done
torch.manual_seed(0)
ROWS = (1, 2, 4, 6, 8, 10, 12, 16)
states = {rows: torch.randn(rows, 1500, 512) for rows in ROWS}


def steps(rows: int, n: int = 60) -> float:
    with torch.inference_mode():
        decoder.start(states[rows], capacity=260)
        ids = torch.randint(0, 50000, (rows, 1), generator=torch.Generator().manual_seed(1))
        at = torch.zeros(rows, dtype=torch.long)
        for _ in range(10):
            decoder.forward(ids, at)
            at = at + 1
        t0 = time.perf_counter()
        for _ in range(n):
            decoder.forward(ids, at)
            at = at + 1
        ms = (time.perf_counter() - t0) / n * 1000
        decoder.release()
    return ms


times: dict[int, list[float]] = {}
for _ in range(3):
    for rows in ROWS:
        times.setdefault(rows, []).append(steps(rows))
for rows in ROWS:
    ms = sorted(times[rows])[1]
    print(f"rows {rows:2d}: {ms:6.2f} ms a step, {ms / rows:5.2f} ms a row-step")
