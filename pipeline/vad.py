"""Voice activity: where in a piece someone is speaking (Silero VAD, as bundled with faster-whisper).

Whisper invents words in music, tones and noise; a VAD does not. The decode
stage uses these spans to skip pieces without speech and to drop segments
that lie entirely outside speech.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .audio import SAMPLE_RATE


@dataclass(frozen=True)
class VadOptions:
    threshold: float = 0.4  # lenient: speech over a music bed must still count
    min_speech_s: float = 0.25
    pad_s: float = 0.4


@lru_cache(maxsize=1)
def _vad():
    try:
        from faster_whisper import vad
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise RuntimeError("voice activity detection needs the faster-whisper package (Silero VAD)") from exc
    return vad


def speech_spans(samples: np.ndarray, opts: VadOptions = VadOptions()) -> list[tuple[float, float]]:
    """Speech regions in seconds, padded by ``pad_s`` on each side."""
    if len(samples) < 512:
        return []
    vad = _vad()
    options = vad.VadOptions(
        threshold=opts.threshold,
        min_speech_duration_ms=int(opts.min_speech_s * 1000),
        min_silence_duration_ms=500,
        speech_pad_ms=int(opts.pad_s * 1000),
    )
    spans = vad.get_speech_timestamps(samples.astype(np.float32), options, sampling_rate=SAMPLE_RATE)
    return [(s["start"] / SAMPLE_RATE, s["end"] / SAMPLE_RATE) for s in spans]


def overlaps(start: float, end: float, spans: list[tuple[float, float]], slack: float = 0.2) -> bool:
    return any(start < hi + slack and end > lo - slack for lo, hi in spans)


def tighten(start: float, end: float, spans: list[tuple[float, float]]) -> tuple[float, float]:
    """Pull a segment's ends in to the (padded) speech it covers: Whisper's segment timestamps often
    include the silence before and after the words."""
    covered = [(lo, hi) for lo, hi in spans if lo < end and hi > start]
    if not covered:
        return start, end
    new_start = max(start, min(lo for lo, _ in covered))
    new_end = min(end, max(hi for _, hi in covered))
    return (round(new_start, 3), round(new_end, 3)) if new_start <= new_end else (start, end)
