"""Experiment (not kept): the next batch's first pass (features, encoder, keys, probe) on a second thread beside
this batch's decoding, with the OpenMP threads of each chosen. Pieces are fixed 24 s cuts, 8 a batch; the tokens
of every mode are hashed. First written for 2026-12-07-levers (modes seq, ovl1, ovl2), now for the stage's
current ``generate``, with two more.

    .venv/bin/python bench/results/2026-12-07-tails/overlap.py A.mp3[,B.m4a] MODE BATCHES

seq: first pass then decoding, batch after batch, two threads; seq1: the same with the decoding at one thread;
ovl1 / ovl2: the next batch's first pass on a worker thread, it and the decoding at one / two threads each; ovl21:
the worker at two threads, the decoding at one.
"""

import hashlib
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, os.path.abspath(__file__).rsplit("/bench/", 1)[0])  # this checkout's pipeline
# isort: off
import numpy as np  # noqa: E402
import pipeline  # noqa: E402, F401  (before torch: OpenMP's spin, MKL's strict mode)
import torch  # noqa: E402
from pipeline.audio.media import decode  # noqa: E402
from pipeline.decode.options import DecodeOptions  # noqa: E402
from pipeline.decode.transcriber import Transcriber  # noqa: E402
from pipeline.facts.records import PieceResult  # noqa: E402
from pipeline.facts.runtime import pick_runtime  # noqa: E402
from pipeline.models.load import load_models  # noqa: E402
# isort: on

audio = np.concatenate([decode(Path(p)) for p in sys.argv[1].split(",")])
mode, n_batches = sys.argv[2], int(sys.argv[3])
PIECE = 16000 * 24
pieces = [audio[i * PIECE : (i + 1) * PIECE] for i in range(8 * n_batches)]
batches = [pieces[i * 8 : (i + 1) * 8] for i in range(n_batches)]
transcriber = Transcriber(load_models("base", "none", pick_runtime("cpu", "auto")), DecodeOptions(batch_size=8))
FIRST_THREADS = {"ovl1": 1, "ovl2": 2, "ovl21": 2}
DECODING_THREADS = {"seq": 2, "seq1": 1, "ovl1": 1, "ovl2": 2, "ovl21": 1}


def first_pass(batch, threads=None):
    with torch.inference_mode():
        if threads:
            torch.set_num_threads(threads)
        return transcriber.first_pass(batch, [None] * len(batch))


def decoding(heard, batch):
    results = [PieceResult() for _ in batch]
    generated = transcriber.generate(heard.features, heard.encoded, heard.languages, batch, results, heard.cross)
    return [g.tokens for g in generated]


with torch.inference_mode():
    decoding(first_pass(batches[0][:2]), batches[0][:2])  # warm up
    out = []
    start = time.perf_counter()
    if mode.startswith("seq"):
        first_s = decoding_s = 0.0
        for batch in batches:
            a = time.perf_counter()
            heard = first_pass(batch, 2)
            b = time.perf_counter()
            torch.set_num_threads(DECODING_THREADS[mode])
            out.append(decoding(heard, batch))
            first_s, decoding_s = first_s + b - a, decoding_s + time.perf_counter() - b
        print(f"first passes {first_s:.1f} s, decoding {decoding_s:.1f} s")
    else:
        pool = ThreadPoolExecutor(1)
        future = pool.submit(first_pass, batches[0], FIRST_THREADS[mode])
        torch.set_num_threads(DECODING_THREADS[mode])
        for i, batch in enumerate(batches):
            heard = future.result()
            if i + 1 < n_batches:
                future = pool.submit(first_pass, batches[i + 1], FIRST_THREADS[mode])
            out.append(decoding(heard, batch))
    wall = time.perf_counter() - start
print(mode, f"{wall:.1f}s", hashlib.md5(repr(out).encode()).hexdigest()[:10])
