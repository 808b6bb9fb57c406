"""Voice activity: where in a piece someone is speaking (Silero VAD as faster-whisper runs it: ``silero.py``).

Whisper invents words in music, tones and noise; a VAD does not. The decode
stage uses these spans to skip pieces without speech, to drop segments that lie
entirely outside speech, and to pull segment times in to the voice.

Two views of one Silero pass: the **voice** (where the VAD heard speech, unpadded:
its onsets are within a few tens of ms of the words) and the **speech spans** (the
voice padded by ``pad_s`` each side, Silero's own padding rule): the padded spans
gate pieces and drive the coverage check, which want to err towards "speech"; the
unpadded onsets place segment starts (Whisper's start timestamps run early by a few
tenths of a second, and the padding alone cannot pull them in further than the pad).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import silero
from .media import SAMPLE_RATE

MIN_SILENCE_MS = 500  # a span ends after this much silence
LEAD_S = 0.1  # a segment starts at most this long before the voice the VAD heard (Silero's 32 ms windows, soft onsets)


@dataclass(frozen=True)
class VadOptions:
    threshold: float = 0.4  # lenient: speech over a music bed must still count
    min_speech_s: float = 0.25
    pad_s: float = 0.4


@dataclass(frozen=True)
class Voice:
    """One VAD pass over a piece, piece-relative seconds: ``spans`` as heard, ``padded`` by ``pad_s``."""

    spans: list[tuple[float, float]]
    padded: list[tuple[float, float]]


def voice(samples: np.ndarray, opts: VadOptions = VadOptions()) -> Voice:
    """Where someone speaks, unpadded and padded (one Silero pass)."""
    if len(samples) < 512:
        return Voice([], [])
    spans = silero.speech(
        samples.astype(np.float32), opts.threshold, int(opts.min_speech_s * 1000), MIN_SILENCE_MS, SAMPLE_RATE
    )
    return Voice(
        [(lo / SAMPLE_RATE, hi / SAMPLE_RATE) for lo, hi in spans],
        [(lo / SAMPLE_RATE, hi / SAMPLE_RATE) for lo, hi in pad(spans, int(opts.pad_s * SAMPLE_RATE), len(samples))],
    )


def speech_spans(samples: np.ndarray, opts: VadOptions = VadOptions()) -> list[tuple[float, float]]:
    """Speech regions in seconds, padded by ``pad_s`` on each side."""
    return voice(samples, opts).padded


def pad(spans: list[tuple[int, int]], pad_samples: int, n_samples: int) -> list[tuple[int, int]]:
    """Silero's padding (faster-whisper's ``get_speech_timestamps``), in samples: each span widened by
    ``pad_samples`` inside the audio, except that a gap shorter than two pads is split between its
    neighbours."""
    out = [list(s) for s in spans]
    for i, s in enumerate(out):
        if i == 0:
            s[0] = int(max(0, s[0] - pad_samples))
        if i != len(out) - 1:
            gap = out[i + 1][0] - s[1]
            if gap < 2 * pad_samples:
                s[1] += int(gap // 2)
                out[i + 1][0] = int(max(0, out[i + 1][0] - gap // 2))
            else:
                s[1] = int(min(n_samples, s[1] + pad_samples))
                out[i + 1][0] = int(max(0, out[i + 1][0] - pad_samples))
        else:
            s[1] = int(min(n_samples, s[1] + pad_samples))
    return [(lo, hi) for lo, hi in out]


def overlaps(start: float, end: float, spans: list[tuple[float, float]], slack: float = 0.2) -> bool:
    return any(start < hi + slack and end > lo - slack for lo, hi in spans)


def tighten(
    start: float, end: float, spans: list[tuple[float, float]], heard: list[tuple[float, float]] | None = None
) -> tuple[float, float]:
    """Pull a segment's ends in to the (padded) speech it covers: Whisper's segment timestamps often
    include the silence before and after the words. With the unpadded voice (``heard``), the start is
    pulled further, to ``LEAD_S`` before the first voice inside the segment."""
    covered = [(lo, hi) for lo, hi in spans if lo < end and hi > start]
    if not covered:
        return start, end
    new_start = max(start, min(lo for lo, _ in covered))
    new_end = min(end, max(hi for _, hi in covered))
    onsets = [lo for lo, hi in heard or [] if lo < new_end and hi > new_start]
    if onsets:
        new_start = max(new_start, min(onsets) - LEAD_S)
    return (round(new_start, 3), round(new_end, 3)) if new_start <= new_end else (start, end)
