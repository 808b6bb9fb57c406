"""Whisper's logits rules, vectorised over rows *and* draft positions.

The same rules transformers' Whisper ``generate`` applies for greedy decoding —
``SuppressTokensAtBeginLogitsProcessor``, ``SuppressTokensLogitsProcessor`` and
``WhisperTimeStampLogitsProcessor``, in that order — but without their Python
loop over the whole sequence at every step: each row carries a small state
(tokens generated, whether the last two were timestamps, the last timestamp),
updated per accepted token. ``tests/test_speculative.py`` checks the result
against transformers' own processors on many random sequences.

A verification pass scores k+1 positions of a row at once; position j must be
processed as if the row already held its first j draft tokens, so the state is
stepped through the drafts (``expand``) before the masks are built.

One rule is podscribe's, not transformers' (decision 0055): a pass may not end right after the opening timestamp
of a segment that follows another (``<|a|><|b|>`` then end-of-text) while that timestamp is before ``end_from``,
the timestamp from which less than ``OPEN_END_S`` of the row's voice (as the VAD heard it; else of its audio) is
left. transformers' rule takes such an end as "the rest did not fit" and decodes the window again from ``<|a|>``:
a whole encoder pass for the piece's last seconds, which were in this window all along. The row's state carries
its ``end_from`` (0: no such rule, transformers' own rules), so the rule is the same for every search, with and
without a draft, and in the scoring pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..facts.whisper import Tokens

NEG_INF = float("-inf")


@dataclass
class RuleState:
    """Per-row state after the tokens generated so far ([B] tensors)."""

    n_generated: torch.Tensor  # tokens generated after the prompt
    last_was_timestamp: torch.Tensor  # bool: the last generated token is a timestamp
    before_last_was_timestamp: torch.Tensor  # bool: fewer than 2 generated, or the one before the last is a timestamp
    last_timestamp: torch.Tensor  # the last timestamp token generated, -1 if none
    paired: torch.Tensor  # bool: two timestamps in a row were generated (a segment closed and the next opened)
    end_from: torch.Tensor  # end-of-text right after an opening timestamp: allowed from this one on (0: always)

    @classmethod
    def initial(cls, rows: int, device, end_from: torch.Tensor | list[int] | None = None) -> RuleState:
        """The state before any token; ``end_from``: each row's (one value for all rows, or none: 0)."""
        ends = torch.zeros(rows, dtype=torch.long, device=device)
        if end_from is not None:
            ends[:] = torch.as_tensor(end_from, dtype=torch.long, device=device)
        return cls(
            torch.zeros(rows, dtype=torch.long, device=device),
            torch.zeros(rows, dtype=torch.bool, device=device),
            torch.ones(rows, dtype=torch.bool, device=device),
            torch.full((rows,), -1, dtype=torch.long, device=device),
            torch.zeros(rows, dtype=torch.bool, device=device),
            ends,
        )

    def map(self, fn) -> RuleState:
        """The same function applied to every field (selecting rows, adding a position axis, ...)."""
        return RuleState(*(fn(t) for t in vars(self).values()))

    @classmethod
    def join(cls, states: list[RuleState], dim: int, stack: bool = False) -> RuleState:
        """States concatenated (or stacked) field by field along ``dim``."""
        combine = torch.stack if stack else torch.cat
        return cls(*(combine([getattr(s, f) for s in states], dim) for f in vars(states[0])))

    def select(self, rows: torch.Tensor) -> RuleState:
        return self.map(lambda t: t[rows])

    def select_at(self, index: torch.Tensor) -> RuleState:
        """From [B, Q] states, each row's state at position index[b]."""
        pick = index[:, None]
        return self.map(lambda t: t.gather(1, pick)[:, 0])

    def positions(self) -> RuleState:
        """[B] states as [B, 1]: one position per row."""
        return self.map(lambda t: t[:, None])


