"""A decoding step of base int8 at 1 and 2 OpenMP threads (random encoder states, a cache 10-70 deep), alternated
in one process, medians of three; the logits of both are compared bit for bit. Other rows and threads as
arguments (2026-12-08-width/step_rows.txt: ``1,2,4,6,8,10,12,16 2``, a step by its rows at the job's threads).

    .venv/bin/python bench/results/2026-12-07-tails/step_threads.py [ROWS [THREADS]]
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
ROWS = [int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "1,2,4,8").split(",")]
THREADS = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "2,1").split(",")]
states = {rows: torch.randn(rows, 1500, 512) for rows in ROWS}


def steps(rows: int, n: int = 60) -> tuple[float, list]:
    with torch.inference_mode():
        decoder.start(states[rows], capacity=260)
        ids = torch.randint(0, 50000, (rows, 1), generator=torch.Generator().manual_seed(1))
        at = torch.zeros(rows, dtype=torch.long)
        for p in range(10):
            decoder.forward(ids, at + p)
        start, logits = time.perf_counter(), []
        for p in range(10, 10 + n):
            logits.append(decoder.forward(ids, at + p))
        return (time.perf_counter() - start) / n * 1e3, logits


times, logits = {}, {}
for _ in range(3):
    for threads in THREADS:
        torch.set_num_threads(threads)
        for rows in states:
            ms, logits[threads, rows] = steps(rows)
            times.setdefault((threads, rows), []).append(ms)
for rows in states:
    said = [f"{t} thread{'s' * (t > 1)} {sorted(times[t, rows])[1]:.2f} ms" for t in THREADS]
    each = sorted(times[THREADS[0], rows])[1] / rows
    same = all(torch.equal(a, b) for t in THREADS[1:] for a, b in zip(logits[THREADS[0], rows], logits[t, rows]))
    told = ("the same logits" if same else "LOGITS DIFFER") if len(THREADS) > 1 else ""
    print(f"rows {rows}: {', '.join(said)} ({each:.2f} ms a row-step)", told)
