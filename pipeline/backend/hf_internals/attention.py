"""The attention modules' layout: the weights and attributes podscribe's own decoder (``decode/kv_cache.py``)
and word timings (``decode/timing.py``) read by name."""

from __future__ import annotations

import functools

import torch

from .base import Patch, parameter_names, require

ATTENTION_LAYOUT = Patch(
    "KVCacheDecoder / word timings",
    "WhisperAttention's q_proj, k_proj, v_proj, out_proj, num_heads, head_dim and scaling = head_dim ** -0.5 "
    "(query scaled before the product), its forward taking `hidden_states` first; the decoder layer's "
    "self_attn, encoder_attn, three layer norms, fc1, fc2, activation_fn; the decoder's embed_tokens, "
    "embed_positions, layers, layer_norm; the model's proj_out",
)


ATTENTION = ("q_proj", "k_proj", "v_proj", "out_proj", "num_heads", "head_dim", "scaling")
DECODER_LAYER = (
    "self_attn",
    "encoder_attn",
    "self_attn_layer_norm",
    "encoder_attn_layer_norm",
    "final_layer_norm",
    "fc1",
    "fc2",
    "activation_fn",
)
DECODER = ("embed_tokens", "embed_positions", "layers", "layer_norm")


def decoder_of(model: torch.nn.Module) -> torch.nn.Module:
    """The Whisper decoder of a whole model, of a decoder-only draft, or the decoder itself."""
    if hasattr(model, "layers") and hasattr(model, "embed_tokens"):
        return model
    return model.get_decoder() if hasattr(model, "get_decoder") else model.model.decoder


def _missing(module, names) -> list[str]:
    return [name for name in names if not hasattr(module, name)]


@functools.cache
def _forward_takes_hidden_states(attention_class: type) -> bool:
    """Whether an attention class's ``forward`` takes ``hidden_states`` first: a signature read once per class,
    not at every batch the decoder or the word timings run."""
    return parameter_names(getattr(attention_class, "forward", None))[:1] == ["hidden_states"]


def check_attention_layout(model: torch.nn.Module) -> torch.nn.Module:
    """``model``'s decoder (a whole model, a decoder-only draft or the decoder) laid out as podscribe's decoder and
    word timings read it; returns the decoder."""
    decoder = decoder_of(model)
    missing = _missing(decoder, DECODER)
    require(ATTENTION_LAYOUT, not missing, f"the decoder's {', '.join(missing)}")
    for i, layer in enumerate(decoder.layers):
        missing = [f"layers[{i}].{name}" for name in _missing(layer, DECODER_LAYER)]
        for part in ("self_attn", "encoder_attn"):
            attn = getattr(layer, part, None)
            missing += [f"layers[{i}].{part}.{name}" for name in _missing(attn, ATTENTION)]
            if attn is not None and not missing:
                require(
                    ATTENTION_LAYOUT,
                    attn.scaling == attn.head_dim**-0.5 and _forward_takes_hidden_states(type(attn)),
                    f"layers[{i}].{part}: scaling = head_dim ** -0.5 and forward(hidden_states, ...)",
                )
        require(ATTENTION_LAYOUT, not missing, ", ".join(missing))
    owner = model if not hasattr(model, "embed_tokens") else None
    require(ATTENTION_LAYOUT, owner is None or hasattr(owner, "proj_out"), "the model's proj_out")
    return decoder
