"""The encoder's patches: its residual stream made contiguous (a hook on its first layer), and ``generate``
reusing encoder states computed already (the encoder's ``forward`` replaced for one call)."""

from __future__ import annotations

import functools
from contextlib import contextmanager

import torch
from transformers.modeling_outputs import BaseModelOutput
from transformers.models.whisper import modeling_whisper

from .base import Patch, parameter_names, require

ENCODER_STREAM = Patch(
    "contiguous_encoder_stream",
    "WhisperEncoder.layers, a WhisperEncoderLayer.forward taking the residual stream as `hidden_states` (first)",
)
REUSE_ENCODER = Patch(
    "reuse_encoder",
    "generate calling model.get_encoder() with `input_features` (first) and reading a BaseModelOutput's "
    "last_hidden_state",
)


def check_encoder_stream(layer_class=modeling_whisper.WhisperEncoderLayer) -> None:
    require(
        ENCODER_STREAM,
        parameter_names(getattr(layer_class, "forward", None))[:1] == ["hidden_states"],
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
    require(ENCODER_STREAM, len(getattr(encoder, "layers", ())) > 0, "the encoder's `layers`")
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
    require(REUSE_ENCODER, callable(getattr(model_class, "get_encoder", None)), "get_encoder()")
    require(
        REUSE_ENCODER,
        parameter_names(getattr(encoder_class, "forward", None))[:1] == ["input_features"],
        "WhisperEncoder.forward(input_features, ...)",
    )
    require(
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
