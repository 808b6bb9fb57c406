"""Whisper's checks on a decoded piece: its average log-probability, compression ratio and the no-speech rule.

The average log-probability scores each token after Whisper's logits rules as the decoder chose it (transformers'
and openai-whisper's ``avg_logprob``): the decoding loop's own scores where they are the row's (int8 on the CPU, one
greedy pass that ended and kept every token: the same bits with and without a draft; decision 0056), else a
teacher-forced pass of the main model (``forced.py``) over the tokens as decoded; the compression ratio is the
text's length over its zlib-compressed length (a looping text compresses well). The no-speech rule and the second
chances (``second_chances.py``) read both.
"""

from __future__ import annotations

import zlib

import torch

from ..facts.records import PieceResult
from .forced import forced_hidden, padded, row_logits
from .generate import Generated
from .options import DecodeOptions
from .rules import RuleState, WhisperRules

# The scoring pass normalises a row this many positions at a time (and projects four times as many at a time):
# a whole row's logits, its log-softmaxes and the rules' masks are a few copies of [positions, vocabulary] float32,
# which set the peak of any batch holding a long row — an hour of audio meets more of those than 3 minutes. Each
# position is normalised on its own: int8's output projection is row-exact, so its scores are the whole row's bits;
# float32's matrix product is blocked by its number of rows, so its scores may differ from the whole row's in the
# last bit (tested), the same on every run. Projecting fewer at a time re-reads float32's output weights once per
# product, which costs time. The measurements: docs/decisions/0009-memory-of-an-hour.md.
SCORE_CHUNK = 32


def silent(r: PieceResult, o: DecodeOptions) -> bool:
    """Whisper's no-speech rule: no-speech probability high and the text unsure (or looping)."""
    return r.no_speech_prob > o.no_speech_threshold and (
        r.avg_logprob < o.logprob_threshold or r.compression_ratio > o.compression_ratio_threshold
    )


def compression_ratio(tokenizer, tokens: list[int]) -> float:
    """The text's bytes over its zlib-compressed bytes (0 for no text)."""
    text = tokenizer.decode(tokens, skip_special_tokens=True).encode()
    return len(text) / max(1, len(zlib.compress(text))) if text else 0.0


def avg_logprobs(
    model,
    rules: WhisperRules,
    eot: int,
    encoded: torch.Tensor,
    prompts: list[list[int]],
    generated: list[Generated],
    results: list[PieceResult],
    cross=None,
) -> None:
    """Average log-probability of each sequence (with its end-of-text) into ``results``.

    Each token is scored as the decoder chose it: log-softmax of the logits after Whisper's rules
    (suppressed tokens, timestamp rules; restarted at each pass), as transformers' and
    openai-whisper's avg_logprob. Raw logits would charge a prompt for the timestamp the rules force
    first (the model wants text after a prompt: -14 instead of -2 on that token, enough to push a
    short piece under the log-prob threshold). A token the rules forbid where the teacher-forced row
    differs from the decoding (the end-of-text after a row cut at the length limit) keeps its raw score.

    Where the decoding loop scored the row itself (``Generated.scores``, ``generate.loop_scores``: int8 on the CPU,
    one greedy pass that ended with end-of-text and kept every token) those scores are taken; the other rows get the
    teacher-forced pass (a later pass, a row cut at the length limit, a second chance's search, float32, a GPU), a
    row alone where others of the batch need none. The pass was 7% of a long-form run (decision 0056).
    """
    forced = []
    for b, g in enumerate(generated):
        if loop_scored(g):
            results[b].avg_logprob = float(torch.tensor(g.scores, dtype=torch.float32).mean())
        else:
            forced.append(b)
    if not forced:
        return
    if len(forced) < len(generated):  # each row alone (rare: the loop scores most)
        for b in forced:
            part = None if cross is None else cross.rows(slice(b, b + 1))
            avg_logprobs(
                model, rules, eot, encoded[b : b + 1], prompts[b : b + 1], [generated[b]], results[b : b + 1], part
            )
        return
    limit = model.config.max_target_positions + 1  # a second pass can make a row longer
    rows = [(p + g.tokens + [eot])[:limit] for p, g in zip(prompts, generated)]
    ids = padded(rows, eot, encoded.device)
    hidden = forced_hidden(model, encoded, ids[:, :-1], cross)
    for b, (r, p, row, g) in enumerate(zip(results, prompts, rows, generated)):
        n = len(row) - len(p)  # tokens scored: the sequence and its end-of-text, as far as the row holds them
        if n <= 0:
            r.avg_logprob = 0.0
            continue
        target = ids[None, b, len(p) : len(row), None]
        at_row = hidden[b : b + 1, len(p) - 1 : len(row) - 1]
        states = rule_states(rules, g, n, encoded.device)
        scores, block = [], 4 * SCORE_CHUNK  # projected 4 chunks at a time (float32's weight read)
        for at in range(0, n, SCORE_CHUNK):  # a few positions at a time: bounded temporaries
            if at % block == 0:
                logits = row_logits(model, at_row[:, at : at + block])
            part = logits[:, at % block : at % block + SCORE_CHUNK]
            chosen = target[:, at : at + SCORE_CHUNK]
            raw = part.log_softmax(-1).gather(-1, chosen)[0, :, 0]
            state = states.map(lambda t, at=at: t[:, at : at + SCORE_CHUNK])
            ruled = rules.apply(part, state).log_softmax(-1).gather(-1, chosen)[0, :, 0]
            scores.append(torch.where(torch.isinf(ruled), raw, ruled))
        r.avg_logprob = float(torch.cat(scores).mean())


def loop_scored(g: Generated) -> bool:
    """Whether the row's scores are the loop's (one pass; a score for each token and the end-of-text)."""
    return g.scores is not None and len(g.pass_lengths) <= 1 and len(g.scores) == len(g.tokens) + 1


def rule_states(rules: WhisperRules, g: Generated, n: int, device) -> RuleState:
    """The rules' state before each of the first ``n`` scored tokens ([1, n]); each pass starts afresh."""
    states, at = [], 0
    lengths = g.pass_lengths or [len(g.tokens)]
    for i, length in enumerate(lengths):
        chunk = torch.tensor([g.tokens[at : at + length]], dtype=torch.long, device=device).view(1, length)
        ends = g.pass_ends[i] if i < len(g.pass_ends) else None  # as the pass ran (decision 0055)
        expanded = rules.expand(RuleState.initial(1, device, ends), chunk)  # states before each token and after all
        keep = length + 1 if i == len(lengths) - 1 else length  # the last pass: also the end-of-text's
        states.append(expanded.map(lambda t, keep=keep: t[:, :keep]))
        at += length
    return RuleState.join(states, 1).map(lambda t: t[:, :n])
