"""Experiment: what each piece's later window (transformers' seek rule: the first pass's last segment unfinished)
decodes. Runs the job in this process with ``split_segments`` wrapped to print every pass that moves seek by less
than its window, or that starts past 0.

    .venv/bin/python bench/results/2026-12-07-levers/second-windows.py FILE... > second-windows.txt
"""

import sys
import tempfile
from pathlib import Path

import pipeline.decode.generate as generate
from pipeline.facts.runtime import pick_runtime
from pipeline.job.config import JobOptions
from pipeline.job.run import run
from pipeline.models.load import load_models

split = generate.split_segments


def logged(seq, ts_begin, offset_s, window_frames):
    segments, moved = split(seq, ts_begin, offset_s, window_frames)
    if offset_s > 0 or moved < window_frames:
        text = sum(1 for t in seq if t < ts_begin - 1)
        ends = [(round(s["start"], 2), round(s["end"], 2)) for s in segments][-2:]
        print(
            f"pass at {offset_s:.2f} s, window {window_frames} frames, seek moved {moved * 0.01:.2f} s, "
            f"{text} text tokens, last segments {ends}, last tokens {seq[-3:]}",
            flush=True,
        )
    return segments, moved


generate.split_segments = logged
with tempfile.TemporaryDirectory() as job:
    options = JobOptions(out_dir=Path(job), model="base", progress=False)
    runtime = pick_runtime(options.device, options.compute_type)
    run(sys.argv[1:], options, models=load_models(options.model, options.assistant, runtime, options.cache_dir))
