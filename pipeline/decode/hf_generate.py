"""transformers' own Whisper ``generate``, in two roles.

In the pipeline it runs the fallback of pieces that fail Whisper's checks (``recover.py``: beam search,
then seeded sampling), main model alone, a piece at a time; there its beams share the piece's
cross-attention cache (``beams_share_one_source``). For the tests and ``bench/`` it is the reference
podscribe's own loop must equal token for token.
Greedy (``num_beams=1`` set explicitly: the ASR pipeline would otherwise default to
beam search, which silently disables an assistant), ``return_segments=True``.
transformers' assisted generation is batch-size 1, so with an assistant rows go one by one.
``prompt_ids`` (``<|startofprev|>`` + text, as ``processor.get_prompt_ids`` makes them) go to
every row; the returned tokens and segments exclude them, as podscribe's do.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext

import torch
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from transformers.modeling_outputs import BaseModelOutput

from ..whisper import Tokens


class CallCounter:
    """Counts forward calls of a module while active (proves that an assistant really ran)."""

    def __init__(self, module: torch.nn.Module | None):
        self.calls = 0
        self._module = module

    @contextmanager
    def active(self):
        if self._module is None:
            yield self
            return
        handle = self._module.register_forward_hook(lambda *_: self._bump())
        try:
            yield self
        finally:
            handle.remove()

    def _bump(self):
        self.calls += 1


@contextmanager
def reuse_encoder(model, features: torch.Tensor, encoded: torch.Tensor):
    """Let ``generate`` reuse encoder states computed already for exactly these features
    (``generate`` must get ``input_features``: its batch bookkeeping slices them)."""
    encoder = model.get_encoder()
    original = encoder.forward

    def forward(input_features=None, *args, **kwargs):
        if (
            input_features is not None
            and input_features.shape == features.shape
            and torch.equal(input_features, features)
        ):
            return BaseModelOutput(last_hidden_state=encoded)
        return original(input_features, *args, **kwargs)

    encoder.forward = forward
    try:
        yield
    finally:
        del encoder.forward


class _OneRowCrossCache(DynamicCache):
    """The cross-attention cache of one piece's beams: one row stored, every beam given a view of it."""

    def update(self, keys, values, layer_idx, *args, **kwargs):
        one_keys, one_values = super().update(keys[:1], values[:1], layer_idx, *args, **kwargs)
        layer = self.layers[layer_idx]
        layer.keys, layer.values = one_keys.expand_as(keys), one_values.expand_as(values)
        return layer.keys, layer.values


class _OneSourceCache(EncoderDecoderCache):
    def reorder_cache(self, beam_idx):
        self.self_attention_cache.reorder_cache(beam_idx)  # the cross-attention row is every beam's


