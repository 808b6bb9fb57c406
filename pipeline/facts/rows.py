"""The manifest's rows as the stages hand them on (tables.py builds them, diarize labels them, manifest.py stores
them, export.py and the cue engine read them back): ``TypedDict`` shapes of the segments, words and pieces
tables, so a reader sees which columns a ``dict`` carries without opening the schema.

tables.py's Arrow schemas stay the source: tests/test_rows.py checks each shape's keys equal its schema's field
names, in order. Typing only: a row is a plain dict (pyarrow's ``to_pylist`` / ``from_pylist``), nothing is
checked at run time. A column read as null (added after a job dir was made, or left empty) is ``| None``.
"""

from __future__ import annotations

from typing import TypedDict


class WordRow(TypedDict):
    """A word of a segment (``tables.WORD``)."""

    word: str  # with its leading space, as Whisper writes it
    start_s: float
    end_s: float
    probability: float | None
    speaker: str | None  # with --diarize


class SegmentRow(TypedDict):
    """A row of the segments table (``tables.SEGMENTS_SCHEMA``), in episode time."""

    file_id: str
    path: str
    segment: int
    start_s: float
    end_s: float
    text: str
    piece: int
    avg_logprob: float | None
    no_speech_prob: float | None
    words: list[WordRow] | None  # None: the job ran without word timestamps
    language: str | None
    flags: list[str] | None
    speaker: str | None  # with --diarize


class RedecodeRow(TypedDict):
    """A second chance of a piece (the pieces table's ``redecodes``), piece-relative."""

    start_s: float
    end_s: float
    reason: str
    tokens: list[int]


class PieceRow(TypedDict):
    """A row of the pieces table (``tables.PIECES_SCHEMA``)."""

    file_id: str
    piece: int
    start_s: float
    end_s: float
    start_sample: int
    end_sample: int
    language: str | None
    skipped: str | None
    no_speech_prob: float | None
    avg_logprob: float | None
    compression_ratio: float | None
    n_tokens: int
    main_calls: int | None
    draft_calls: int | None
    drafted: int | None
    accepted: int | None
    passes: int | None
    redecode_calls: int | None  # null: written before it was a column
    redecodes: list[RedecodeRow] | None
