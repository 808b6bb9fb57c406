"""Every place podscribe reaches into transformers' internals, each with the check of what it relies on.

transformers is used through its public API (``from_pretrained``, ``generate``, the ASR pipeline, the
modules' forward) except where these patches go further: a hook in the encoder's first layer, the encoder's
``forward`` replaced for one ``generate`` call, cache objects made or retyped by hand, the ASR pipeline's
private generation defaults, and the attention modules' weights read directly by podscribe's own decoder
(``decode/kv_cache.py``) and word timings (``decode/timing.py``). Each is named in ``PATCHES`` with what it
relies on and the transformers versions it was checked against, and lives with its check in the module of its
group: ``encoder.py``, ``cache.py``, ``attention.py``, ``asr_pipeline.py`` (``base.py``: the error and helpers); its check runs at its first use (and for a
model's layout at every use: it is a few attribute reads) and raises ``InternalsChanged`` naming the patch,
what is missing and the installed version — instead of a wrong transcript or a ``KeyError`` deep inside
``generate``. The checks look at structure (the attribute, the parameter, the cache's behaviour on a tiny
tensor), not at a version string. ``tests/test_hf_internals.py`` runs each on the installed version and on a
stand-in that lacks what it needs.
"""

from __future__ import annotations

import transformers

from .asr_pipeline import ASR_DEFAULTS, asr_greedy_by_default, check_asr_pipeline, routed_model
from .attention import ATTENTION, ATTENTION_LAYOUT, DECODER, DECODER_LAYER, check_attention_layout, decoder_of
from .base import CHECKED, InternalsChanged, Patch
from .cache import CACHE_LAYERS, beams_share_one_source, cache_of, check_cache_layers
from .encoder import (
    ENCODER_STREAM,
    REUSE_ENCODER,
    check_encoder_stream,
    check_reuse_encoder,
    contiguous_encoder_stream,
    reuse_encoder,
)

PATCHES = (ENCODER_STREAM, REUSE_ENCODER, CACHE_LAYERS, ATTENTION_LAYOUT, ASR_DEFAULTS)

__all__ = [
    "ASR_DEFAULTS",
    "ATTENTION",
    "ATTENTION_LAYOUT",
    "CACHE_LAYERS",
    "CHECKED",
    "DECODER",
    "DECODER_LAYER",
    "ENCODER_STREAM",
    "PATCHES",
    "REUSE_ENCODER",
    "InternalsChanged",
    "Patch",
    "asr_greedy_by_default",
    "beams_share_one_source",
    "cache_of",
    "check_all",
    "check_asr_pipeline",
    "check_attention_layout",
    "check_cache_layers",
    "check_encoder_stream",
    "check_reuse_encoder",
    "contiguous_encoder_stream",
    "decoder_of",
    "reuse_encoder",
    "routed_model",
]


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
