"""Stitch stage rules on hand-made decoder output (the real-model path is covered in test_quality)."""

from __future__ import annotations

from pipeline.audio.media import Piece
from pipeline.decode.segments import drop_repeats
from pipeline.decode.stitch import stitch
from pipeline.facts.records import PieceResult, RawSegment

SR = 16000


def _piece(index: int, start_s: float, dur_s: float) -> Piece:
    return Piece(index, int(start_s * SR), None, int(dur_s * SR))


def _result(*segs) -> PieceResult:
    return PieceResult(segments=[RawSegment(a, b, t) for a, b, t in segs])


def test_shifted_to_episode_time_ordered_and_clamped():
    pieces = [_piece(1, 20.0, 25.0), _piece(0, 0.0, 20.0)]  # out of order on purpose
    results = [
        _result((0.0, 5.0, "third"), (5.0, 40.0, "runs past its piece")),
        _result((0.0, 8.0, "first"), (7.0, 21.0, "overlaps and overruns")),
    ]
    segs = stitch(pieces, results, duration_s=44.0)
    assert [s.text for s in segs] == ["first", "overlaps and overruns", "third", "runs past its piece"]
    assert [s.index for s in segs] == [0, 1, 2, 3]
    assert segs[1].start_s == 8.0 and segs[1].end_s == 20.0  # no overlap, no overrun of the piece
    assert segs[2].start_s == 20.0 and segs[3].end_s == 44.0  # inside the file's duration
    for a, b in zip(segs, segs[1:]):
        assert a.start_s <= a.end_s <= b.start_s


def test_a_repeat_across_a_cut_is_dropped_but_not_within_a_piece():
    pieces = [_piece(0, 0.0, 15.0), _piece(1, 15.0, 15.0)]
    results = [_result((10.0, 15.0, "Thank you."), (14.5, 15.0, "Thank you.")), _result((0.0, 1.0, "Thank you."))]
    segs = stitch(pieces, results)
    assert [(s.text, s.piece) for s in segs] == [("Thank you.", 0), ("Thank you.", 0)]


def test_drop_repeats_collapses_loops_only():
    segs = [RawSegment(i, i + 1, t) for i, t in enumerate(["a b", "c d", "a b", "c d", "e f", "a b"])]
    assert [s.text for s in drop_repeats(segs, window=4)] == ["a b", "c d", "e f"]
    assert drop_repeats([]) == []


def test_vad_tightening_pulls_segment_ends_to_speech():
    from pipeline.audio.vad import tighten

    spans = [(1.2, 4.0), (6.5, 9.0)]
    assert tighten(0.0, 5.0, spans) == (1.2, 4.0)
    assert tighten(0.0, 10.0, spans) == (1.2, 9.0)
    assert tighten(4.5, 6.0, spans) == (4.5, 6.0)  # no speech under it: left alone (the VAD filter decides)
    assert tighten(2.0, 3.0, spans) == (2.0, 3.0)  # inside speech: unchanged
