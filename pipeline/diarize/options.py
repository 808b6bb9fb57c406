"""Diarization options: light (no torch), so the CLI checks them before a model loads."""

from __future__ import annotations

from dataclasses import dataclass

BACKENDS = ("ge2e", "pyannote")


@dataclass(frozen=True)
class DiarizeOptions:
    """``--diarize``: who speaks when, as speaker labels on segments and words.

    ``num_speakers`` fixes the count; otherwise it is estimated within ``min_speakers..max_speakers``.
    Part of job.json's configuration, but not of the transcript's hash: adding or changing it on a job
    relabels finished files without decoding them again (runner.py)."""

    num_speakers: int | None = None
    min_speakers: int = 1
    max_speakers: int = 8
    backend: str = "ge2e"  # GE2E embeddings + spectral clustering, offline; "pyannote": its hub pipeline
    window_s: float = 1.5  # embedding windows over the speech
    hop_s: float = 1.5  # between windows; 4x finer where neighbouring windows' voices differ (diarizer.py)

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"diarizer must be one of {', '.join(BACKENDS)}, not {self.backend!r}")
        if self.num_speakers is not None and not 1 <= self.num_speakers <= 32:
            raise ValueError(f"--num-speakers must be 1..32, got {self.num_speakers}")
        if not 1 <= self.min_speakers <= self.max_speakers <= 32:
            raise ValueError(
                f"speaker range must satisfy 1 <= --min-speakers <= --max-speakers <= 32, "
                f"got {self.min_speakers}..{self.max_speakers}"
            )
        if not 0 < self.hop_s <= self.window_s:
            raise ValueError(f"hop must be in (0, window], got {self.hop_s} for a {self.window_s} s window")
