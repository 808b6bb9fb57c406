"""Decode stage: pieces of audio → token ids, piece-relative timestamped segments and stats.

- ``transcriber.py``: the stage's entry point (gates, encoder, language, segments);
- ``score.py``: Whisper's checks on a piece (average log-probability, compression ratio, no-speech rule);
- ``second_chances.py``: the fallback ladder and the coverage rounds, run;
- ``generate.py``: Whisper generation with podscribe's own loop (passes, segments);
- ``speculative.py``: the batched greedy / speculative loop (draft, verify, accept);
- ``kv_cache.py``: the decoder forward with a preallocated per-row KV cache;
- ``rules.py``: Whisper's logits rules (suppression, timestamps), vectorised;
- ``forced.py``: the teacher-forced pass (scoring, word timings, language detection read Whisper through it);
- ``timing.py``: word timings (alignment-head cross-attention + DTW, Whisper's method);
- ``recover.py``: second chances' pure decisions (which stretches, which candidate);
- ``search.py``: the second chances' beam search and seeded sampling, in podscribe's loop;
- ``hf_generate.py``: transformers' own generate, the reference the tests and benchmarks compare the loop with;
- ``auto.py``: ``--assistant auto``, a calibration that picks the fastest identical mode;
- ``options.py``: ``DecodeOptions`` (light: importing it loads no torch).

The stage's names are imported lazily, so ``from pipeline.decode import DecodeOptions`` stays cheap.
"""

from .options import DecodeOptions  # noqa: F401

_TRANSCRIBER = {"Transcriber"}


def __getattr__(name: str):
    if name in _TRANSCRIBER:
        from . import transcriber

        return getattr(transcriber, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
