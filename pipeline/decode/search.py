"""The second chances' searches in podscribe's own loop: beam search and sampling, transformers' to the token.

A piece failing Whisper's checks is decoded again with beams, then by sampling at rising temperatures
(``recover.py``). These ran through transformers' ``generate`` until decision 0051: a step of its loop took ~30 ms
for one row on a 2-core CPU against ~10 ms in podscribe's, and the first second chance of a process waited ~2.3 s
for transformers' import. Here they run on ``KVCacheDecoder`` under ``WhisperRules``, one piece at a time, as
``search(main, prompts, rules, max_length) -> Decoded`` for ``Generator.generate`` (which runs the passes):

- ``beam_search`` is transformers' vectorised beam search (``GenerationMixin._beam_search``, early stopping off,
  its length penalty): the log-probabilities processed by Whisper's rules, the top ``2 x beams`` continuations
  over all beams, finished ones kept by their length-penalised score, the running ones reordered, the same stop
  heuristic. Its beams read one copy of the piece's cross-attention keys (``KVCacheDecoder.beams``).
- ``sample`` is transformers' sampling: the rules on the logits, divided by the temperature, the top-k filter
  (transformers' default 50 where the generation config names none), softmax, ``torch.multinomial``: one draw a
  step, so a seeded run draws what transformers' draws.

Same tokens as transformers' generate of the same model (tests/test_second_chances.py compares token ids, every
rung of the ladder, float32 and int8), for the generation configs Whisper's checkpoints ship: a config that turns on
what they leave off (``early_stopping``, ``top_p``, ``min_p``, a repetition penalty) is not followed here, where
transformers would follow it. Greedy stays ``speculative.greedy`` (the first pass, with or without a draft).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..facts.records import DecodeStats
from .kv_cache import KVCacheDecoder
from .rules import RuleState, WhisperRules
from .speculative import Decoded

TOP_K = 50  # transformers' default for sampling when the generation config sets none
LENGTH_PENALTY = 1.0  # transformers' default: a finished beam's score is its log-probability over its length
NEG = -1.0e9  # transformers' "very large negative" for beams that may not be chosen


def _next_logits(main: KVCacheDecoder, tokens: torch.Tensor, length: int) -> torch.Tensor:
    """float32 logits [rows, V] after the rows' last token (all rows the same length)."""
    at = torch.full((tokens.shape[0],), length - 1, dtype=torch.long, device=tokens.device)
    return main.forward(tokens[:, length - 1 : length], at)[:, -1].float()


def _prefill(main: KVCacheDecoder, prompts: torch.Tensor) -> None:
    if prompts.shape[1] > 1:  # all but the last prompt token; the first step feeds that one
        main.forward(prompts[:, :-1], torch.zeros(prompts.shape[0], dtype=torch.long, device=prompts.device))


@torch.inference_mode()
def sample(
    main: KVCacheDecoder,
    prompts: torch.Tensor,
    rules: WhisperRules,
    max_length: int,
    temperature: float,
    top_k: int,
    end_from: list[int] | None = None,
) -> Decoded:
    """One row ([1, P] prompt) sampled at ``temperature`` from the top ``top_k`` tokens (0: all), to end-of-text or
    ``max_length`` (prompt included), drawing from torch's global generator as transformers does."""
    if prompts.shape[0] != 1:
        raise ValueError("sampling decodes one piece at a time")
    prompt_len = prompts.shape[1]
    tokens = torch.full((1, max_length), rules.eot, dtype=torch.long, device=prompts.device)
    tokens[:, :prompt_len] = prompts
    state, length, calls = RuleState.initial(1, prompts.device, end_from), prompt_len, 0
    _prefill(main, prompts)
    while length < max_length:
        logits = _next_logits(main, tokens, length)
        calls += 1
        scores = rules.apply(logits[:, None], state.positions())[:, 0] / temperature
        if top_k:
            kth = torch.topk(scores, min(top_k, scores.shape[-1]))[0][..., -1, None]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        token = torch.multinomial(F.softmax(scores, dim=-1), num_samples=1)[:, 0]
        tokens[:, length] = token
        length += 1
        state = rules.advance(state, token)
        if int(token) == rules.eot:
            break
    row = tokens[0, prompt_len:length].tolist()
    finished = bool(row) and row[-1] == rules.eot
    return Decoded([row[:-1] if finished else row], [finished], [DecodeStats(main_calls=calls)])


