"""One CLI run with the fallback ladder and the coverage rounds timed (wall seconds, summed over the run):
PYTHONPATH=<checkout> python timed_fallback.py transcribe ...  -> prints 'fallback X s (n calls), cover Y s' to stderr."""

import sys
import time

from pipeline.decode import second_chances, transcriber

spent = {"fallback": [0.0, 0], "cover": [0.0, 0]}


def timed(name, real):
    def run(*args, **kwargs):
        start = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            spent[name][0] += time.perf_counter() - start
            spent[name][1] += 1

    return run


second_chances.fallback = timed("fallback", second_chances.fallback)
second_chances.cover = timed("cover", second_chances.cover)
transcriber.second_chances = second_chances
from pipeline.cli import main  # noqa: E402

try:
    main(sys.argv[1:], standalone_mode=False)
finally:
    print(
        f"fallback {spent['fallback'][0]:.2f} s ({spent['fallback'][1]} calls), cover {spent['cover'][0]:.2f} s",
        file=sys.stderr,
    )
