"""``--assistant auto``: pick the fastest decoding mode by measuring it on the job's first pieces.

Every mode gives the same tokens (the main model's greedy output), so the choice
is only about speed, and it depends on the machine: on a 2-core CPU, rows batched
into one pass usually beat drafting; on a GPU, drafting at a small batch usually
wins. The calibration decodes the first pieces of the job with plain decoding
at the job's batch size and speculatively at batch sizes 1, 2, 4, ... up to it,
times the decoder phase of each (the encoder is common to all, except a seq2seq
draft's own encoder, which is counted), and keeps speculative decoding only when
it is at least ``margin`` faster than plain decoding.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import torch

from .generate import Generator
from .kv_cache import CrossKV

log = logging.getLogger("podscribe")


@dataclass
class Choice:
    speculative: bool
    batch_size: int
    assistant: str | None
    timings: dict[str, float] = field(default_factory=dict)  # mode -> seconds for the calibration pieces

    def describe(self) -> str:
        mode = (
            f"speculative ({self.assistant}), batch {self.batch_size}"
            if self.speculative
            else f"plain, batch {self.batch_size}"
        )
        if not self.timings:
            return mode
        measured = ", ".join(f"{k} {v:.2f}s" for k, v in self.timings.items())
        return f"{mode} (auto: {measured})"


@torch.inference_mode()
def calibrate(
    plain: Generator,
    speculative: Generator,
    features: torch.Tensor,
    encoded: torch.Tensor,
    prompts: list[list[int]],
    batch_size: int,
    assistant: str | None,
    draft_features=None,
    margin: float = 0.05,
    cross: CrossKV | None = None,
    samples: list[int] | None = None,
    voices: list | None = None,
) -> Choice:
    """Time each mode on these pieces (already through the encoder; ``samples``: their lengths, ``voices``: their
    VAD voice, so that the passes timed are the ones the stage runs); the fastest identical mode wins."""

    def run(generator: Generator, size: int) -> float:
        start = time.perf_counter()
        for i in range(0, features.shape[0], size):
            part = slice(i, i + size)
            generator.generate(
                features[part],
                prompts[part],
                encoded[part],
                None if draft_features is None else draft_features[part],
                None if cross is None else cross.rows(part),
                None if samples is None else samples[part],
                voices=None if voices is None else voices[part],
            )
        return time.perf_counter() - start

    rows = features.shape[0]
    plain_size = min(batch_size, rows)
    timings = {f"plain@{plain_size}": run(plain, plain_size)}
    sizes = sorted({min(s, rows) for s in (1, 2, 4, 8) if s <= batch_size})
    for size in sizes:
        timings[f"speculative@{size}"] = run(speculative, size)
    best = min(sizes, key=lambda s: timings[f"speculative@{s}"])
    chosen = timings[f"speculative@{best}"] < (1 - margin) * timings[f"plain@{plain_size}"]
    choice = Choice(chosen, best if chosen else batch_size, assistant, timings)
    log.info("auto: %s", choice.describe())
    return choice
