import json, sys
from pipeline.decode import generate as g

split = g.split_segments
found = []


def rec(seq, ts_begin, offset_s, window_frames):
    segs, moved = split(seq, ts_begin, offset_s, window_frames)
    if moved < window_frames:
        kind = ["T" if t >= ts_begin else "x" for t in seq[-3:]]
        found.append(
            {
                "offset_s": offset_s,
                "moved_s": moved / 100,
                "n": len(seq),
                "end": "".join(kind),
                "last_ts_s": round(([t for t in seq if t >= ts_begin] or [ts_begin])[-1] - ts_begin) * 0.02,
            }
        )
    return segs, moved


g.split_segments = rec
if __name__ == "__main__":
    from pipeline.cli import main

    try:
        main.main(args=sys.argv[1:], prog_name="podscribe", standalone_mode=False)
    finally:
        from collections import Counter

        print("passes that moved less than their window:", len(found), Counter(f["end"] for f in found))
        for f in found:
            print(f)
