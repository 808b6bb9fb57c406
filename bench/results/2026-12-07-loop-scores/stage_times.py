"""bench_longform with seconds summed per decode step (nested: cover decodes through generate and score, fallback
scores its rungs), printed at the end as TIMES. Run from a checkout: PYTHONPATH=. python stage_times.py ARGS."""

import atexit
import runpy
import sys
import time

import pipeline.decode.second_chances as sc
from pipeline.decode import score, transcriber

tot: dict[str, float] = {}


def wrap(owner, name: str, key: str) -> None:
    orig = getattr(owner, name)

    def timed(*args, **kwargs):
        t = time.perf_counter()
        try:
            return orig(*args, **kwargs)
        finally:
            tot[key] = tot.get(key, 0.0) + time.perf_counter() - t

    setattr(owner, name, timed)


wrap(score, "avg_logprobs", "score")
wrap(transcriber.Transcriber, "generate", "generate")
wrap(transcriber.Transcriber, "first_pass", "first_pass")
wrap(sc, "fallback", "fallback")
wrap(sc, "cover", "cover")
atexit.register(lambda: print("TIMES", {k: round(v, 2) for k, v in tot.items()}, file=sys.stderr))
sys.argv = ["bench_longform", *sys.argv[1:]]
runpy.run_module("bench.bench_longform", run_name="__main__")
