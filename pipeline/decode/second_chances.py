"""Second chances, run: the fallback ladder for pieces failing Whisper's checks, and the coverage rounds.

``recover.py`` holds the pure decisions (which stretches, which candidate, in which order); this module runs
them with the stage's models, through the steps of the stage it is given (``Stage``: the ``Transcriber``'s public
steps, nothing private) and one record of the batch at hand (``Batch``): a failing piece is decoded again by
the main model alone in podscribe's loop (``search.py``: beam search, then seeded sampling, transformers' tokens),
one piece at a time, so the result depends neither on the batch nor on an assistant; uncovered voice goes back through the stage
itself (``t.decode``) as short clips. Both can take minutes: a stop asked for meanwhile abandons the batch
(``Abandoned``), which is decoded again on resume with the same seeded result.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch

from ..audio.media import SAMPLE_RATE
from ..facts.records import PieceResult, Redecode
from . import recover, score, search
from . import segments as cleanup
from .generate import Generated

if TYPE_CHECKING:
    from ..facts.whisper import Tokens
    from ..models.load import Models
    from .generate import Generator
    from .options import DecodeOptions


class Stage(Protocol):
    """What second chances drive: the stage's options, models and main-model generator, and its steps."""

    options: DecodeOptions
    models: Models
    plain: Generator  # the main model alone
    context: list[int]  # the previous-text prompt's tokens ([] without one)
    notify: Callable[[str], None] | None  # a line for the user when a second chance starts
    stop: threading.Event | None
    tokens: Tokens

    def prompt(self, language: str | None) -> list[int]: ...

    def score(self, encoded, languages, generated: list[Generated], results: list[PieceResult]) -> None: ...

    def gate(self, audio: list[np.ndarray]) -> tuple[list[PieceResult], list[int]]: ...

    def decode(self, audio: list[np.ndarray], results: list[PieceResult], languages: list[str | None]) -> None: ...


@dataclass
class Batch:
    """The batch at hand after its first pass: what the fallback reads (features, encoder states, languages, the
    audio) and what it may replace (a piece's generated tokens, its result's scores)."""

    features: torch.Tensor
    encoded: torch.Tensor
    languages: list[str | None]
    generated: list[Generated]
    audio: list[np.ndarray]
    results: list[PieceResult]


@dataclass
class Attempt:
    """One piece's second chance: its row in the batch, the best candidate so far, why it failed, the rungs left."""

    row: int
    best: recover.Candidate
    why: str
    ladder: list[tuple[str, int, float]]


class Abandoned(Exception):
    """A stop was asked for while a piece was at its second chance (which can take minutes): its batch is
    dropped, and decoded again on resume (the same seeded result)."""


def fallback(t: Stage, batch: Batch) -> None:
    """Pieces failing Whisper's checks (and not silence) are decoded again — beam search, then seeded
    sampling at rising temperatures — by the main model alone, one at a time (the result does not
    depend on the batch), until one passes; the best by Whisper's rule is kept (``recover.better``)."""
    o = t.options
    for i, r in enumerate(batch.results):
        best = recover.Candidate(r.avg_logprob, r.compression_ratio, batch.generated[i].looped)
        if score.silent(r, o) or not recover.fails(best, o.logprob_threshold, o.compression_ratio_threshold):
            continue
        why = (
            f"compression ratio {best.compression_ratio:.2f}"
            if best.compression_ratio > o.compression_ratio_threshold
            else f"avg log-prob {best.avg_logprob:.2f}"
        )
        ladder = list(recover.fallbacks(o.fallback_beams))
        if ladder and t.notify is not None:
            t.notify(
                f"a {len(batch.audio[i]) / SAMPLE_RATE:.0f} s piece failed Whisper's checks ({why}): second chance "
                f"({', '.join(label for label, _, _ in ladder[:2])}, ...; Ctrl-C abandons it, redone on resume)"
            )
        with abandon_on_stop(t):
            _ladder(t, batch, Attempt(i, best, why, ladder))


@contextlib.contextmanager
def abandon_on_stop(t: Stage):
    """While a second chance runs, every main-model forward pass first checks for a stop."""
    stop = t.stop

    def check(_module=None, _args=None):
        if stop is not None and stop.is_set():
            raise Abandoned()

    t.plain.main.on_forward = check  # the decoder the attempts run on
    try:
        check(None, None)
        yield
    finally:
        t.plain.main.on_forward = None


def _ladder(t: Stage, batch: Batch, attempt: Attempt) -> None:
    """The rungs of one piece's second chance, until one passes Whisper's checks."""
    o, i, best, why = t.options, attempt.row, attempt.best, attempt.why
    r, encoded, languages = batch.results[i], batch.encoded, batch.languages
    most = fallback_tokens(t, languages[i], len(batch.audio[i]) / SAMPLE_RATE)
    for label, beams, temperature in attempt.ladder:
        retry = again(
            t,
            batch.features[i : i + 1],
            encoded[i : i + 1],
            languages[i],
            beams,
            temperature,
            most,
            len(batch.audio[i]),
            r.voice,
        )
        trial = PieceResult()
        t.score(encoded[i : i + 1], languages[i : i + 1], [retry], [trial])
        candidate = recover.Candidate(
            trial.avg_logprob, score.compression_ratio(t.models.tokenizer, retry.tokens), retry.ran_on
        )
        keep = recover.better(best, candidate, o.logprob_threshold, o.compression_ratio_threshold)
        r.redecodes.append(
            Redecode(
                0.0,
                round(len(batch.audio[i]) / SAMPLE_RATE, 3),
                f"fallback: {why}; {label}: " + ("better" if keep else "not better"),
                [tok for tok in retry.tokens if tok < t.tokens.eot] if keep else [],
            )
        )
        r.stats.main_calls += retry.stats.main_calls
        r.stats.redecode_calls += retry.stats.main_calls
        if keep:
            batch.generated[i], best = retry, candidate
            r.avg_logprob, r.compression_ratio = candidate.avg_logprob, candidate.compression_ratio
        if not recover.fails(best, o.logprob_threshold, o.compression_ratio_threshold):
            break


