"""What a morning review should look at: a segment's flags from Whisper's own signals, and a file's language.

Decisions on decoded pieces, kept beside the decoder's thresholds (``DecodeOptions``); the manifest's tables
(storage/tables.py) store their answers in the ``flags`` and ``language`` columns.
"""

from __future__ import annotations

from ..audio.media import Piece
from ..facts.records import PieceResult
from .options import DecodeOptions

FLAGS = ("no_speech", "low_logprob", "loop", "language")


def segment_flags(piece: PieceResult, file_language: str | None, options: DecodeOptions) -> list[str]:
    """What a morning review should look at, from Whisper's own signals of the segment's piece:
    ``no_speech`` (kept although the no-speech probability is above the threshold), ``low_logprob``
    (average log-probability below the threshold), ``loop`` (the text looped and repeats were collapsed),
    ``language`` (another language than the file's)."""
    flags = []
    if piece.no_speech_prob is not None and piece.no_speech_prob > options.no_speech_threshold:
        flags.append("no_speech")
    if piece.avg_logprob is not None and piece.avg_logprob < options.logprob_threshold:
        flags.append("low_logprob")
    if piece.compression_ratio is not None and piece.compression_ratio > options.compression_ratio_threshold:
        flags.append("loop")
    if file_language and piece.language and piece.language != file_language:
        flags.append("language")
    return flags


def file_language(done: list[tuple[Piece, PieceResult]]) -> str | None:
    """The language with the most speech: seconds inside each piece's segments (its whole length when the
    segments are missing), not a count of pieces — two short pieces must not outvote one long one."""
    seconds: dict[str, float] = {}
    for piece, r in done:
        if r.language and not r.skipped:
            spoken = sum(max(0.0, s.end_s - s.start_s) for s in r.segments) or piece.duration_s
            seconds[r.language] = seconds.get(r.language, 0.0) + spoken
    return max(seconds, key=lambda lang: (seconds[lang], lang)) if seconds else None
