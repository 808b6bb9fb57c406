"""Diarization options: light (no torch), so the CLI checks them before a model loads."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

BACKENDS = ("ge2e", "pyannote")
SHORT_RULES = ("sentence", "keep", "nearest")  # short.py: what a short turn with weak evidence takes


@dataclass(frozen=True)
class DiarizeOptions:
    """``--diarize``: who speaks when, as speaker labels on segments and words.

    ``num_speakers`` fixes the count; otherwise it is estimated within ``min_speakers..max_speakers``.
    Part of job.json's configuration, but not of the transcript's hash: adding or changing it on a job
    relabels finished files without decoding them again (job/finish.py)."""

    num_speakers: int | None = None
    min_speakers: int = 1
    max_speakers: int = 8
    backend: str = "ge2e"  # GE2E embeddings + spectral clustering, offline; "pyannote": its hub pipeline
    window_s: float = 1.5  # embedding windows over the speech
    hop_s: float = 1.5  # between windows; 4x finer where neighbouring windows' voices differ (diarizer.py)
    short_rule: str = "sentence"  # a short turn whose voice is unclear: see short.py

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"diarizer must be one of {', '.join(BACKENDS)}, not {self.backend!r}")
        if self.short_rule not in SHORT_RULES:
            raise ValueError(f"short_rule must be one of {', '.join(SHORT_RULES)}, not {self.short_rule!r}")
        if self.num_speakers is not None and not 1 <= self.num_speakers <= 32:
            raise ValueError(f"--num-speakers must be 1..32, got {self.num_speakers}")
        if not 1 <= self.min_speakers <= self.max_speakers <= 32:
            raise ValueError(
                f"speaker range must satisfy 1 <= --min-speakers <= --max-speakers <= 32, "
                f"got {self.min_speakers}..{self.max_speakers}"
            )
        if not 0 < self.hop_s <= self.window_s:
            raise ValueError(f"hop must be in (0, window], got {self.hop_s} for a {self.window_s} s window")


def decoded_without_words(job_dir: Path) -> bool:
    """Whether the job in ``job_dir`` was decoded without word timings: ``--diarize`` then leaves them off (its
    segments take the speaker with most time in them) rather than decode the job again. A missing or unreadable
    job.json says no: the runner judges it."""
    try:
        record = json.loads((job_dir / "job.json").read_text(encoding="utf-8"))
        return record["config"]["decode"]["word_timestamps"] is False
    except (OSError, ValueError, KeyError, TypeError):
        return False
