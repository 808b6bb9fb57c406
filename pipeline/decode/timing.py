"""Word timings: cross-attention of the alignment heads + dynamic time warping (Whisper's method).

One teacher-forced pass of the *main* model over a piece's text tokens (with
``<|notimestamps|>``, as openai/whisper's ``find_alignment`` does) gives, for
the alignment heads named in the generation config, how much each token looks
at each 20 ms audio frame; DTW through that matrix gives the frame where each
token starts. The same pass gives each token's probability. Because the pass
runs on the main model's own tokens, timings are the same whichever assistant
drafted them.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ..backend.hf_internals.attention import check_attention_layout
from ..facts.records import Word
from ..facts.whisper import ENCODER_FRAMES_PER_S
from .forced import forced_hidden, padded, row_logits

PREPEND = "\"'“¿([{-"
APPEND = "\"'.。,，!！?？:：”)]}、"


def dtw(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Monotonic path through ``cost`` (tokens x frames) from (0, 0) to the end; returns (rows, cols).

    Plain Python over lists: a piece is ~100 tokens x <= 1500 frames, a few tenths of a second.
    """
    n, m = cost.shape
    inf = float("inf")
    prev = [0.0] + [inf] * m
    trace = []
    for i in range(n):
        row_cost = cost[i].tolist()
        cur = [inf] * (m + 1)
        steps = bytearray(m + 1)
        left = inf
        for j in range(1, m + 1):
            diag, up = prev[j - 1], prev[j]
            if diag <= up and diag <= left:
                best, step = diag, 0
            elif up <= left:
                best, step = up, 1
            else:
                best, step = left, 2
            left = cur[j] = row_cost[j - 1] + best
            steps[j] = step
        trace.append(steps)
        prev = cur
    i, j, rows, cols = n, m, [], []
    while i > 0 and j > 0:
        rows.append(i - 1)
        cols.append(j - 1)
        step = trace[i - 1][j]
        if step == 0:
            i, j = i - 1, j - 1
        elif step == 1:
            i -= 1
        else:
            j -= 1
    return np.array(rows[::-1]), np.array(cols[::-1])


class _CrossAttentionTap:
    """Records the queries into the alignment layers' cross-attention, to recompute their weights."""

    def __init__(self, model, layers: list[int]):
        check_attention_layout(model)  # encoder_attn's forward(hidden_states, ...), q_proj / k_proj / scaling
        self.inputs: dict[int, torch.Tensor] = {}
        self.handles = []
        for layer in layers:
            module = model.model.decoder.layers[layer].encoder_attn
            self.handles.append(module.register_forward_pre_hook(self._hook(layer), with_kwargs=True))

    def _hook(self, layer: int):
        def hook(_module, args, kwargs):
            self.inputs[layer] = args[0] if args else kwargs["hidden_states"]

        return hook

    def close(self):
        for h in self.handles:
            h.remove()


def _head_weights(model, layer: int, heads: list[int], queries: torch.Tensor, encoded: torch.Tensor) -> torch.Tensor:
    attn = model.model.decoder.layers[layer].encoder_attn
    b, t, d = queries.shape
    n_heads, head_dim = attn.num_heads, d // attn.num_heads
    q = (attn.q_proj(queries) * attn.scaling).view(b, t, n_heads, head_dim)[:, :, heads].transpose(1, 2)
    k = attn.k_proj(encoded).view(b, encoded.shape[1], n_heads, head_dim)[:, :, heads].transpose(1, 2)
    return torch.softmax(q.float() @ k.float().transpose(-1, -2), dim=-1)  # (b, len(heads), t, frames)


def _median_filter(x: torch.Tensor, width: int = 7) -> torch.Tensor:
    pad = width // 2
    if x.shape[-1] <= pad:
        return x
    y = F.pad(x, (pad, pad), mode="reflect")
    return y.unfold(-1, width, 1).median(-1).values


