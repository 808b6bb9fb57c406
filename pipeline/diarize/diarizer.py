"""One file's speaker labels: read the audio again (ffmpeg, in blocks), embed windows, cluster, label rows.

Reading the audio a second time costs an ffmpeg decode (about 0.1-0.2 s per audio minute here) but makes
the stage independent of decoding: it runs the same on a file just decoded and on a finished file of a
job that gets ``--diarize`` later (runner.py relabels those without decoding them again).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import numpy as np

from .. import audio
from ..records import Turn
from ..whisper import SAMPLE_RATE
from . import cluster, turns
from .options import DiarizeOptions


def options_hash(options: DiarizeOptions) -> str:
    """What a files row's ``speaker_config`` holds: labels made otherwise are made again."""
    return hashlib.sha256(json.dumps(asdict(options), sort_keys=True).encode()).hexdigest()[:16]


def cut_windows(blocks: Iterator[np.ndarray], spans: list[tuple[float, float]]) -> list[np.ndarray]:
    """The samples of each (sorted) span from a stream of blocks, holding only what later spans still need."""
    out: list[np.ndarray] = []
    buffer = np.zeros(0, np.float32)
    offset = 0  # sample index of buffer[0]
    blocks = iter(blocks)
    for lo, hi in spans:
        a, b = int(round(lo * SAMPLE_RATE)), int(round(hi * SAMPLE_RATE))
        while offset + len(buffer) < b:
            block = next(blocks, None)
            if block is None:
                break
            buffer = np.concatenate([buffer, block])
        out.append(buffer[max(0, a - offset) : max(0, b - offset)].copy())
        drop = max(0, a - offset)
        buffer, offset = buffer[drop:], offset + drop
    return out


class Diarizer:
    def __init__(self, options: DiarizeOptions):
        self.options = options
        self.config = options_hash(options)
        if options.backend == "pyannote":
            from .pyannote import PyannoteBackend

            self._pyannote = PyannoteBackend(options)
        else:
            from .embed import SpeakerEncoder

            self._encoder = SpeakerEncoder.load()

    def turns(self, path: Path, rows: list[dict], duration_s: float | None = None) -> list[Turn]:
        if self.options.backend == "pyannote":
            return self._pyannote.turns(path)
        o = self.options
        regions = turns.speech_regions(rows)
        spans = turns.windows(regions, o.window_s, o.hop_s)
        if not spans:
            return []
        samples = cut_windows(audio.stream(path, duration_s), spans)
        embeddings = np.concatenate([self._encoder.embed(group) for group in _same_length_groups(samples)])[
            np.argsort(_group_order(samples), kind="stable")
        ]
        labels = cluster.cluster(embeddings, o.min_speakers, o.max_speakers, exact=o.num_speakers)
        return turns.turns(regions, spans, [int(x) for x in labels])

    def label(self, path: Path, rows: list[dict], duration_s: float | None = None) -> tuple[list[dict], int]:
        """Segment rows with speakers (split where the speaker changes) and the number of speakers in them."""
        labelled = turns.label_rows(rows, self.turns(path, rows, duration_s))
        return labelled, turns.count(labelled)


def _group_order(samples: list[np.ndarray]) -> list[int]:
    """Window indices in the order _same_length_groups yields them."""
    return [i for _, members in _groups(samples) for i in members]


def _same_length_groups(samples: list[np.ndarray]) -> list[list[np.ndarray]]:
    """Windows batched by length (the LSTM takes equal lengths per batch; short turns are their own)."""
    return [[samples[i] for i in members] for _, members in _groups(samples)]


def _groups(samples: list[np.ndarray]) -> list[tuple[int, list[int]]]:
    by_length: dict[int, list[int]] = {}
    for i, s in enumerate(samples):
        by_length.setdefault(len(s), []).append(i)
    return sorted(by_length.items())
