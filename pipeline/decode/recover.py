"""Second chances: speech the first greedy pass dropped is decoded again.

Greedy Whisper fails in two ways that lose words, and podscribe used to accept both:

- **Early stop.** A piece decodes to one sentence and end-of-text, or one segment's
  timestamps stretch over seconds of speech its text does not hold: the speech
  after or inside it never appears. The VAD knows it was speech. The **coverage
  check** compares the voice spans with what the decoded text covers (word timings
  when the segment looks too thin for its speech, else the segment span) and decodes
  every uncovered stretch of at least ``min_gap_s`` again as its own short piece,
  with a little context on both sides. Repeats while a round recovers something and
  the next stretch starts later (Whisper's own seek rule moves forward the same way).
- **Failing checks.** A piece whose text loops (compression ratio > 2.4) or whose
  average log-probability is below -1 — openai-whisper's triggers for its
  temperature fallback — is decoded again: beam search first, then sampling at
  rising temperatures with a fixed seed (both deterministic), until a result passes
  the checks; the best by Whisper's rule is kept (``better``). Beam search alone does
  not break a loop: on noisy speech tiny.en loops greedily and worse with beams
  (docs/decisions/0017-fallback-ladder.md). An attempt decodes tokens for its
  stretch's length (``rung_tokens``), and one that never ended counts as a loop
  (docs/decisions/0049-attempts-sized-to-their-stretch.md).

Both apply to the main model's own tokens: the first pass is the same with or without
an assistant, and the second chances run the same code on the same inputs, so the
final segments are the same with and without one (tests/test_recover.py).

This module holds the pure decisions (which stretches, which candidate); the
Transcriber runs the models.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..facts.whisper import PASS_TOKENS

WORD_PAD_S = 0.3  # a word covers this much speech on each side (Whisper's word ends are 20 ms-coarse, VAD pads)
CONTEXT_S = 0.3  # audio kept on each side of an uncovered stretch when it is decoded again
WORD_S = 0.5  # seconds a spoken word takes at most, on average (slow speech: 2 words/s)
MAX_ROUNDS = 3
TEMPERATURES = (0.2, 0.4, 0.6, 0.8, 1.0)  # after the beams, as openai-whisper and faster-whisper rise
SEED = 0  # sampling is seeded per attempt: the same piece gives the same result in every run
MAX_NEW_TOKENS = PASS_TOKENS  # per pass of a fallback attempt, as of every pass (openai-whisper's sample_len)
# A shorter stretch gets fewer: twice sample_len's rate over a 30 s window (~15 tokens a second, timestamps
# included; fast English is ~5) and some room besides, so that a pass of a sample looping on a 1.6 s clip stops
# at 56 tokens instead of running on to 224 (held-out seed 59: one such rung took 5 of a phone call's 30 s).
RUNG_TOKENS_PER_S = 2 * MAX_NEW_TOKENS / 30
RUNG_SLACK_TOKENS = 32


def rung_tokens(duration_s: float) -> int:
    """The most tokens a pass of one fallback attempt decodes for ``duration_s`` of audio (``MAX_NEW_TOKENS``
    from about 13 s on; fewer still where a long prompt leaves less room). An attempt with a pass that reaches
    it without end-of-text never ended: ``Candidate.ran_on``."""
    return min(MAX_NEW_TOKENS, RUNG_SLACK_TOKENS + math.ceil(RUNG_TOKENS_PER_S * duration_s))


def fallbacks(beams: int) -> list[tuple[str, int, float]]:
    """The fallback attempts in order: (label, beams, temperature). None with ``beams`` 0."""
    if not beams:
        return []
    return [(f"beam {beams}", beams, 0.0)] + [(f"temperature {t}", 1, t) for t in TEMPERATURES]


@dataclass(frozen=True)
class Candidate:
    """What Whisper's checks look at in one decoding of a piece. ``ran_on``: a fallback attempt with a pass that
    used all its tokens (``rung_tokens``) without ending; it counts as a loop whatever its compression ratio (a
    loop of a long sentence cut after two turns compresses no better than speech). The first pass's candidate
    has it only where the loop stopped it as looping (decision 0060); else it is judged by its numbers alone."""

    avg_logprob: float
    compression_ratio: float
    ran_on: bool = False

    def loops(self, compression_ratio_threshold: float) -> bool:
        return self.ran_on or self.compression_ratio > compression_ratio_threshold


def fails(c: Candidate, logprob_threshold: float, compression_ratio_threshold: float) -> bool:
    """openai-whisper's fallback trigger: the text loops, or the model is unsure of it."""
    return c.loops(compression_ratio_threshold) or c.avg_logprob < logprob_threshold


def better(first: Candidate, second: Candidate, logprob_threshold: float, compression_ratio_threshold: float) -> bool:
    """Whether ``second`` (the fallback) replaces ``first`` (greedy): the one that passes the checks;
    when both fail, the one that does not loop, then the higher average log-probability
    (faster-whisper keeps the best failing result the same way; openai-whisper keeps the last)."""
    first_fails = fails(first, logprob_threshold, compression_ratio_threshold)
    second_fails = fails(second, logprob_threshold, compression_ratio_threshold)
    if first_fails != second_fails:
        return first_fails
    if not first_fails:
        return False  # both pass: greedy was fine (not reached: the fallback runs only when greedy fails)
    first_loops = first.loops(compression_ratio_threshold)
    second_loops = second.loops(compression_ratio_threshold)
    if first_loops != second_loops:
        return first_loops
    return second.avg_logprob > first.avg_logprob