def _word_groups(tokenizer, tokens: list[int]) -> list[list[int]]:
    """Tokens grouped into words: complete UTF-8 characters first, a new word at each leading space."""
    groups: list[list[int]] = []
    pending: list[int] = []
    for tok in tokens:
        pending.append(tok)
        text = tokenizer.decode(pending)
        if "\ufffd" in text:
            continue
        if not groups or text.startswith(" ") or (text.strip() and groups and not tokenizer.decode(groups[-1]).strip()):
            groups.append(pending)
        else:
            groups[-1] = groups[-1] + pending
        pending = []
    if pending:
        groups.append(pending)
    return groups


def _merge_punctuation(words: list[Word]) -> list[Word]:
    out: list[Word] = []
    carry: Word | None = None
    for w in words:
        stripped = w.word.strip()
        if stripped and all(c in PREPEND for c in stripped) and carry is None:
            carry = w
            continue
        if carry is not None:
            w = Word(
                carry.word + w.word.lstrip() if carry.word.startswith(" ") else carry.word + w.word,
                carry.start_s,
                w.end_s,
                min(carry.probability, w.probability),
            )
            carry = None
        if out and stripped and all(c in APPEND for c in stripped):
            last = out[-1]
            out[-1] = Word(
                last.word + stripped, last.start_s, max(last.end_s, w.end_s), min(last.probability, w.probability)
            )
        else:
            out.append(w)
    if carry is not None:
        out.append(carry)
    return out


@torch.inference_mode()
def word_timings(
    models, encoded: torch.Tensor, prompts: list[list[int]], texts: list[list[int]], durations_s: list[float]
) -> list[list[Word]]:
    """Words with piece-relative times and probabilities for each row of a batch.

    ``prompts``: start-of-transcript, language and task tokens per row; ``texts``:
    the text tokens (no timestamps, no end-of-text) per row.
    """
    main, tok = models.main, models.tokenizer
    gen = main.generation_config
    eot, no_ts = models.tokens.eot, models.tokens.no_timestamps
    limit = main.config.max_target_positions
    rows = [(p + [no_ts] + t + [eot])[:limit] for p, t in zip(prompts, texts)]
    ids = padded(rows, eot, encoded.device)
    heads = [tuple(h) for h in gen.alignment_heads]
    layers = sorted({layer for layer, _ in heads})
    tap = _CrossAttentionTap(main, layers)
    try:
        hidden = forced_hidden(main, encoded, ids)
    finally:
        tap.close()
    weights = torch.cat(
        [
            _head_weights(main, layer, [h for l2, h in heads if l2 == layer], tap.inputs[layer], encoded)
            for layer in layers
        ],
        dim=1,
    )  # (b, heads, tokens, frames)
    out = []
    for b, (prompt, text, duration) in enumerate(zip(prompts, texts, durations_s)):
        if not text:
            out.append([])
            continue
        n_prompt = len(prompt) + 1
        text = text[: len(rows[b]) - n_prompt - 1]
        frames = max(1, min(encoded.shape[1], int(round(duration * ENCODER_FRAMES_PER_S))))
        w = weights[b, :, :, :frames]
        w = (w - w.mean(dim=-2, keepdim=True)) / w.std(dim=-2, keepdim=True).clamp_min(1e-8)
        w = _median_filter(w).mean(0)
        matrix = w[n_prompt - 1 : n_prompt + len(text)]  # from the last prompt token: each text token + end
        token_rows, time_cols = dtw(-matrix.cpu().double().numpy())
        jumps = np.pad(np.diff(token_rows), (1, 0), constant_values=1).astype(bool)
        jump_times = time_cols[jumps] / ENCODER_FRAMES_PER_S
        at = torch.arange(n_prompt - 1, n_prompt - 1 + len(text))
        token_p = row_logits(main, hidden[b, at]).softmax(-1)[torch.arange(len(text)), torch.tensor(text)].tolist()
        words, pos = [], 0
        for group in _word_groups(tok, text):
            start = float(jump_times[min(pos, len(jump_times) - 1)])
            end = float(jump_times[min(pos + len(group), len(jump_times) - 1)])
            p = float(np.mean(token_p[pos : pos + len(group)]))
            words.append(Word(tok.decode(group), min(start, duration), min(max(end, start), duration), p))
            pos += len(group)
        out.append(_merge_punctuation(words))
    return out
