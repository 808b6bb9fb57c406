"""Each fallback attempt of one episode timed (beams, temperature, tokens asked, ran on, seconds, tokens, calls),
and each coverage round: the script behind rungs-seed59.txt.

    .venv/bin/python bench/results/2026-12-07-heldout/rungs.py EPISODE_FILE
"""

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import pipeline.decode.second_chances as sc  # noqa: E402
from bench.profile import podscribe_run  # noqa: E402

log = []
again, cover = sc.again, sc.cover


def timed_again(t, features, encoded, language, beams, temperature, most):
    start = time.perf_counter()
    g = again(t, features, encoded, language, beams, temperature, most)
    log.append(
        (beams, temperature, most, g.ran_on, round(time.perf_counter() - start, 2), len(g.tokens), g.stats.main_calls)
    )
    return g


def timed_cover(*args, **kwargs):
    start = time.perf_counter()
    cover(*args, **kwargs)
    log.append(("cover", time.perf_counter() - start))


sc.again, sc.cover = timed_again, timed_cover
with tempfile.TemporaryDirectory() as folder:
    go, _ = podscribe_run([Path(sys.argv[1])], Path(folder) / "job")
    start = time.perf_counter()
    go()
    print("wall", time.perf_counter() - start)
for row in log:
    print(row)
