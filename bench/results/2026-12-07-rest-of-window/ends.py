"""How each pass that moved less than its window ended: a CLI run with a hook on ``split_segments``.

    PYTHONPATH=<checkout> python bench/results/2026-12-07-rest-of-window/ends.py transcribe --out J -q FILES

``end`` is the pass's last three tokens, T a timestamp and x text: ``xTT`` a closed segment and the next opened
then end-of-text, ``xxx`` text left open (the two endings transformers' rule decodes again from the last closing
timestamp; decision 0055).
"""

import sys
from collections import Counter

from pipeline.decode import generate as g

split = g.split_segments
found = []


def rec(seq, ts_begin, offset_s, window_frames):
    segs, moved = split(seq, ts_begin, offset_s, window_frames)
    if moved < window_frames:
        kind = ["T" if t >= ts_begin else "x" for t in seq[-3:]]
        stamps = [t for t in seq if t >= ts_begin] or [ts_begin]
        found.append(
            {
                "offset_s": offset_s,
                "moved_s": moved / 100,
                "n": len(seq),
                "end": "".join(kind),
                "last_ts_s": round((stamps[-1] - ts_begin) * 0.02, 2),
            }
        )
    return segs, moved


g.split_segments = rec
if __name__ == "__main__":
    from pipeline.cli import main

    try:
        main.main(args=sys.argv[1:], prog_name="podscribe", standalone_mode=False)
    finally:
        print("passes that moved less than their window:", len(found), Counter(f["end"] for f in found))
        for f in found:
            print(f)