@contextmanager
def beams_share_one_source(model):
    """Beam search over one piece: its beams attend to one copy of the piece's cross-attention keys and values.

    transformers' beam search repeats the encoder output per beam, projects and caches cross-attention keys and values
    for every beam, and reorders (copies) all of them at every step, though the beams of one piece hold the same rows:
    held and copied at every step, a large share of a fallback's time on a CPU and the memory peak of a batch that
    falls back (decision record 0009). Here, at the first decoder call, each layer projects the piece's encoder states
    once (the first row: every beam's row is the same piece) and caches that one row; every beam gets a view of it,
    and the reorder leaves it alone (only the self-attention cache follows the beams).

    The tokens are transformers' own whenever a row's projection does not depend on the rows beside it: always in int8
    (each row is quantized on its own, ``models/int8.py``), and in the float types wherever the matrix product
    computes a row the same way at any height (tested in float32 and int8; seen in bfloat16, not tested). Only for a
    batch of one piece: rows of other pieces differ.
    """

    def share(decoder, args, kwargs):
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        if type(cache) is not EncoderDecoderCache or type(cache.cross_attention_cache) is not DynamicCache:
            return  # another kind of cache, or this one is shared already
        cache.__class__, cache.cross_attention_cache.__class__ = _OneSourceCache, _OneRowCrossCache
        states = kwargs.get("encoder_hidden_states")  # [beams, frames, width], the piece's repeated per beam
        if states is None or not hasattr(cache, "is_updated") or any(cache.is_updated.values()):
            return  # the layers project all beams' rows (and the cache keeps one) as transformers' code does
        beams = states.shape[0]
        for idx, layer in enumerate(decoder.layers):
            attn = layer.encoder_attn
            heads = (1, -1, attn.num_heads, attn.head_dim)
            keys = attn.k_proj(states[:1]).view(heads).transpose(1, 2).contiguous()
            values = attn.v_proj(states[:1]).view(heads).transpose(1, 2).contiguous()
            cache.cross_attention_cache.update(keys.expand(beams, -1, -1, -1), values.expand(beams, -1, -1, -1), idx)
            cache.is_updated[idx] = True

    handle = model.get_decoder().register_forward_pre_hook(share, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


def generate_kwargs(
    model,
    languages: list[str | None],
    timestamps: bool = True,
    task: str = "transcribe",
    num_beams: int = 1,
    temperature: float = 0.0,
    max_new_tokens: int | None = None,
) -> dict:
    kwargs = {"num_beams": num_beams, "do_sample": temperature > 0, "return_timestamps": timestamps}
    if max_new_tokens:
        kwargs["max_new_tokens"] = max_new_tokens
    if temperature > 0:
        kwargs["temperature"] = temperature
    if Tokens.of(model.generation_config).multilingual:
        kwargs.update(language=languages if len(set(languages)) > 1 else languages[0], task=task)
    return kwargs


def _strip(row: list[int], eot: int, prompt_len: int = 0) -> list[int]:
    row = row[prompt_len:]
    return row[: row.index(eot)] if eot in row else row


@torch.inference_mode()
def hf_generate(
    model,
    features: torch.Tensor,
    languages: list[str | None],
    timestamps: bool = True,
    assistant=None,
    encoded: torch.Tensor | None = None,
    task: str = "transcribe",
    prompt_ids: list[int] | None = None,
    num_beams: int = 1,
    temperature: float = 0.0,
    max_new_tokens: int | None = None,
):
    """Per row: (token ids after the prompt without end-of-text, segment dicts, (main calls, draft calls))."""
    eot = Tokens.of(model.generation_config).eot
    main_counter, draft_counter = CallCounter(model), CallCounter(assistant)
    if encoded is None:
        encoded = model.get_encoder()(features).last_hidden_state
    groups = [list(range(features.shape[0]))] if assistant is None else [[i] for i in range(features.shape[0])]
    out = []
    for rows in groups:
        main_counter.calls = draft_counter.calls = 0
        feats = features[rows]
        extra = {"assistant_model": assistant} if assistant is not None else {}
        if prompt_ids:
            extra["prompt_ids"] = torch.tensor(prompt_ids, dtype=torch.long, device=features.device)
        one_source = beams_share_one_source(model) if num_beams > 1 and len(rows) == 1 else nullcontext()
        with main_counter.active(), draft_counter.active(), reuse_encoder(model, feats, encoded[rows]), one_source:
            res = model.generate(
                input_features=feats,
                return_segments=True,
                **extra,
                **generate_kwargs(
                    model, [languages[i] for i in rows], timestamps, task, num_beams, temperature, max_new_tokens
                ),
            )
        if isinstance(res, dict) and "segments" in res:
            seqs, segs = res["sequences"].tolist(), res["segments"]
            prompt_len = 0
        else:  # one pass without timestamps: a ModelOutput / tensor of prompt + tokens
            seqs = (res.sequences if hasattr(res, "sequences") else res).tolist()
            segs = [None] * len(rows)
            prompt_len = _prompt_len(model, timestamps) + len(prompt_ids or ())
        for row, seg in zip(seqs, segs):
            out.append((_strip(row, eot, prompt_len), seg, (main_counter.calls, draft_counter.calls)))
    return out


def _prompt_len(model, timestamps: bool) -> int:
    return len(Tokens.of(model.generation_config).prompt("en", timestamps=timestamps))
