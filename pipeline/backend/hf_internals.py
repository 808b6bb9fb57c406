"""Every place podscribe reaches into transformers' internals, each with the check of what it relies on.

transformers is used through its public API (``from_pretrained``, ``generate``, the ASR pipeline, the
modules' forward) except where these patches go further: a hook in the encoder's first layer, the encoder's
``forward`` replaced for one ``generate`` call, cache objects made or retyped by hand, the ASR pipeline's
private generation defaults, and the attention modules' weights read directly by podscribe's own decoder
(``decode/kv_cache.py``) and word timings (``decode/timing.py``). Each is named in ``PATCHES`` with what it
relies on and the transformers versions it was checked against; its check runs at its first use (and for a
model's layout at every use: it is a few attribute reads) and raises ``InternalsChanged`` naming the patch,
what is missing and the installed version — instead of a wrong transcript or a ``KeyError`` deep inside
``generate``. The checks look at structure (the attribute, the parameter, the cache's behaviour on a tiny
tensor), not at a version string. ``tests/test_hf_internals.py`` runs each on the installed version and on a
stand-in that lacks what it needs.
"""

from __future__ import annotations

import copy
import functools
import inspect
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import transformers
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from transformers.modeling_outputs import BaseModelOutput
from transformers.models.whisper import modeling_whisper

CHECKED = "transformers 5.24.0 with torch 2.13.0"  # the versions every check below was written and run against


class InternalsChanged(RuntimeError):
    """The installed transformers lacks an internal a patch relies on."""


@dataclass(frozen=True)
class Patch:
    name: str  # the function that patches
    relies_on: str  # the internals it reads or replaces


ENCODER_STREAM = Patch(
    "contiguous_encoder_stream",
    "WhisperEncoder.layers, a WhisperEncoderLayer.forward taking the residual stream as `hidden_states` (first)",
)
REUSE_ENCODER = Patch(
    "reuse_encoder",
    "generate calling model.get_encoder() with `input_features` (first) and reading a BaseModelOutput's "
    "last_hidden_state",
)
CACHE_LAYERS = Patch(
    "cache_of / beams_share_one_source",
    "EncoderDecoderCache(self, cross) with is_updated, DynamicCache.update(keys, values, layer_idx) creating "
    "layers[i].keys/.values, reorder_cache(beam_idx), WhisperAttention reading a cross-attention layer marked "
    "is_updated as it is, the decoder's `cache` / `encoder_hidden_states` keywords",
)
ATTENTION_LAYOUT = Patch(
    "KVCacheDecoder / word timings",
    "WhisperAttention's q_proj, k_proj, v_proj, out_proj, num_heads, head_dim and scaling = head_dim ** -0.5 "
    "(query scaled before the product), its forward taking `hidden_states` first; the decoder layer's "
    "self_attn, encoder_attn, three layer norms, fc1, fc2, activation_fn; the decoder's embed_tokens, "
    "embed_positions, layers, layer_norm; the model's proj_out",
)
ASR_DEFAULTS = Patch(
    "asr_greedy_by_default / routed_model",
    "the ASR pipeline's _generation_defaults dict and its _forward calling self.model.generate",
)
PATCHES = (ENCODER_STREAM, REUSE_ENCODER, CACHE_LAYERS, ATTENTION_LAYOUT, ASR_DEFAULTS)


def _require(patch: Patch, ok: bool, missing: str) -> None:
    if not ok:
        raise InternalsChanged(
            f"{patch.name} relies on {missing}, which the installed transformers {transformers.__version__} "
            f"lacks (checked against {CHECKED}; it relies on {patch.relies_on}). Install the transformers of "
            "pyproject.toml, or adapt pipeline/backend/hf_internals.py to this version."
        )


def _params(function) -> list[str]:
    """A function's parameter names after ``self`` (through decorators that keep ``__wrapped__``)."""
    try:
        names = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return []
    return names[1:] if names[:1] == ["self"] else names


# -- the encoder's residual stream ---------------------------------------------------------------------------


def check_encoder_stream(layer_class=modeling_whisper.WhisperEncoderLayer) -> None:
    _require(
        ENCODER_STREAM,
        _params(getattr(layer_class, "forward", None))[:1] == ["hidden_states"],
        f"{getattr(layer_class, '__name__', layer_class)}.forward(hidden_states, ...)",
    )


