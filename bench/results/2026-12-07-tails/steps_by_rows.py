"""The decoding loop's steps by live rows: how much of a run's loop runs with few rows (the batches' tails).

    .venv/bin/python bench/results/2026-12-07-tails/steps_by_rows.py FOLDER_OF_EPISODES CALLS.json

podscribe's defaults in this process; every one-token forward of the main decoder timed and counted by its rows,
and every greedy call's rows (each row's tokens) written to CALLS.json, with which second chance it ran in.
"""

import collections
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.abspath(__file__).rsplit("/bench/", 1)[0])  # this checkout's pipeline
# isort: off
from bench.profile import podscribe_run  # noqa: E402  (imports pipeline before torch)
from pipeline.decode import generate, kv_cache, second_chances, speculative  # noqa: E402
# isort: on

context = ["first"]  # which part of the stage a forward belongs to
forwards = []  # (rows, positions, seconds, context)
calls = []  # (context, each row's tokens)


def tagged(name, fn):
    def run(*args, **kwargs):
        old, context[0] = context[0], name
        try:
            return fn(*args, **kwargs)
        finally:
            context[0] = old

    return run


second_chances.fallback = tagged("fallback", second_chances.fallback)
second_chances.cover = tagged("cover", second_chances.cover)
real_forward, real_greedy = kv_cache.KVCacheDecoder.forward, speculative.greedy


def forward(self, ids, start, one_at_a_time=False):
    t = time.perf_counter()
    out = real_forward(self, ids, start, one_at_a_time)
    forwards.append((ids.shape[0], ids.shape[1], time.perf_counter() - t, context[0]))
    return out


def greedy(main, prompts, *args, **kwargs):
    decoded = real_greedy(main, prompts, *args, **kwargs)
    calls.append((context[0], [len(t) + f for t, f in zip(decoded.tokens, decoded.finished)]))
    return decoded


kv_cache.KVCacheDecoder.forward = forward
generate.greedy = greedy

folder = Path(sys.argv[1])
files = sorted(p for p in folder.iterdir() if p.suffix in (".mp3", ".m4a", ".ogg", ".opus", ".wav", ".flac"))
go, _ = podscribe_run(files, Path(tempfile.mkdtemp()))
start = time.perf_counter()
go()
print(f"wall {time.perf_counter() - start:.1f} s")
parts = collections.defaultdict(lambda: [0, 0.0])
by_rows = collections.defaultdict(lambda: [0, 0.0])
for rows, positions, seconds, part in forwards:
    parts[part][0] += 1
    parts[part][1] += seconds
    if positions == 1 and part == "first":
        by_rows[rows][0] += 1
        by_rows[rows][1] += seconds
print("forwards by part:", {part: (n, round(s, 2)) for part, (n, s) in parts.items()})
for rows in sorted(by_rows):
    n, s = by_rows[rows]
    print(f"rows {rows}: steps {n:5d} {s:6.2f} s {1000 * s / n:6.2f} ms/step {1000 * s / n / rows:6.2f} ms/row-step")
json.dump(calls, open(sys.argv[2], "w"))
for part, lengths in calls:
    print(part, len(lengths), sorted(lengths))
