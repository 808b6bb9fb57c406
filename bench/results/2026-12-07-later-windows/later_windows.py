"""Where each later pass starts against its piece's end and the VAD's speech: a CLI run with two hooks.

    PYTHONPATH=<checkout> python bench/results/2026-12-07-later-windows/later_windows.py transcribe --out J -q FILES

``split_segments`` records each pass's seek and text tokens; ``Transcriber.generate`` replays the passes row by row
(the rows still pending, in order) and writes, per later pass, the piece's length, the seek, what audio was left
and how much of it the VAD heard as speech, to ``later.json`` beside the run's working directory.
"""

from __future__ import annotations

import json
import sys

from pipeline.decode import generate as gen_module
from pipeline.decode import transcriber as stage
from pipeline.facts.whisper import SAMPLE_RATE

calls: list[tuple[float, int, int]] = []
found: list[dict] = []
split = gen_module.split_segments
decode = stage.Transcriber.generate


def recorded_split(seq, ts_begin, offset_s, window_frames):
    segs, moved = split(seq, ts_begin, offset_s, window_frames)
    calls.append((offset_s, moved, sum(1 for t in seq if t < ts_begin)))
    return segs, moved


def recorded_generate(self, features, encoded, languages, audio, results, cross):
    calls.clear()
    out = decode(self, features, encoded, languages, audio, results, cross)
    seek, pending, k = [0] * len(audio), list(range(len(audio))), 0
    while pending and k < len(calls):
        still = []
        for b in pending:
            offset_s, moved, n_text = calls[k]
            k += 1
            if offset_s > 0:
                piece_s = len(audio[b]) / SAMPLE_RATE
                heard = sum(max(0.0, min(hi, piece_s) - max(lo, offset_s)) for lo, hi in results[b].speech or [])
                found.append(
                    {
                        "piece_s": round(piece_s, 2),
                        "seek_s": round(offset_s, 2),
                        "left_s": round(piece_s - offset_s, 2),
                        "speech_after_s": round(heard, 2),
                        "text_tokens": n_text,
                    }
                )
            seek[b] += moved
            if moved > 0 and seek[b] < features.shape[-1]:
                still.append(b)
        pending = still
    return out


gen_module.split_segments = recorded_split
stage.Transcriber.generate = recorded_generate

if __name__ == "__main__":
    from pipeline.cli import main

    try:
        main.main(args=sys.argv[1:], prog_name="podscribe", standalone_mode=False)
    finally:
        with open("later.json", "w") as f:
            json.dump(found, f, indent=0)
        print("later passes:", len(found))
        for row in found:
            print(row)
