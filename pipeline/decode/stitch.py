"""Stitch stage: piece-relative segments → episode time, ordered, non-overlapping, inside the file."""

from __future__ import annotations

from ..audio.media import Piece
from ..facts.records import PieceResult, Segment
from .segments import clamp_words


def _r(t: float) -> float:
    return round(t, 3)


def stitch(pieces: list[Piece], results: list[PieceResult], duration_s: float | None = None) -> list[Segment]:
    """Shift every piece's segments by the piece start and make the whole file's segments monotonic.

    Rules: a segment never starts before the previous one ended, never ends
    before it starts, never runs past its own piece nor the file's duration;
    a segment that repeats the previous one's text right at a piece seam is dropped.
    """
    out: list[Segment] = []
    for piece, result in sorted(zip(pieces, results), key=lambda pr: pr[0].start_sample):
        piece_end = piece.start_s + piece.duration_s
        limit = min(piece_end, duration_s) if duration_s else piece_end
        for raw in result.segments:
            prev_end = out[-1].end_s if out else 0.0
            start = min(max(piece.start_s + raw.start_s, prev_end), limit)
            end = min(max(piece.start_s + raw.end_s, start), limit)
            if out and raw.text == out[-1].text and out[-1].piece != piece.index and start - prev_end < 1.0:
                continue  # the same words decoded on both sides of a cut
            out.append(
                Segment(
                    len(out),
                    _r(start),
                    _r(end),
                    raw.text,
                    piece.index,
                    result.avg_logprob,
                    result.no_speech_prob,
                    None if raw.words is None else clamp_words(raw.words, _r(start), _r(end), piece.start_s),
                )
            )
    return out
