"""Decode stage: pieces of audio → token ids, piece-relative timestamped segments and stats.

- ``transcriber.py``: the stage's entry point (gates, encoder, language, scoring, segments);
- ``generate.py``: Whisper generation with podscribe's own loop (passes, segments);
- ``speculative.py``: the batched greedy / speculative loop (draft, verify, accept);
- ``lean.py``: the decoder forward with a preallocated per-row KV cache;
- ``rules.py``: Whisper's logits rules (suppression, timestamps), vectorised;
- ``reference.py``: transformers' own generate, the reference the tests and benchmark compare with;
- ``auto.py``: ``--assistant auto``, a calibration that picks the fastest identical mode.
"""

from .transcriber import (  # noqa: F401
    DecodeOptions,
    PieceResult,
    RawSegment,
    Transcriber,
    attach_words,
    drop_repeats,
    is_non_speech_text,
)
