import sys, time
sys.path.insert(0, "/work/main")
import pipeline, torch
from pipeline.decode.kv_cache import KVCacheDecoder
from pipeline.facts.runtime import pick_runtime
from pipeline.models.load import load_models
models = load_models("base", None, pick_runtime("cpu", "auto"), None)
dec = KVCacheDecoder(models.main)
time.sleep(1)
def steps(rows, n=60):
    with torch.inference_mode():
        dec.start(torch.randn(rows, 1500, 512), capacity=260)
        ids = torch.randint(0, 50000, (rows, 1)); pos = torch.zeros(rows, dtype=torch.long)
        for p in range(10): dec.forward(ids, pos + p)
        t = time.perf_counter()
        for p in range(10, 10 + n): dec.forward(ids, pos + p)
        return (time.perf_counter() - t) / n * 1e3
res = {}
for rep in range(3):
    for th in (2, 1):
        torch.set_num_threads(th)
        for rows in (1, 2, 4, 8):
            res.setdefault((th, rows), []).append(steps(rows))
for rows in (1, 2, 4, 8):
    print(rows, "rows:", "  ".join(f"{th} thr {sorted(res[(th, rows)])[1]:.2f} ms" for th in (2, 1)))
