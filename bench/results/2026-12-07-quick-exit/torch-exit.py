"""The end of a process that imported torch: its normal exit against ``os._exit`` (8 runs each, alternated).
python torch-exit.py -> the import's and the end's median seconds (the end: from the import's last stamp to the
parent seeing the child gone)."""

import statistics
import subprocess
import sys
import time

STAMP = "import os, sys, time; t0 = time.time(); import torch; print(time.time() - t0, time.time(), file=sys.stderr)"
VARIANTS = {"plain": STAMP, "os._exit": STAMP + "; os._exit(0)"}

ends = {name: [] for name in VARIANTS}
imports = {name: [] for name in VARIANTS}
for _ in range(8):
    for name, code in VARIANTS.items():
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        gone = time.time()
        took, stamped = map(float, run.stderr.split())
        imports[name].append(took)
        ends[name].append(gone - stamped)
for name in VARIANTS:
    print(
        f"{name}: import median {statistics.median(imports[name]):.2f} s, end median {statistics.median(ends[name]):.3f}"
        f" s {[round(x, 2) for x in ends[name]]}"
    )
