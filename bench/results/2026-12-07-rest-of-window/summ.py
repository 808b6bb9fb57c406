"""The table of decision 0055: every run in this folder, podscribe only (`bench_longform --skip-fw`), one line each.

    python bench/results/2026-12-07-rest-of-window/summ.py

Runs: base = the code before (adaeb02); new = rules 1 and 2 by the audio's length; voice = the same by the VAD's
voice; final = the decided rule (1-3, by voice); 61-forced-inside-segments = the first try that also masked
end-of-text after text inside an opened segment.
"""

import gzip
import json
from pathlib import Path

HERE = Path(__file__).parent
for s in ["61", "def", "7", "23", "59", "dev"]:
    for code in ["base", "forced-inside-segments", "new", "voice", "final"]:
        f = HERE / f"{s}-{code}.json.gz"
        if not f.exists():
            continue
        c = json.loads(gzip.open(f).read())["configurations"]["podscribe base"]
        o = c["scores"]["overall"]
        w = sum(v.get("info", {}).get("encoder_windows") or 0 for v in c["episodes"].values())
        print(
            f"{s:4} {code:22} WER {100 * o['wer']:.1f} D/S/I {o['deletions']}/{o['substitutions']}/{o['insertions']}"
            f" unmatched {o['timestamps']['unmatched_sentences']} music/silence words {o['hallucination']['words']}"
            f" start p90 {o['timestamps']['start_err_p90']:.2f} windows {w} wall {c['total_wall_s']:.1f} s"
        )
