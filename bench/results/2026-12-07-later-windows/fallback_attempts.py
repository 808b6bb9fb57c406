"""Each second-chance attempt of a CLI run timed, with where its segments lie (the LADDER lines of the results
were printed by a first version that also hooked ``second_chances._ladder``).

    PYTHONPATH=<checkout> python bench/results/2026-12-07-later-windows/fallback_attempts.py transcribe --out J -q FILE
"""

from __future__ import annotations

import sys
import time

from pipeline.decode import second_chances

attempt = second_chances.again


def timed_again(t, features, encoded, language, beams, temperature, max_new_tokens):
    start = time.perf_counter()
    g = attempt(t, features, encoded, language, beams, temperature, max_new_tokens)
    took = time.perf_counter() - start
    starts = [round(s["start"], 2) for s in g.segments]
    ends = [round(s["end"], 2) for s in g.segments]
    print(
        f"ATTEMPT beams={beams} T={temperature} max={max_new_tokens} {took:.2f}s tokens={len(g.tokens)} "
        f"ran_on={g.ran_on} seg_starts={starts} ends={ends}",
        flush=True,
    )
    return g


second_chances.again = timed_again

if __name__ == "__main__":
    from pipeline.cli import main

    main.main(args=sys.argv[1:], prog_name="podscribe", standalone_mode=False)
