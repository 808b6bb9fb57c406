"""The teacher-forced decoder pass: the main model's logits for given token rows in one forward call.

Three steps read Whisper through it — scoring (average log-probability, transcriber.py), word timings
(cross-attention of the text, decode/timing.py) and language detection / no-speech probability (the first step
after <|startoftranscript|>) — so rows are padded and fed one way everywhere. Given the batch's
``CrossKV`` (kv_cache.py), the pass reads those cross-attention keys/values instead of projecting its own.
"""

from __future__ import annotations

import torch

from ..models.torch_whisper import TorchWhisper
from .kv_cache import CrossKV


def padded(rows: list[list[int]], pad: int, device) -> torch.Tensor:
    """Rows of token ids as one [B, T] tensor, each padded at its end with ``pad`` (Whisper pads with
    end-of-text; causal attention keeps padding from touching the positions before it)."""
    width = max(map(len, rows))
    return torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=device)


def forced_hidden(model, encoded: torch.Tensor, ids: torch.Tensor, cross: CrossKV | None = None) -> torch.Tensor:
    """The decoder's last hidden states [B, T, D] for ``ids`` [B, T] over ``encoded``: a row's logits are
    ``row_logits(model, hidden[b, ...])`` of the positions it needs. Made a row at a time because the whole
    batch's logits at once, [B, T, 51865] floats and the softmax's copy, were a batch's peak memory: an
    hour-long episode, which meets such a batch sooner or later, peaked far above a 3-minute one (decision
    record 0009)."""
    given = read_cross(model, cross)
    if isinstance(model, TorchWhisper):  # the same pass without transformers (models/torch_whisper.py)
        return model.model.decoder(ids, encoded, given).last_hidden_state
    if given is None:
        return model.model.decoder(input_ids=ids, encoder_hidden_states=encoded).last_hidden_state
    return model.model.decoder(input_ids=ids, encoder_hidden_states=encoded, cache=given).last_hidden_state


def read_cross(model, cross: CrossKV | None):
    """What the pass is given to read ``cross`` through: podscribe's own model takes the ``CrossKV`` itself,
    transformers' a cache object holding it (None: the pass projects its own from the encoder states)."""
    if cross is None or isinstance(model, TorchWhisper):
        return cross
    from ..backend.hf_internals.cache import cache_of

    return cache_of(cross)


def row_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """float32 logits of hidden states from ``forced_hidden`` (any leading shape)."""
    return model.proj_out(hidden).float()


def forced_logits(model, encoded: torch.Tensor, ids: torch.Tensor, cross: CrossKV | None = None) -> torch.Tensor:
    """Logits [B, T, V] of ``model``'s decoder fed ``ids`` [B, T] over ``encoded``: position t scores the
    token after ids[:, t]. For short rows (the first step); long ones go through ``forced_hidden``."""
    return model.proj_out(forced_hidden(model, encoded, ids, cross))


def first_step_logits(
    model, encoded: torch.Tensor, sot: int, context: list[int] = (), cross: CrossKV | None = None
) -> torch.Tensor:
    """The decoder's logits at <|startoftranscript|> ([rows, vocab], float32), after ``context`` if any."""
    ids = padded([[*context, sot]] * encoded.shape[0], sot, encoded.device)
    return forced_logits(model, encoded, ids, cross)[:, -1].float()
