"""The stage's greedy calls whose pass ran on without end-of-text (a loop, or more than 224 segment tokens), and
their wall time: PYTHONPATH=<checkout> python longpass.py transcribe ... -> one line on stderr at the end."""

import sys
import time

from pipeline.decode import generate as g

real = g.Generator.generate
seen = {"calls": 0, "long": [], "spent_long": 0.0}


def wrapped(self, *args, **kwargs):
    start = time.perf_counter()
    out = real(self, *args, **kwargs)
    if kwargs.get("search") is None:
        seen["calls"] += 1
        longest = max((max(o.pass_lengths or [0]) for o in out), default=0)
        if longest > 224 or any(o.ran_on for o in out):
            seen["long"].append((len(out), longest, [o.ran_on for o in out], [o.stats.passes for o in out]))
            seen["spent_long"] += time.perf_counter() - start
    return out


g.Generator.generate = wrapped
from pipeline.cli import main  # noqa: E402

try:
    main(sys.argv[1:], standalone_mode=False)
finally:
    print(
        f"greedy calls {seen['calls']}, long {seen['long']}, wall of calls with a long pass {seen['spent_long']:.1f} s",
        file=sys.stderr,
    )
