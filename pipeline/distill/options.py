"""What ``podscribe distill`` is asked to do: a plain dataclass, no heavy imports (the CLI checks it first)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DistillOptions:
    main: str = "base"  # the main model the draft is for (an alias, a Transformers dir, a hub id)
    layers: int = 2  # of the main decoder's layers, the first and last by default (Distil-Whisper's choice)
    vocab: int | None = None  # text tokens the draft may propose (the most used in its transcripts); None: all
    steps: int | None = None  # optimizer steps (None: from ``epochs``)
    epochs: float = 3.0
    batch_size: int = 8  # pieces per optimizer step (split into ``grad_accum`` micro-batches)
    grad_accum: int = 1
    lr: float = 1e-4
    warmup_steps: int = 10
    kl_weight: float = 1.0  # KL to the main model's distribution (its top ``top_k`` tokens) ...
    ce_weight: float = 1.0  # ... plus cross-entropy on its greedy tokens
    top_k: int = 32
    eval_every: int = 50  # steps; also where a checkpoint is written
    checkpoint_every: int | None = None  # steps (None: ``eval_every``)
    seed: int = 0
    holdout: float = 0.1  # share of the files (never pieces) held out for evaluation
    eval_pieces: int = 16  # held-out pieces the evaluation decodes
    max_pieces: int | None = None  # at most this many training pieces are labelled (None: all)
    language: str | None = None  # None: detected per piece, as transcription does
    device: str = "auto"
    compute_type: str = "auto"  # the main model's, for labelling (as jobs run it)
    mixed_precision: str = "no"  # "no" (float32) or "bf16": the training's
    cache_dir: Path | None = None

    def __post_init__(self):
        if self.layers < 1:
            raise ValueError(f"--layers must be >= 1, got {self.layers}")
        if self.vocab is not None and self.vocab < 1:
            raise ValueError(f"--vocab must be a positive count or 'full', got {self.vocab}")
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"--steps must be >= 1, got {self.steps}")
        if self.epochs <= 0:
            raise ValueError(f"--epochs must be > 0, got {self.epochs}")
        if self.batch_size < 1 or self.grad_accum < 1 or self.batch_size % self.grad_accum:
            raise ValueError("--batch-size must be a positive multiple of --grad-accum")
        if not 0 <= self.holdout < 1:
            raise ValueError(f"--holdout must be in [0, 1), got {self.holdout}")
        if self.eval_every < 1:
            raise ValueError(f"--eval-every must be >= 1, got {self.eval_every}")
        if self.mixed_precision not in ("no", "bf16"):
            raise ValueError(f"--mixed-precision must be 'no' or 'bf16', not {self.mixed_precision!r}")

    @property
    def checkpoint_steps(self) -> int:
        return self.checkpoint_every or self.eval_every
