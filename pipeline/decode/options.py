"""Decoding options: a plain dataclass with no heavy imports, so the CLI can build and check it
before torch and transformers load (bad arguments answer at once)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DecodeOptions:
    language: str | None = None  # None: detect per piece (multilingual models)
    task: str = "transcribe"  # or "translate"
    batch_size: int = 4
    silence_db: float = -50.0  # pieces quieter than this (RMS, dBFS) are silence
    no_speech_threshold: float = 0.6
    logprob_threshold: float = -1.0
    compression_ratio_threshold: float = 2.4  # above: the text loops (Whisper's own limit)
    vad: bool = True  # Silero VAD: skip pieces without a voice, drop segments outside speech
    word_timestamps: bool = False  # words with start/end/probability (alignment heads + DTW)
    min_voice_s: float = 0.3

    def __post_init__(self):
        if self.task not in ("transcribe", "translate"):
            raise ValueError(f"task must be 'transcribe' or 'translate', not {self.task!r}")
        if not 1 <= self.batch_size <= 64:
            raise ValueError(f"batch size must be 1..64, got {self.batch_size}")