def fallback_tokens(t: Stage, language: str | None, duration_s: float) -> int:
    """openai-whisper's sample length, fewer for a short stretch (``recover.rung_tokens``), and less what a long
    prompt takes: transformers refuses a prompt plus new tokens past the model's positions (a 224-token prompt
    left 223)."""
    return min(recover.rung_tokens(duration_s), t.plain.max_positions - len(t.prompt(language)))


def again(
    t: Stage,
    features,
    encoded,
    language: str | None,
    beams: int,
    temperature: float,
    max_new_tokens: int,
    samples: int | None = None,
    voice: list[tuple[float, float]] | None = None,
) -> Generated:
    """One piece decoded again by the main model alone in podscribe's loop (``search.py``: beam search, or seeded
    sampling; transformers' tokens), at most ``max_new_tokens`` a pass. ``samples``: the piece's length, so that
    a later pass starts only where it has audio left, as the first pass's (``generate.audio_left``); ``voice``: its
    VAD voice, which decision 0055's rule measures what is left by, as the first pass's."""
    cuda = [features.device.index or 0] if features.device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):  # seeded here, the caller's random state untouched
        torch.manual_seed(recover.SEED)
        (retry,) = t.plain.generate(
            features,
            [t.prompt(language)],
            encoded,
            samples=None if samples is None else [samples],
            search=search.for_rung(t.plain.gen, beams, temperature),
            voices=[voice],
            max_new_tokens=max_new_tokens,
        )
    # scored as one pass (the rules are not restarted where a later pass began), as when transformers ran it
    retry.pass_lengths, retry.pass_ends = [len(retry.tokens)], retry.pass_ends[:1]
    retry.scores = None  # the passes joined: the scoring pass scores the row (none from a search anyway)
    return retry


def cover(t: Stage, audio: list[np.ndarray], results: list[PieceResult]) -> None:
    """The coverage check (``recover.py``): voice no text covers is decoded again as short clips, in
    rounds while a round recovers something."""
    o = t.options
    attempts: list[list[tuple[float, float]]] = [[] for _ in results]
    for _ in range(recover.MAX_ROUNDS):
        jobs = []  # (row, gap, clip span), piece-relative seconds
        for i, (a, r) in enumerate(zip(audio, results)):
            if r.skipped or not r.speech:
                continue
            for gap in recover.uncovered(r.speech, covered(r, o.coverage_gap_s), o.coverage_gap_s):
                span = recover.clip(gap, len(a) / SAMPLE_RATE)
                if not recover.tried(span, attempts[i]):
                    attempts[i].append(span)
                    jobs.append((i, gap, span))
        if not jobs:
            return
        clips = [audio[i][int(lo * SAMPLE_RATE) : int(hi * SAMPLE_RATE)] for i, _, (lo, hi) in jobs]
        found, active = t.gate(clips)
        for at in range(0, len(active), o.batch_size):
            rows = active[at : at + o.batch_size]
            t.decode([clips[k] for k in rows], [found[k] for k in rows], [results[jobs[k][0]].language for k in rows])
        progress = False
        for (i, gap, (lo, hi)), sub in zip(jobs, found):
            r = results[i]
            new = [
                cleanup.shifted(s, lo)
                for s in sub.segments
                if recover.belongs(s.start_s + lo, s.end_s + lo, gap)
                and not recover.echoes_around(s.text, r.segments, gap)
            ]
            r.redecodes += [
                Redecode(round(d.start_s + lo, 3), round(d.end_s + lo, 3), d.reason, d.tokens) for d in sub.redecodes
            ]
            r.redecodes.append(
                Redecode(round(lo, 3), round(hi, 3), "uncovered speech", [tok for s in new for tok in s.ids])
            )
            # a clip's calls are all second-chance calls; passes count the piece's own
            r.stats.add(replace(sub.stats, passes=0, redecode_calls=sub.stats.main_calls))
            if new:
                r.segments = recover.merge(r.segments, new)
                progress = True
        if not progress:
            return


def covered(r: PieceResult, gap_s: float) -> list[tuple[float, float]]:
    """What a piece's text covers: each segment's span, or its words' (padded) where the segment is
    thin for the speech in it and its words are known."""
    out = []
    for seg in r.segments:
        if seg.words and recover.thin(seg.start_s, seg.end_s, len(seg.text.split()), r.speech, gap_s):
            out += [(w.start_s - recover.WORD_PAD_S, w.end_s + recover.WORD_PAD_S) for w in seg.words if w.word.strip()]
        else:
            out.append((seg.start_s, seg.end_s))
    return out