def contiguous_encoder_stream(model: torch.nn.Module) -> torch.nn.Module:
    """The encoder's residual stream made contiguous where it starts (a hook on its first layer), in place.

    transformers' Whisper encoder adds the positions to its convolutions' output transposed, a view ([B, C, T]
    permuted to [B, T, C]); the sum keeps that layout and so does every residual sum after it, so every layer
    read, added and copied a strided stream, which slowed every residual add and so the whole encoder
    (docs/speculative-decoding.md, "Contiguous encoder residual stream"). The same bits: layer norms and
    linear layers make their input contiguous anyway (tested). Models without an encoder are left alone."""
    encoder = getattr(getattr(model, "model", None), "encoder", None)
    if encoder is None or getattr(encoder, "_contiguous_stream", False):
        return model
    _require(ENCODER_STREAM, len(getattr(encoder, "layers", ())) > 0, "the encoder's `layers`")
    check_encoder_stream(type(encoder.layers[0]))

    def contiguous(layer, args, kwargs):
        if args:
            return (args[0].contiguous(), *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": kwargs["hidden_states"].contiguous()}

    encoder.layers[0].register_forward_pre_hook(contiguous, with_kwargs=True)
    encoder._contiguous_stream = True
    return model


# -- generate reusing encoder states -------------------------------------------------------------------------


@functools.cache
def check_reuse_encoder(
    encoder_class=modeling_whisper.WhisperEncoder,
    model_class=modeling_whisper.WhisperForConditionalGeneration,
    output_class=BaseModelOutput,
) -> None:
    _require(REUSE_ENCODER, callable(getattr(model_class, "get_encoder", None)), "get_encoder()")
    _require(
        REUSE_ENCODER,
        _params(getattr(encoder_class, "forward", None))[:1] == ["input_features"],
        "WhisperEncoder.forward(input_features, ...)",
    )
    _require(
        REUSE_ENCODER,
        "last_hidden_state" in getattr(output_class, "__dataclass_fields__", {}),
        "BaseModelOutput.last_hidden_state",
    )


@contextmanager
def reuse_encoder(model, features: torch.Tensor, encoded: torch.Tensor):
    """Let ``generate`` reuse encoder states computed already for exactly these features
    (``generate`` must get ``input_features``: its batch bookkeeping slices them)."""
    check_reuse_encoder()
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


# -- cache objects -------------------------------------------------------------------------------------------


@functools.cache
def check_cache_layers(
    dynamic=DynamicCache,
    encoder_decoder=EncoderDecoderCache,
    attention_class=modeling_whisper.WhisperAttention,
    decoder_class=modeling_whisper.WhisperDecoder,
) -> None:
    """The cache API on tiny tensors, and a cross-attention layer reading a preloaded, ``is_updated`` cache as
    it is (projecting nothing) — the behaviour ``cache_of`` and ``beams_share_one_source`` build on."""
    update = _params(getattr(dynamic, "update", None))[:3]
    _require(
        CACHE_LAYERS,
        update == ["key_states", "value_states", "layer_idx"],
        "DynamicCache.update(key_states, value_states, layer_idx)",
    )
    _require(
        CACHE_LAYERS, callable(getattr(encoder_decoder, "reorder_cache", None)), "EncoderDecoderCache.reorder_cache"
    )
    decoder_params = _params(getattr(decoder_class, "forward", None))
    _require(
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
        _require(CACHE_LAYERS, False, f"the cache API as used here ({type(exc).__name__}: {exc})")
    _require(CACHE_LAYERS, stored, "cross_attention_cache.layers[i].keys / .values holding what update stored")
    _require(CACHE_LAYERS, flags, "EncoderDecoderCache.is_updated (a dict) and .self_attention_cache")
    _require(
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


# -- the attention modules' layout ---------------------------------------------------------------------------

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


def check_attention_layout(model: torch.nn.Module) -> torch.nn.Module:
    """``model``'s decoder (a whole model, a decoder-only draft or the decoder) laid out as podscribe's decoder and
    word timings read it; returns the decoder."""
    decoder = decoder_of(model)
    missing = _missing(decoder, DECODER)
    _require(ATTENTION_LAYOUT, not missing, f"the decoder's {', '.join(missing)}")
    for i, layer in enumerate(decoder.layers):
        missing = [f"layers[{i}].{name}" for name in _missing(layer, DECODER_LAYER)]
        for part in ("self_attn", "encoder_attn"):
            attn = getattr(layer, part, None)
            missing += [f"layers[{i}].{part}.{name}" for name in _missing(attn, ATTENTION)]
            if attn is not None and not missing:
                _require(
                    ATTENTION_LAYOUT,
                    attn.scaling == attn.head_dim**-0.5 and _params(attn.forward)[:1] == ["hidden_states"],
                    f"layers[{i}].{part}: scaling = head_dim ** -0.5 and forward(hidden_states, ...)",
                )
        _require(ATTENTION_LAYOUT, not missing, ", ".join(missing))
    owner = model if not hasattr(model, "embed_tokens") else None
    _require(ATTENTION_LAYOUT, owner is None or hasattr(owner, "proj_out"), "the model's proj_out")
    return decoder


# -- the ASR pipeline ----------------------------------------------------------------------------------------


@functools.cache
def check_asr_pipeline(pipeline_class=None) -> None:
    if pipeline_class is None:  # imported here: the pipelines package is heavy, and only hf_asr.py needs it
        from transformers import AutomaticSpeechRecognitionPipeline as pipeline_class
    try:
        source = inspect.getsource(pipeline_class._forward)
    except (AttributeError, OSError, TypeError):
        source = ""
    _require(
        ASR_DEFAULTS,
        "self.model.generate(" in source,
        "AutomaticSpeechRecognitionPipeline._forward calling self.model.generate",
    )


def routed_model(main: torch.nn.Module, generate) -> torch.nn.Module:
    """A view of ``main`` (weights shared, nothing copied) whose ``generate`` is ``generate``: the ASR pipeline
    calls it in place of transformers' own."""
    check_asr_pipeline()
    view = copy.copy(main)
    view.generate = generate
    return view


def asr_greedy_by_default(asr) -> None:
    """The ASR pipeline's own default is beam search (num_beams=5), which would silently turn an assistant off in
    transformers; podscribe's decoder is greedy, so its pipeline defaults to greedy (and refuses beams asked for)."""
    check_asr_pipeline()
    defaults = getattr(asr, "_generation_defaults", None)
    _require(ASR_DEFAULTS, isinstance(defaults, dict), "the pipeline's _generation_defaults dict")
    asr._generation_defaults["num_beams"] = 1


def check_all() -> None:
    """Every check against the installed transformers (the model-shaped one on a tiny random Whisper)."""
    check_encoder_stream()
    check_reuse_encoder()
    check_cache_layers()
    check_asr_pipeline()
    config = transformers.WhisperConfig(
        d_model=8, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2
    )
    model = transformers.WhisperForConditionalGeneration(config)
    check_attention_layout(model)
    contiguous_encoder_stream(model)
