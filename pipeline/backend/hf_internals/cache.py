"""A cache object made by hand: one holding cross-attention keys/values projected already (``cache_of``), which
transformers' decoder reads as they are (the teacher-forced pass on transformers' modules)."""

from __future__ import annotations

import functools

import torch
import transformers
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from transformers.models.whisper import modeling_whisper

from .base import Patch, parameter_names, require

CACHE_LAYERS = Patch(
    "cache_of",
    "EncoderDecoderCache(self, cross) with is_updated, DynamicCache.update(keys, values, layer_idx) creating "
    "layers[i].keys/.values, WhisperAttention reading a cross-attention layer marked "
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
    it is (projecting nothing) — the behaviour ``cache_of`` builds on."""
    update = parameter_names(getattr(dynamic, "update", None))[:3]
    require(
        CACHE_LAYERS,
        update == ["key_states", "value_states", "layer_idx"],
        "DynamicCache.update(key_states, value_states, layer_idx)",
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
