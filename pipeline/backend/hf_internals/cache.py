"""Cache objects made or retyped by hand: a cache holding cross-attention keys/values projected already
(``cache_of``), and one piece's beams sharing one copy of them (``beams_share_one_source``)."""

from __future__ import annotations

import functools
from contextlib import contextmanager

import torch
import transformers
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from transformers.models.whisper import modeling_whisper

from .attention import check_attention_layout
from .base import Patch, parameter_names, require

CACHE_LAYERS = Patch(
    "cache_of / beams_share_one_source",
    "EncoderDecoderCache(self, cross) with is_updated, DynamicCache.update(keys, values, layer_idx) creating "
    "layers[i].keys/.values, reorder_cache(beam_idx), WhisperAttention reading a cross-attention layer marked "
    "is_updated as it is, the decoder's `cache` / `encoder_hidden_states` keywords",
)


@functools.cache
def check_cache_layers(
    dynamic=DynamicCache,
    encoder_decoder=EncoderDecoderCache,
    attention_class=modeling_whisper.WhisperAttention,
    decoder_class=modeling_whisper.WhisperDecoder,
) -> None:
    """The cache API on tiny tensors, and a cross-attention layer reading a preloaded, ``is_updated`` cache as
    it is (projecting nothing) — the behaviour ``cache_of`` and ``beams_share_one_source`` build on."""
    update = parameter_names(getattr(dynamic, "update", None))[:3]
    require(
        CACHE_LAYERS,
        update == ["key_states", "value_states", "layer_idx"],
        "DynamicCache.update(key_states, value_states, layer_idx)",
    )
    require(
        CACHE_LAYERS, callable(getattr(encoder_decoder, "reorder_cache", None)), "EncoderDecoderCache.reorder_cache"
    )
    decoder_params = parameter_names(getattr(decoder_class, "forward", None))
    require(
        CACHE_LAYERS,
        "cache" in decoder_params and "encoder_hidden_states" in decoder_params,
        "WhisperDecoder.forward(..., encoder_hidden_states=, cache=)",
    )
    try:
        cache = encoder_decoder(dynamic(), dynamic())
        keys, values = torch.ones(1, 1, 2, 4), torch.full((1, 1, 2, 4), 2.0)
        cache.cross_attention_cache.update(keys, values, 0)
        layer = cache.cross_attention_cache.layers[0]
        stored = torch.equal(layer.keys, keys) and torch.equal(layer.values, values)
        flags = isinstance(cache.is_updated, dict) and cache.self_attention_cache is not None
    except (AttributeError, TypeError, IndexError) as exc:
        require(CACHE_LAYERS, False, f"the cache API as used here ({type(exc).__name__}: {exc})")
    require(CACHE_LAYERS, stored, "cross_attention_cache.layers[i].keys / .values holding what update stored")
    require(CACHE_LAYERS, flags, "EncoderDecoderCache.is_updated (a dict) and .self_attention_cache")
    require(
        CACHE_LAYERS,
        _reads_preloaded(attention_class, dynamic, encoder_decoder),
        "WhisperAttention reading an is_updated cross-attention cache as it is",
    )


def _reads_preloaded(attention_class, dynamic, encoder_decoder) -> bool:
    """A tiny cross-attention layer given preloaded keys/values (zeros) and different encoder states: its output
    is the one of the preloaded keys/values (its own projection never ran)."""
    try:
        config = transformers.WhisperConfig(d_model=8, decoder_attention_heads=2, encoder_attention_heads=2)
        config._attn_implementation = "eager"
        attn = attention_class(8, 2, is_decoder=True, layer_idx=0, config=config).eval()
        cache = encoder_decoder(dynamic(), dynamic())
        zeros = torch.zeros(1, 2, 3, 4)
        cache.cross_attention_cache.update(zeros[:, :, :0], zeros[:, :, :0], 0)
        layer = cache.cross_attention_cache.layers[0]
        layer.keys, layer.values = zeros, zeros
        cache.is_updated[0] = True
        with torch.no_grad():
            out = attn(torch.randn(1, 1, 8), key_value_states=torch.randn(1, 3, 8), cache=cache)[0]
            expected = attn.out_proj(torch.zeros(1, 1, 8))  # attention over zero values is zero
    except (AttributeError, TypeError, IndexError, KeyError, RuntimeError):
        return False
    return torch.allclose(out, expected)


def cache_of(cross) -> EncoderDecoderCache:
    """transformers' cache holding ``cross`` (a ``CrossKV``: per decoder layer [rows, heads, frames, head_dim] keys
    and values) as every layer's cross-attention keys/values, already projected (``is_updated``): its layers read
    them as they are, no copy, and project nothing."""
    check_cache_layers()
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    for idx, (k, v) in enumerate(zip(cross.keys, cross.values)):
        cache.cross_attention_cache.update(k[:, :, :0], v[:, :, :0], idx)  # creates the layer
        layer = cache.cross_attention_cache.layers[idx]
        layer.keys, layer.values = k, v
        cache.is_updated[idx] = True
    return cache


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
    (each row is quantized on its own, ``backend/quantize.py``), and in the float types wherever the matrix product
    computes a row the same way at any height (tested in float32 and int8; seen in bfloat16, not tested). Only for a
    batch of one piece: rows of other pieces differ.
    """
    check_cache_layers()
    check_attention_layout(model)

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
