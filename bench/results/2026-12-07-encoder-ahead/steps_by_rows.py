"""Steps of the decoding loop by live rows: how much of the loop runs with few rows (tails)."""
import sys, time, tempfile, collections
from pathlib import Path
sys.path.insert(0, "/work/main")
from bench.profile import podscribe_run
from pipeline.decode import kv_cache, second_chances
ctx = ["first"]
def tag(name, f):
    def w(*a, **k):
        old = ctx[0]; ctx[0] = name
        try: return f(*a, **k)
        finally: ctx[0] = old
    return w
second_chances.fallback = tag("fallback", second_chances.fallback)
second_chances.cover = tag("cover", second_chances.cover)
import pipeline.decode.transcriber as tr
tr.second_chances = second_chances

log = []
orig = kv_cache.KVCacheDecoder.forward
def fwd(self, ids, start, one_at_a_time=False):
    t = time.perf_counter()
    out = orig(self, ids, start, one_at_a_time)
    log.append((ids.shape[0], ids.shape[1], time.perf_counter() - t, ctx[0]))
    return out
kv_cache.KVCacheDecoder.forward = fwd
from pipeline.decode import speculative, generate as gen_mod
calls = []
og = speculative.greedy
def greedy(main, prompts, *a, **k):
    d = og(main, prompts, *a, **k)
    calls.append((ctx[0], [len(t) + (1 if f else 0) for t, f in zip(d.tokens, d.finished)]))
    return d
speculative.greedy = greedy
gen_mod.greedy = greedy
d = Path(sys.argv[1])
files = sorted(p for p in d.iterdir() if p.suffix in (".mp3", ".m4a", ".ogg", ".wav", ".flac", ".opus", ".mp4"))
go, _ = podscribe_run(files, Path(tempfile.mkdtemp()))
t = time.perf_counter(); go(); wall = time.perf_counter() - t
by = collections.defaultdict(lambda: [0, 0.0])
ctxs = collections.defaultdict(lambda: [0, 0.0])
for r, q, s, c in log:
    ctxs[c][0] += 1; ctxs[c][1] += s
    if q == 1 and c == "first":
        by[r][0] += 1; by[r][1] += s
print(dict(ctxs))
tot = sum(v[1] for v in by.values())
print(f"wall {wall:.1f} s, one-token forwards {sum(v[0] for v in by.values())}, {tot:.1f} s; other forwards {sum(1 for x in log if x[1]>1)}, {sum(x[2] for x in log if x[1]>1):.1f} s")
for r in sorted(by):
    n, s = by[r]
    print(f"rows {r}: steps {n:5d}  {s:6.2f} s  {1000*s/n:6.2f} ms/step  {1000*s/n/r:6.2f} ms/row-step  row-steps {n*r}")

import json
json.dump(calls, open(sys.argv[2], "w"))
for c, lens in calls:
    print(c, len(lens), sorted(lens))