@torch.inference_mode()
def beam_search(
    main: KVCacheDecoder,
    prompts: torch.Tensor,
    rules: WhisperRules,
    max_length: int,
    beams: int,
    length_penalty: float = LENGTH_PENALTY,
    end_from: list[int] | None = None,
) -> Decoded:
    """One row ([1, P] prompt) decoded with ``beams`` beams to ``max_length`` (prompt included): the best finished
    sequence, as transformers' beam search returns it (``early_stopping`` False). ``main`` holds one row (``start``);
    its beams are made here."""
    if prompts.shape[0] != 1:
        raise ValueError("beam search decodes one piece at a time")
    device, eot = prompts.device, rules.eot
    prompt_len = prompts.shape[1]
    keep = 2 * beams  # top-k continuations a step: enough that ``beams`` of them did not just end
    top_beams = torch.arange(keep, device=device) < beams
    main.beams(beams)
    running = torch.full((beams, max_length), eot, dtype=torch.long, device=device)
    running[:, :prompt_len] = prompts
    running_scores = torch.full((beams,), NEG, device=device)
    running_scores[0] = 0.0  # only the first beam's tokens count at the first step (they are all the same)
    done = running.clone()  # the best finished sequences and their scores, best first after every step
    done_scores = torch.full((beams,), NEG, device=device)
    done_lengths = torch.zeros(beams, dtype=torch.long, device=device)
    is_done = torch.zeros(beams, dtype=torch.bool, device=device)
    improvable = True
    state = RuleState.initial(beams, device, end_from)  # one row's: every beam's
    _prefill(main, running[:, :prompt_len])
    length, calls = prompt_len, 0
    while True:
        log_probs = F.log_softmax(_next_logits(main, running, length), dim=-1)
        calls += 1
        log_probs = rules.apply(log_probs[:, None], state.positions())[:, 0]
        vocab = log_probs.shape[-1]
        scores = (log_probs + running_scores[:, None]).reshape(1, -1)
        top_scores, top_index = torch.topk(scores, k=keep)
        top_scores, top_index = top_scores[0], top_index[0]
        parent, token = top_index // vocab, top_index % vocab
        candidates = running[parent]
        candidates[:, length] = token
        ends = (token == eot) | (length + 1 >= max_length)
        # the running beams: the best continuations that did not just end
        order = torch.topk(top_scores + ends.float() * NEG, k=beams)[1]
        chosen = parent[order]
        running, running_scores = candidates[order], (top_scores + ends.float() * NEG)[order]
        # the finished: of the top ``beams`` continuations, those that just ended, by length-penalised score
        final = top_scores / ((length + 1 - prompt_len) ** length_penalty)
        final = final + (not improvable) * NEG + (~(ends & top_beams)).float() * NEG
        merged = torch.cat([done_scores, final])
        best = torch.topk(merged, k=beams)[1]
        done = torch.cat([done, candidates])[best]
        done_scores = merged[best]
        done_lengths = torch.cat([done_lengths, torch.full((keep,), length + 1 - prompt_len, device=device)])[best]
        is_done = torch.cat([is_done, ends & top_beams])[best]
        state = rules.advance(state.select(chosen), running[:, length])
        main.reorder(chosen)
        length += 1
        # transformers' heuristic (early_stopping False): stop once the best running beam, at the current length,
        # cannot beat the worst finished one
        best_possible = running_scores[0] / ((length - prompt_len) ** length_penalty)
        worst = done_scores.min() if bool(is_done.all()) else torch.tensor(NEG, device=device)
        improvable = improvable and bool(best_possible > worst)
        if not improvable or bool(ends.all()) or length >= max_length:
            break
    row = done[0, prompt_len : prompt_len + int(done_lengths[0])].tolist()
    finished = bool(row) and row[-1] == eot
    return Decoded([row[:-1] if finished else row], [finished], [DecodeStats(main_calls=calls)])


@dataclass(frozen=True)
class Beams:
    """A ``Generator.generate`` search: beam search with ``beams`` beams."""

    beams: int
    length_penalty: float = LENGTH_PENALTY

    def __call__(
        self, main: KVCacheDecoder, prompts: torch.Tensor, rules: WhisperRules, max_length: int, end_from=None
    ) -> Decoded:
        return beam_search(main, prompts, rules, max_length, self.beams, self.length_penalty, end_from)


@dataclass(frozen=True)
class Sampling:
    """A ``Generator.generate`` search: sampling at ``temperature`` from the ``top_k`` most likely tokens."""

    temperature: float
    top_k: int = TOP_K

    def __call__(
        self, main: KVCacheDecoder, prompts: torch.Tensor, rules: WhisperRules, max_length: int, end_from=None
    ) -> Decoded:
        return sample(main, prompts, rules, max_length, self.temperature, self.top_k, end_from)


def for_rung(generation_config, beams: int, temperature: float) -> Beams | Sampling | None:
    """A fallback rung's search, with the generation config's length penalty and top-k where it names them
    (transformers' defaults where it does not): sampling above temperature 0, else beams; None (greedy) for one
    beam, as transformers' generate runs ``num_beams=1``."""
    if temperature > 0:
        top_k = getattr(generation_config, "top_k", None)
        return Sampling(temperature, TOP_K if top_k is None else top_k)
    if beams <= 1:
        return None
    penalty = getattr(generation_config, "length_penalty", None)
    return Beams(beams, LENGTH_PENALTY if penalty is None else penalty)