class WhisperRules:
    def __init__(self, generation_config, vocab_size: int, timestamps: bool, device):
        g = generation_config
        self.timestamps = timestamps
        tokens = Tokens.of(g)
        self.eot = tokens.eot
        self.no_timestamps = tokens.no_timestamps
        self.ts_begin = tokens.timestamp_begin
        self.max_initial = getattr(g, "max_initial_timestamp_index", None)
        self.vocab = torch.arange(vocab_size, device=device)
        self.always = torch.zeros(vocab_size, dtype=torch.bool, device=device)
        if g.suppress_tokens:
            self.always[torch.tensor(g.suppress_tokens, device=device)] = True
        if timestamps:
            self.always[self.no_timestamps] = True
        self.at_begin = torch.zeros(vocab_size, dtype=torch.bool, device=device)
        if g.begin_suppress_tokens:
            self.at_begin[torch.tensor(g.begin_suppress_tokens, device=device)] = True
        if timestamps:  # the first token must be a timestamp, at most max_initial_timestamp_index
            self.at_begin |= self.vocab < self.ts_begin
            if self.max_initial is not None:
                self.at_begin |= self.vocab > self.ts_begin + self.max_initial

    # -- state ------------------------------------------------------------------

    def advance(self, s: RuleState, token: torch.Tensor) -> RuleState:
        """The state after appending ``token`` ([B]) to each row."""
        ts = token >= self.ts_begin
        return RuleState(
            s.n_generated + 1,
            ts,
            (s.n_generated == 0) | s.last_was_timestamp,
            torch.where(ts, token, s.last_timestamp),
            s.paired | (ts & s.last_was_timestamp),
            s.end_from,
        )

    def expand(self, s: RuleState, drafts: torch.Tensor) -> RuleState:
        """States for positions 0..k of a verification pass ([B, k+1] each) given drafts [B, k]."""
        states = [s]
        for j in range(drafts.shape[1]):
            states.append(self.advance(states[-1], drafts[:, j]))
        return RuleState.join(states, 1, stack=True)

    # -- masks ------------------------------------------------------------------

    def apply(self, logits: torch.Tensor, s: RuleState) -> torch.Tensor:
        """Process logits [B, Q, V] in place with states of shape [B, Q]; returns them.

        Masks are written into slices (text part, timestamp part) rather than built over the whole
        vocabulary per rule: this runs once per draft step and once per verify pass."""
        logits.masked_fill_(self.always, NEG_INF)
        first = s.n_generated == 0
        if bool(first.any()):
            logits.masked_fill_(first[..., None] & self.at_begin, NEG_INF)
        if self.timestamps:
            tb = self.ts_begin
            pair_closed = (
                s.last_was_timestamp & s.before_last_was_timestamp
            )  # two timestamps in a row: text must follow
            pair_open = s.last_was_timestamp & ~s.before_last_was_timestamp  # a segment ended: its twin or end of text
            logits[..., tb:].masked_fill_(pair_closed[..., None], NEG_INF)
            logits[..., : self.eot].masked_fill_(pair_open[..., None], NEG_INF)
            # decision 0055: no end right after a segment's opening timestamp while enough voice is left after it
            opened = pair_closed & s.paired & (s.last_timestamp < s.end_from)
            logits[..., self.eot].masked_fill_(opened, NEG_INF)
            has_ts = s.last_timestamp >= 0
            floor = torch.where(has_ts & ~pair_open, s.last_timestamp + 1, torch.where(has_ts, s.last_timestamp, tb))
            logits[..., tb:].masked_fill_(self.vocab[tb:] < floor[..., None], NEG_INF)
            logprobs = logits.float().log_softmax(-1)  # as transformers computes it, for the same comparison
            ts_mass = logprobs[..., tb:].logsumexp(-1)
            best_text = logprobs[..., :tb].max(-1).values
            logits[..., :tb].masked_fill_((ts_mass > best_text)[..., None], NEG_INF)
        return logits
