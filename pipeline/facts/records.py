"""Records: what crosses a stage boundary, one dataclass per concept.

decode → stitch: a piece's ``PieceResult`` (its ``RawSegment``s with ``Word``s, piece-relative; its
``DecodeStats``; its ``Redecode``s); stitch → manifest: ``Segment``s in episode time. Plain dataclasses
without torch, so the manifest, status and export read them without loading a model. The rows of the
manifest's tables are built from these records in ``tables.py``, and read back into them for resume.
Transformers' own shapes (dicts of ``start``/``end``/``tokens``) stay inside ``decode/``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Word:
    word: str  # with its leading space, as Whisper writes it
    start_s: float
    end_s: float
    probability: float
    speaker: str | None = None  # with --diarize: who said it; set on the segments table's rows by diarize/turns.py


@dataclass
class DecodeStats:
    """What decoding one piece cost, from the loop to the pieces table's columns."""

    main_calls: int = 0  # main-model decoder forward passes this piece took part in
    draft_calls: int = 0  # draft forward passes this piece took part in
    drafted: int = 0  # draft tokens proposed for this piece
    accepted: int = 0  # of those, kept (each equal to the main model's own choice)
    passes: int = 0  # decoding passes over the piece (transformers' seek rule may add a second)
    redecode_calls: int = 0  # of main_calls, those spent on second chances (fallback, uncovered speech)

    def add(self, more: DecodeStats) -> None:
        for name, value in vars(more).items():
            setattr(self, name, getattr(self, name) + value)


@dataclass
class Redecode:
    """One second chance, as the pieces table records it (piece-relative seconds)."""

    start_s: float
    end_s: float
    reason: str  # "uncovered speech" | "fallback: <check failed>; <beam N | temperature T>: better|not better"
    tokens: list[int]  # text token ids kept from it (none: nothing recovered)


@dataclass
class RawSegment:
    """A segment as decoded, piece-relative."""

    start_s: float
    end_s: float
    text: str
    n_tokens: int = 0  # text tokens (no timestamps) behind this segment
    words: list[Word] | None = None  # piece-relative, when word timestamps are on
    ids: list[int] = field(default_factory=list, repr=False)  # those text tokens (in memory only; not persisted)


@dataclass
class PieceResult:
    """Everything the decode stage says about one piece."""

    tokens: list[int] = field(default_factory=list)  # generated ids after the prompt, no end-of-text
    segments: list[RawSegment] = field(default_factory=list)
    language: str | None = None
    no_speech_prob: float = 0.0
    avg_logprob: float = 0.0
    compression_ratio: float = 0.0
    skipped: str | None = None  # "silence" | "no_voice" (VAD) | "no_speech" (Whisper): no text on purpose
    speech: list[tuple[float, float]] | None = None  # VAD spans, padded, piece-relative (in memory only)
    voice: list[tuple[float, float]] | None = None  # the same VAD pass unpadded: where the voice starts
    stats: DecodeStats = field(default_factory=DecodeStats)  # what decoding it cost (second chances included)
    redecodes: list[Redecode] = field(default_factory=list)  # second chances: fallback, uncovered speech


@dataclass
class Turn:
    """Who speaks when (diarize → the segments' speaker labels), episode seconds."""

    start_s: float
    end_s: float
    speaker: str  # "Speaker 1", "Speaker 2", ... numbered by first appearance


@dataclass
class Segment:
    """A stitched segment in episode time: a row of the segments table."""

    index: int
    start_s: float
    end_s: float
    text: str
    piece: int
    avg_logprob: float
    no_speech_prob: float
    words: list[Word] | None = None  # episode time, inside [start_s, end_s], monotonic
