import sys, time
sys.path.insert(0, "/work/main")
import pipeline, torch
from pipeline.facts.runtime import pick_runtime
from pipeline.models.load import load_models
from pipeline.decode.generate import encode
models = load_models("base", None, pick_runtime("cpu", "auto"), None)
time.sleep(1)
feats = torch.randn(2, 80, 3000)
with torch.inference_mode():
    encode(models.main, feats)
    for rep in range(2):
        for th in (2, 1):
            torch.set_num_threads(th)
            t = time.perf_counter(); encode(models.main, feats); print(th, f"{(time.perf_counter()-t)/2*1e3:.0f} ms/window")
    a = torch.randn(2048, 2048)
    for th in (2, 1):
        torch.set_num_threads(th)
        a @ a
        t = time.perf_counter()
        for _ in range(10): a @ a
        print(th, "sgemm 2048", f"{(time.perf_counter()-t)/10*1e3:.0f} ms")