def thin(start_s: float, end_s: float, n_words: int, speech: list[tuple[float, float]], gap_s: float) -> bool:
    """A segment whose span holds more voice than its words take (``WORD_S`` each) plus a coverage gap:
    its words may leave a gap uncovered, so check it word by word. Only decides where word timings are
    computed; the words then decide."""
    return voiced(start_s, end_s, speech) > n_words * WORD_S + gap_s


def voiced(start_s: float, end_s: float, speech: list[tuple[float, float]]) -> float:
    """Seconds of ``speech`` inside [start_s, end_s]."""
    return sum(max(0.0, min(hi, end_s) - max(lo, start_s)) for lo, hi in speech)


def uncovered(
    speech: list[tuple[float, float]], covered: list[tuple[float, float]], min_gap_s: float
) -> list[tuple[float, float]]:
    """Stretches of ``speech`` no ``covered`` span touches, at least ``min_gap_s`` long."""
    cover = sorted(covered)
    out = []
    for lo, hi in speech:
        at = lo
        for a, b in cover:
            if b <= at or a >= hi:
                continue
            if a > at:
                out.append((at, a))
            at = max(at, b)
        if at < hi:
            out.append((at, hi))
    return [(round(a, 3), round(b, 3)) for a, b in out if b - a >= min_gap_s]


def clip(gap: tuple[float, float], duration_s: float, context_s: float = CONTEXT_S) -> tuple[float, float]:
    """The stretch decoded again for ``gap``: the gap with ``context_s`` either side, inside the piece."""
    return max(0.0, gap[0] - context_s), min(duration_s, gap[1] + context_s)


def belongs(start_s: float, end_s: float, gap: tuple[float, float]) -> bool:
    """Whether a segment decoded from a gap's clip is new text for the gap (not the context's words
    decoded again): at least half of it, or half of the gap, lies inside the gap."""
    inside = max(0.0, min(end_s, gap[1]) - max(start_s, gap[0]))
    return inside > 0 and (inside >= 0.5 * (end_s - start_s) or inside >= 0.5 * (gap[1] - gap[0]))


def _words(text: str) -> list[str]:
    return [w for w in ("".join(c for c in t if c.isalnum()) for t in text.lower().split()) if w]


def echoes(text: str, before: str | None, after: str | None) -> bool:
    """Whether a recovered segment's words are only its neighbours' border words again: the end of the
    segment ``before`` it and/or the start of the one ``after`` it (the clip's context decoded a second
    time, e.g. "of printing. And it was a" between "...the art of printing." and "And it was a matter...").
    Such a segment adds no speech, only duplicates."""
    words, head, tail = _words(text), _words(before or ""), _words(after or "")
    if not words:
        return False
    for k in range(len(words) + 1):  # words[:k] ends ``before``, words[k:] starts ``after``
        ends_before = k == 0 or (k <= len(head) and head[-k:] == words[:k])
        starts_after = k == len(words) or words[k:] == tail[: len(words) - k]
        if ends_before and starts_after:
            return True
    return False


def echoes_around(text: str, segments: list, gap: tuple[float, float]) -> bool:
    """``echoes`` against the neighbours of ``gap`` among a piece's ``segments`` (objects with ``start_s``
    and ``text``, in time order): the last one starting before the gap and the first one starting in or after it."""
    before = [s for s in segments if s.start_s < gap[0]]
    after = [s for s in segments if s.start_s >= gap[0]]
    return echoes(text, before[-1].text if before else None, after[0].text if after else None)


def tried(span: tuple[float, float], attempts: list[tuple[float, float]], slack_s: float = 0.1) -> bool:
    """A clip that starts where one already decoded started and ends inside it cannot bring anything
    new (the same audio decodes to the same tokens); one that starts later can (the seek moved on)."""
    return any(abs(span[0] - a) <= slack_s and span[1] <= b + slack_s for a, b in attempts)


def merge(segments: list, recovered: list) -> list:
    """Segments (objects with ``start_s``, ``end_s``, ``words``) with the recovered ones in time order;
    a segment whose span reaches into the next one ends where the next starts (a first-pass segment's
    timestamps often stretch over the speech it did not transcribe), its words clamped with it. One whose words
    all begin after a recovered segment that ends inside its span starts where that one ends instead: its text
    skipped the speech at its start (decision record 0057)."""
    in_order = sorted(recovered, key=lambda s: (s.start_s, s.end_s))
    for seg in segments:
        said = [w for w in seg.words or () if w.word.strip()]
        if not said:
            continue
        for found in in_order:
            # its words begin after the recovered speech: the text skipped the speech at the segment's start
            # (the skipped sentence's seconds went to its first word until truncate_long_words), so the segment
            # starts after it instead of ending before it (and keeps some of its span)
            if seg.start_s < found.end_s < seg.end_s and said[0].start_s >= found.end_s - WORD_PAD_S:
                seg.start_s = found.end_s
                for w in seg.words:
                    w.start_s = max(w.start_s, seg.start_s)
                    w.end_s = max(w.end_s, w.start_s)
    out = sorted([*segments, *recovered], key=lambda s: (s.start_s, s.end_s))
    for seg, following in zip(out, out[1:]):
        if seg.end_s > following.start_s:
            seg.end_s = max(seg.start_s, following.start_s)
            for w in seg.words or ():
                w.start_s = min(w.start_s, seg.end_s)
                w.end_s = min(max(w.end_s, w.start_s), seg.end_s)
    return out
