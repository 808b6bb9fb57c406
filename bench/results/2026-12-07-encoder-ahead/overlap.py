"""Experiment (not kept): the next batch's first pass (features, encoder, keys, probe) on a second thread beside
this batch's decoding. Pieces are fixed 24 s cuts, 8 a batch; the tokens of every mode are hashed.

    .venv/bin/python bench/results/2026-12-07-levers/overlap.py A.mp3[,B.m4a] seq|ovl1|ovl2 BATCHES

seq: first pass then decoding, batch after batch, two threads; ovl1: the next batch's first pass on a worker thread
with one OpenMP thread, the decoding with one; ovl2: the same with two threads each.
"""

import hashlib
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
sys.path.insert(0, '/work/main')
import pipeline  # noqa
import torch

from pipeline.audio.media import decode
from pipeline.decode.options import DecodeOptions
from pipeline.decode.transcriber import Transcriber
from pipeline.facts.records import PieceResult
from pipeline.facts.runtime import pick_runtime
from pipeline.models.load import load_models

audio = np.concatenate([decode(Path(p)) for p in sys.argv[1].split(",")])
mode, n_batches = sys.argv[2], int(sys.argv[3])
PIECE = 16000 * 24
pieces = [audio[i * PIECE : (i + 1) * PIECE] for i in range(8 * n_batches)]
batches = [pieces[i * 8 : (i + 1) * 8] for i in range(n_batches)]
transcriber = Transcriber(load_models("base", "none", pick_runtime("cpu", "auto")), DecodeOptions(batch_size=8))


def first_pass(batch, threads=None):
    with torch.inference_mode():
        if threads:
            torch.set_num_threads(threads)
        return transcriber.first_pass(batch, [None] * len(batch))


def decoding(heard, batch):
    results = [PieceResult() for _ in range(heard.encoded.shape[0])]
    generated = transcriber.generate(heard.features, heard.encoded, heard.languages, batch, results, heard.cross)
    return [g.tokens for g in generated]


with torch.inference_mode():
    decoding(first_pass(batches[0][:2]), batches[0][:2])  # warm up
    out = []
    start = time.perf_counter()
    if mode in ("seq", "seq1"):
        first_s = decoding_s = 0.0
        for batch in batches:
            a = time.perf_counter()
            heard = first_pass(batch, 2)
            b = time.perf_counter()
            if mode == "seq1":
                torch.set_num_threads(1)
            out.append(decoding(heard, batch))
            first_s, decoding_s = first_s + b - a, decoding_s + time.perf_counter() - b
        print(f"first passes {first_s:.1f} s, decoding {decoding_s:.1f} s")
    else:
        threads = 1 if mode == "ovl1" else 2
        pool = ThreadPoolExecutor(1)
        future = pool.submit(first_pass, batches[0], threads)
        torch.set_num_threads(1 if mode in ("ovl1", "ovl21") else 2)
        for i in range(n_batches):
            heard = future.result(); batch = batches[i]
            if i + 1 < n_batches:
                future = pool.submit(first_pass, batches[i + 1], threads)
            out.append(decoding(heard, batch))
    wall = time.perf_counter() - start
print(mode, f"{wall:.1f}s", hashlib.md5(repr(out).encode()).hexdigest()[:10])
