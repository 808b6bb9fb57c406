"""One file's speaker labels: read the audio again (ffmpeg, in blocks), embed windows, cluster, label rows.

Reading the audio a second time costs an ffmpeg decode (small next to decoding; decision record 0015) but makes
the stage independent of decoding: it runs the same on a file just decoded and on a finished file of a
job that gets ``--diarize`` later (job/finish.py relabels those without decoding them again).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ..audio import media
from ..facts.records import Turn
from ..facts.rows import SegmentRow
from ..facts.whisper import SAMPLE_RATE
from . import cluster, short, turns
from .options import DiarizeOptions

BATCH = 64  # windows embedded together (the LSTM is compute-bound past ~64 on a CPU)
CHANGE = 0.7  # neighbouring windows less alike than this (cosine) may hold a change of speaker
REFINE = 3  # windows added between two such neighbours
RELIABLE_S = 0.5  # shorter windows (a lone "Yes.") are labelled by the voices the longer ones found


def options_hash(options: DiarizeOptions) -> str:
    """What a files row's ``speaker_config`` holds: labels made otherwise are made again."""
    from ..storage.manifest import JobDir

    return JobDir.config_hash(asdict(options))


class Stream:
    """A file's samples from a moving start: ``get`` reads blocks ahead as far as asked, ``forget`` drops what
    lies before a time. Memory is what lies between the two (a batch of windows), not the file."""

    def __init__(self, blocks: Iterator[np.ndarray]):
        self.blocks = iter(blocks)
        self.buffer = np.zeros(0, np.float32)
        self.offset = 0  # sample index of buffer[0]

    def get(self, lo_s: float, hi_s: float) -> np.ndarray:
        a = int(round(lo_s * SAMPLE_RATE))
        b = a + int(round((hi_s - lo_s) * SAMPLE_RATE))  # one length for windows of one length, wherever they start
        assert a >= self.offset, "a span before what was forgotten"
        while self.offset + len(self.buffer) < b:
            block = next(self.blocks, None)
            if block is None:
                break
            self.buffer = np.concatenate([self.buffer, block])
        return self.buffer[a - self.offset : max(a, b) - self.offset].copy()

    def forget(self, before_s: float) -> None:
        drop = max(0, int(round(before_s * SAMPLE_RATE)) - self.offset)
        self.buffer, self.offset = self.buffer[drop:], self.offset + drop


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

    def turns(self, path: Path, rows: list[SegmentRow], duration_s: float | None = None) -> list[Turn]:
        if self.options.backend == "pyannote":
            return self._pyannote.turns(path)
        o = self.options
        parts = short.stretches(rows, short.pauses(media.stream(path, duration_s)))
        regions = [(p.lo_s, p.hi_s) for p in parts]
        spans, embeddings = self.embed(Stream(media.stream(path, duration_s)), regions)
        if not spans:
            return []
        lengths = np.array([hi - lo for lo, hi in spans])
        reliable = lengths >= RELIABLE_S
        labels = cluster.cluster(embeddings, o.min_speakers, o.max_speakers, o.num_speakers, reliable)
        labels = self.short_turns(parts, spans, embeddings, labels, lengths >= o.window_s - 1e-6)
        return turns.turns(regions, spans, [int(x) for x in labels])

    def short_turns(self, parts, spans, embeddings, labels, long_windows) -> np.ndarray:
        """Each short stretch (one window over its own padded span) judged again against the speakers' centres
        (short.py); the labels renumbered by first appearance."""
        regions = [(p.lo_s, p.hi_s) for p in parts]
        first: dict[int, list[int]] = {}
        for i, r in enumerate(turns.region_index(regions, spans)):
            first.setdefault(r, []).append(i)
        own = [
            first[k][0] if k in first and len(first[k]) == 1 and p.length_s < short.SHORT_S else None
            for k, p in enumerate(parts)
        ]
        who = [int(labels[first[k][0]]) if k in first else None for k in range(len(parts))]
        known = [k for k in range(len(parts)) if who[k] is not None]
        ids, centre = short.centres(embeddings, labels, long_windows)
        decided = short.decide(
            [who[k] for k in known],
            [own[k] for k in known],
            embeddings,
            [parts[k].new_sentence for k in known],
            ids,
            centre,
            self.options.short_rule,
        )
        labels = labels.copy()
        for k, speaker in zip(known, decided):
            if own[k] is not None:
                labels[own[k]] = speaker
        order: dict[int, int] = {}
        return np.array([order.setdefault(int(x), len(order)) for x in labels], int)

    def embed(self, stream: Stream, regions: list[tuple[float, float]]) -> tuple[list[tuple[float, float]], np.ndarray]:
        """Windows every ``hop_s`` over the regions, and ``REFINE`` more between two neighbours whose voices differ
        (cosine under ``CHANGE``): a turn is placed to ``hop_s / (REFINE + 1)`` where there is one, at the cost of
        ``hop_s`` elsewhere. Returns the windows in time order with their embeddings."""
        o = self.options
        coarse = turns.windows(regions, o.window_s, o.hop_s)
        region_of = turns.region_index(regions, coarse)
        spans: list[tuple[float, float]] = []
        vectors: list[np.ndarray] = []
        previous = None  # the last coarse window of the batch before, with its region and vector
        for i in range(0, len(coarse), BATCH):
            batch = coarse[i : i + BATCH]
            found = self._encoder.embed([stream.get(lo, hi) for lo, hi in batch])
            chain = ([previous] if previous else []) + list(zip(batch, region_of[i : i + BATCH], found))
            extra = [
                w
                for (a, ra, va), (b, rb, vb) in zip(chain, chain[1:])
                if ra == rb and float(va @ vb) < CHANGE
                for w in turns.between(a, b, REFINE)
            ]
            spans += batch + extra
            vectors += [found, *([self._encoder.embed([stream.get(lo, hi) for lo, hi in extra])] if extra else [])]
            previous = chain[-1]
            stream.forget(batch[-1][0])
        if not spans:
            return [], np.zeros((0, 0), np.float32)
        order = sorted(range(len(spans)), key=lambda k: spans[k])
        stacked = np.concatenate(vectors)
        return [spans[k] for k in order], stacked[order]

    def label(
        self, path: Path, rows: list[SegmentRow], duration_s: float | None = None
    ) -> tuple[list[SegmentRow], int]:
        """Segment rows with speakers (split where the speaker changes) and the number of speakers in them."""
        labelled = turns.label_rows(rows, self.turns(path, rows, duration_s))
        return labelled, turns.count(labelled)
