"""A transformers Whisper around another model's modules (``as_transformers``), for what runs transformers' forward.

podscribe's CPU path computes Whisper with its own modules (``models/torch_whisper.py``: transformers' layout and
parameter names, without importing transformers' modeling stack at start-up). A few steps still run transformers'
own forward: the second chances' beam search and sampling (its ``generate``), the ASR-pipeline engine, and a draft
copied from the main decoder. They get a ``WhisperForConditionalGeneration`` built on the meta device (its
configuration and generation configuration transformers' own, from the model's settings) whose leaf
modules are then replaced by the very leaves of podscribe's model — the same linear layers (int8 ones included),
norms, convolutions and embeddings; where transformers has a kind of its own (its positional embedding with its
``forward``, its GELU) it keeps its module and takes the parameters. No weight is copied, so both compute with
the same tensors, and transformers' forward around them is the one a ``from_pretrained`` model runs.
"""

from __future__ import annotations

import weakref

import torch
from torch import nn

from .base import Patch, require

TWIN = Patch(
    "as_transformers",
    "WhisperForConditionalGeneration(config) built on the meta device with the module names of podscribe's model "
    "(model.encoder/decoder.layers.N.self_attn.q_proj..., proj_out), every parameter and buffer a leaf module's",
)
_PLAIN = (nn.Linear, nn.LayerNorm, nn.Conv1d, nn.Embedding)
_twins: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # podscribe's model -> its transformers twin


def as_transformers(model: nn.Module) -> nn.Module:
    """``model`` as transformers' ``WhisperForConditionalGeneration`` (a transformers model is returned as it is):
    made once and kept, and made again once ``quantize`` has replaced the linear layers (the twin's output
    projection is no longer the model's)."""
    from transformers import PreTrainedModel

    if isinstance(model, PreTrainedModel):
        return model
    twin = _twins.get(model)
    if twin is None or twin.proj_out is not model.proj_out:
        twin = _twins[model] = _build(model)
    return twin


def _build(model: nn.Module) -> nn.Module:
    from transformers import GenerationConfig, WhisperConfig, WhisperForConditionalGeneration

    from .encoder import contiguous_encoder_stream

    with torch.device("meta"):
        twin = WhisperForConditionalGeneration(WhisperConfig.from_dict(model.config.to_dict()))
    for name, module in model.named_modules():
        if not name or any(True for _ in module.children()):
            continue  # containers: transformers' own classes stay, with their forward
        try:
            target = twin.get_submodule(name)
        except AttributeError:
            require(TWIN, False, f"a module named {name!r}")
        parent, _, attr = name.rpartition(".")
        if type(target) in _PLAIN:
            setattr(twin.get_submodule(parent), attr, module)  # the very module, quantized or not
        else:
            for pname, param in module.named_parameters(recurse=False):
                setattr(target, pname, param)
    left = [n for n, p in [*twin.named_parameters(), *twin.named_buffers()] if p.device.type == "meta"]
    require(TWIN, not left, f"modules for {', '.join(left)}")
    twin.generation_config = GenerationConfig.from_dict(model.generation_config.to_dict())
    return contiguous_encoder_stream(twin.eval())
