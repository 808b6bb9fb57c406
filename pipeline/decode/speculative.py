"""Greedy decoding of a batch of rows, optionally speculative: the main model's tokens, fast.

One loop serves both modes. Each round:

1. the draft (if any) proposes ``k`` tokens per row, greedily and under the same
   Whisper rules (so it rarely proposes what the rules forbid);
2. the main model scores, in **one** forward pass for all rows, each row's last
   committed token followed by its k drafts — k+1 positions per row;
3. the rules are applied to every position as if the drafts before it were
   already in the row, and the main model's greedy choice is taken at each;
4. each row keeps its drafts up to the first disagreement and then the main
   model's own token there (so every round gains at least one token per row).

The committed tokens are therefore exactly those of greedy decoding with the
main model alone: a draft token only survives where the main model would have
picked it. Rows keep their own lengths in the KV caches (see ``kv_cache.py``); a row
that rejects early costs the others nothing but the k+1-wide verify pass they
share. Finished rows (end of text, or the 448-token limit) leave the batch.

``k`` is chosen each round by ``DraftPolicy`` from what it measures (how often draft and
main agree, how long a draft step and a verify pass of each width take). With no draft,
k is 0 and a round is a plain greedy step. ``greedy`` reads as its four steps: ``_draft``,
``_verify``, ``_accepted``, ``_commit``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..facts.records import DecodeStats
from .kv_cache import KVCacheDecoder
from .rules import RuleState, WhisperRules


@dataclass
class DraftPolicy:
    """Chooses the draft length k from what it measures: the per-token agreement of draft and main
    (decayed counts) and the time of a draft step and of a verify pass of each width. Each round
    it picks, among k-2..k+2, the k with the most expected tokens per second:
    E(k) = (1 - a^(k+1)) / (1 - a) tokens for k*draft_step + verify(k+1) seconds."""

    start: int = 4
    k: int | None = None  # the current choice, carried from batch to batch
    max_draft: int = 15
    min_draft: int = 1
    agree: float = 9.0  # decayed count of drafted tokens the main model agreed with
    disagree: float = 1.0  # ... and of first disagreements
    draft_step: float | None = None  # seconds, decayed mean
    verify: dict[int, float] = field(default_factory=dict)  # width -> seconds, decayed mean

    @property
    def agreement(self) -> float:
        return self.agree / (self.agree + self.disagree)

    def observe(self, k: int, accepted: list[int], draft_s: float, verify_s: float) -> None:
        self.agree = 0.9 * self.agree + sum(min(a, k) for a in accepted)
        self.disagree = 0.9 * self.disagree + sum(a < k for a in accepted)
        self.draft_step = _mean(self.draft_step, draft_s / k)
        self.verify[k + 1] = _mean(self.verify.get(k + 1), verify_s)

    def _verify_cost(self, width: int) -> float:
        if width in self.verify:
            return self.verify[width]
        near = min(self.verify, key=lambda w: abs(w - width))  # unseen width: 10% more per extra position
        return self.verify[near] * max(1.0, 1 + 0.1 * (width - near))

    def next(self, k: int) -> int:
        if self.draft_step is None or not self.verify:
            return k
        a = min(self.agreement, 0.999)
        candidates = range(max(self.min_draft, k - 2), min(self.max_draft, k + 2) + 1)
        return max(
            candidates, key=lambda c: (1 - a ** (c + 1)) / (1 - a) / (c * self.draft_step + self._verify_cost(c + 1))
        )


def _mean(old: float | None, new: float, weight: float = 0.3) -> float:
    return new if old is None else (1 - weight) * old + weight * new


@dataclass
class Decoded:
    tokens: list[list[int]]  # per row: generated ids after the prompt, without end-of-text
    finished: list[bool]  # per row: ended with end-of-text (False: stopped at the length limit)
    stats: list[DecodeStats] = field(default_factory=list)
    # per row: each committed token's log-probability under the rules as chosen, the end-of-text's too (score.py);
    # empty unless asked for where the main decoder is row-exact (``greedy``'s ``scored``), and from search.py
    scores: list[list[float]] = field(default_factory=list)
    looped: list[bool] = field(default_factory=list)  # per row: stopped by ``greedy``'s ``looping`` (else empty)


# Where ``greedy`` asks whether a row's text loops: after its first LOOP_CHECK_TOKENS tokens and every
# LOOP_CHECK_TOKENS after, on exactly that many tokens (a round of drafts may commit past a check: the row is
# judged, and cut, at the check's count all the same, so the rule is the same with and without a draft).
LOOP_CHECK_TOKENS = 16


@torch.inference_mode()
def greedy(
    main: KVCacheDecoder,
    prompts: torch.Tensor,
    rules: WhisperRules,
    max_length: int,
    draft: KVCacheDecoder | None = None,
    policy: DraftPolicy | None = None,
    end_from: list[int] | None = None,
    scored: bool = False,
    looping: Callable[[list[int]], bool] | None = None,
) -> Decoded:
    """Decode rows whose encoder output is already loaded into ``main`` (and ``draft``) via ``start``.

    ``prompts``: [B, P] — every row's prompt has the same length. ``max_length``
    counts the prompt too (Whisper's 448). ``end_from``: each row's ``RuleState.end_from`` (decision 0055).
    ``scored``: keep each committed token's log-probability (``Decoded.scores``) where the main decoder is
    row-exact (``KVCacheDecoder.row_exact``: then they are the same bits with and without a draft; decision 0056).
    ``looping``: asked of a row's first n tokens at every ``LOOP_CHECK_TOKENS`` (no end-of-text among them);
    True ends the row there, unfinished, ``Decoded.looped`` (decision 0060).
    """
    device = prompts.device
    rows, prompt_len = prompts.shape
    policy = policy or DraftPolicy()
    k = (policy.k or policy.start) if draft is not None else 0
    capacity = max_length + policy.max_draft + 2
    tokens = torch.full((rows, capacity), rules.eot, dtype=torch.long, device=device)
    tokens[:, :prompt_len] = prompts
    length = torch.full((rows,), prompt_len, dtype=torch.long, device=device)
    state = RuleState.initial(rows, device, end_from)
    live = torch.arange(rows, device=device)  # original row index of each row still in the batch
    out_tokens: list[list[int]] = [[] for _ in range(rows)]
    out_scores: list[list[float]] = [[] for _ in range(rows)]
    finished = [False] * rows
    looped = [False] * rows
    stats = [DecodeStats() for _ in range(rows)]
    if prompt_len > 1:  # prefill all but the last prompt token; the first round feeds that one
        main.forward(prompts[:, :-1], torch.zeros(rows, dtype=torch.long, device=device))
    draft_seen = torch.zeros(rows, dtype=torch.long, device=device)  # the draft's cache holds tokens below this
    while live.numel():
        headroom = int((max_length - length).min())  # tokens every row may still add
        n_drafts = min(k, headroom - 1) if draft is not None else 0
        t0 = time.perf_counter()
        drafts = _draft(draft, tokens, length, draft_seen, state, rules, n_drafts) if n_drafts > 0 else None
        n_drafts = drafts.shape[1] if drafts is not None else 0  # fewer when every row drafted its end of text
        t1 = time.perf_counter()
        target, chosen, states = _verify(main, tokens, length, drafts, state, rules, scored and main.row_exact)
        accepted = _accepted(drafts, target)
        if drafts is not None:
            draft_seen = length + accepted.clamp(max=n_drafts - 1)
        gained, done = _commit(tokens, length, target, accepted, rules.eot, max_length)
        state = rules.advance(states.select_at(accepted), target.gather(1, accepted[:, None])[:, 0])
        length = length + gained
        for b, a, g, lp in zip(live.tolist(), accepted.tolist(), gained.tolist(), chosen):
            out_scores[b] += lp[:g]
            s = stats[b]
            s.main_calls += 1
            if n_drafts:
                s.draft_calls += n_drafts
                s.drafted += n_drafts
                s.accepted += min(a, g - 1)
        if looping is not None:
            for j, n in _looping_rows(tokens, length - gained, length, prompt_len, rules.eot, looping):
                b = int(live[j])
                length[j], done[j], looped[b] = prompt_len + n, True, True
                out_scores[b] = out_scores[b][:n]
        if drafts is not None:
            policy.observe(n_drafts, accepted.tolist(), t1 - t0, time.perf_counter() - t1)
            k = policy.k = policy.next(k)
        if bool(done.any()):
            for j in done.nonzero()[:, 0].tolist():
                b = int(live[j])
                row = tokens[j, prompt_len : int(length[j])].tolist()
                finished[b] = bool(row) and row[-1] == rules.eot
                out_tokens[b] = row[:-1] if finished[b] else row
            keep = (~done).nonzero()[:, 0]
            live, tokens, length, draft_seen = live[keep], tokens[keep], length[keep], draft_seen[keep]
            state = state.select(keep)
            if live.numel():
                main.keep(keep)
                if draft is not None:
                    draft.keep(keep)
    return Decoded(out_tokens, finished, stats, out_scores, looped if looping is not None else [])


def _looping_rows(tokens, before, after, prompt_len: int, eot: int, looping) -> list[tuple[int, int]]:
    """(row, n) for each row whose first n tokens ``looping`` calls a loop, n a multiple of ``LOOP_CHECK_TOKENS``
    that the row reached in this round (its token count went from ``before`` to ``after``, prompt included)
    without an end-of-text among those n; the first such n of the row."""
    out = []
    for j, (lo, hi) in enumerate(zip((before - prompt_len).tolist(), (after - prompt_len).tolist())):
        for n in range((lo // LOOP_CHECK_TOKENS + 1) * LOOP_CHECK_TOKENS, hi + 1, LOOP_CHECK_TOKENS):
            row = tokens[j, prompt_len : prompt_len + n].tolist()
            if eot in row:
                break
            if looping(row):
                out.append((j, n))
                break
    return out


def _verify(main: KVCacheDecoder, tokens, length, drafts, state: RuleState, rules: WhisperRules, scored: bool):
    """The main model's greedy choice at k+1 positions per row ([B, k+1]) in one forward pass: after the
    row's last committed token and after each of its k drafts, under the rules as if the drafts before that
    position were in the row. Returns the choices, with ``scored`` their log-probabilities under the rules (the
    scoring pass's ``ruled``, ``score.py``; per row a list, else empty lists: ``KVCacheDecoder.row_exact`` says
    where they are a one-token step's bits) and the rules' states at those positions."""
    feed = tokens.gather(1, (length - 1)[:, None])
    if drafts is not None:
        feed = torch.cat([feed, drafts], 1)
    logits = main.forward(feed, length - 1, one_at_a_time=drafts is not None)
    states = rules.expand(state, drafts) if drafts is not None else state.positions()
    ruled = rules.apply(logits, states)
    target = ruled.argmax(-1)
    if not scored:
        return target, [[]] * target.shape[0], states
    return target, ruled.float().log_softmax(-1).gather(-1, target[..., None])[..., 0].tolist(), states


def _accepted(drafts, target: torch.Tensor) -> torch.Tensor:
    """Per row, how many leading drafts equal the main model's own choices ([B])."""
    if drafts is None:
        return torch.zeros(target.shape[0], dtype=torch.long, device=target.device)
    return (drafts == target[:, :-1]).long().cumprod(1).sum(1)


def _commit(tokens, length, target, accepted, eot: int, max_length: int):
    """Write each row's gain into ``tokens``: its accepted drafts (equal to the main model's choices) and the
    main model's own token after them, cut after end of text and at the length limit. Returns the tokens
    gained per row and which rows are finished."""
    steps = torch.arange(target.shape[1], device=target.device)
    tokens.scatter_(1, length[:, None] + steps, target)
    is_eot = (target == eot) & (steps <= accepted[:, None])
    gained = torch.where(is_eot.any(1), is_eot.long().argmax(1) + 1, accepted + 1)
    gained = torch.minimum(gained, max_length - length)
    done = is_eot.any(1) | (length + gained >= max_length)
    return gained, done


def _draft(draft: KVCacheDecoder, tokens, length, draft_seen, state: RuleState, rules: WhisperRules, k: int):
    """k greedy draft tokens per row [B, k]. The draft first catches up on the committed tokens it has not seen."""
    window = int((length - draft_seen).max())
    start = length - window
    feed = tokens.gather(1, start[:, None] + torch.arange(window, device=tokens.device))
    logits = draft.forward(feed, start)[:, -1:]
    out = []
    ended = torch.zeros(length.shape[0], dtype=torch.bool, device=length.device)
    for i in range(k):
        token = rules.apply(logits, state.positions()).argmax(-1)[:, 0]
        out.append(token)
        ended |= token == rules.eot
        if i + 1 < k and not bool(ended.all()):  # nothing to draft past every row's end of text
            state = rules.advance(state, token)
            logits = draft.forward(token[:, None], length + i)
        else:
            break
    return torch.stack(out, 1)
