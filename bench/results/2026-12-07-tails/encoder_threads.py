"""base's int8 encoder a window, and a 2048 x 2048 float32 product, at 2 and 1 OpenMP threads: what the second vCPU
gives to work that computes (the decoding step's: step_threads.py).

    .venv/bin/python bench/results/2026-12-07-tails/encoder_threads.py
"""

import os
import sys
import time

sys.path.insert(0, os.path.abspath(__file__).rsplit("/bench/", 1)[0])  # this checkout's pipeline
# isort: off
import pipeline  # noqa: E402, F401  (before torch: OpenMP's spin, MKL's strict mode)
import torch  # noqa: E402
from pipeline.decode.generate import encode  # noqa: E402
from pipeline.facts.runtime import pick_runtime  # noqa: E402
from pipeline.models.load import load_models  # noqa: E402
# isort: on

models = load_models("base", None, pick_runtime("cpu", "auto"), None)
time.sleep(1)  # the packing thread done
features = torch.randn(2, 80, 3000)
with torch.inference_mode():
    encode(models.main, features)
    for _ in range(2):
        for threads in (2, 1):
            torch.set_num_threads(threads)
            start = time.perf_counter()
            encode(models.main, features)
            print(f"{threads} threads: {(time.perf_counter() - start) / 2 * 1e3:.0f} ms a window")
    a = torch.randn(2048, 2048)
    for threads in (2, 1):
        torch.set_num_threads(threads)
        a @ a
        start = time.perf_counter()
        for _ in range(10):
            a @ a
        print(f"{threads} threads: a 2048 x 2048 product {(time.perf_counter() - start) / 10 * 1e3:.0f} ms")
