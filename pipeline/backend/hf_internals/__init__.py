"""Every place podscribe reaches into transformers' internals, each with the check of what it relies on.

transformers is used through its public API (``from_pretrained``, ``generate``, the ASR pipeline, the
modules' forward) except where these patches go further: a hook in the encoder's first layer, the encoder's
``forward`` replaced for one ``generate`` call, cache objects made or retyped by hand, the ASR pipeline's
private generation defaults, and the attention modules' weights read directly by podscribe's own decoder
(``decode/kv_cache.py``) and word timings (``decode/timing.py``). Each is named in ``PATCHES`` with what it
relies on and the transformers versions it was checked against, and lives with its check in the module of its
group: ``encoder.py``, ``cache.py``, ``attention.py``, ``asr_pipeline.py``, ``twin.py`` (``base.py``: the error and helpers); its check runs at its first use (and for a
model's layout at every use: it is a few attribute reads) and raises ``InternalsChanged`` naming the patch,
what is missing and the installed version — instead of a wrong transcript or a ``KeyError`` deep inside
``generate``. The checks look at structure (the attribute, the parameter, the cache's behaviour on a tiny
tensor), not at a version string. ``tests/test_hf_internals.py`` runs each on the installed version and on a
stand-in that lacks what it needs.
"""

from __future__ import annotations

import importlib

# name -> the module of this package that defines it. Imported at first use, not with the package: the encoder's
# and the cache's patches import transformers' modeling stack (3.4 s on a 2-core CPU), which the default CPU path
# no longer needs (models/torch_whisper.py), while its decoder still reads the attention layout checked here.
_WHERE = {
    "ASR_DEFAULTS": "asr_pipeline",
    "asr_greedy_by_default": "asr_pipeline",
    "check_asr_pipeline": "asr_pipeline",
    "routed_model": "asr_pipeline",
    "ATTENTION": "attention",
    "ATTENTION_LAYOUT": "attention",
    "DECODER": "attention",
    "DECODER_LAYER": "attention",
    "check_attention_layout": "attention",
    "decoder_of": "attention",
    "CHECKED": "base",
    "InternalsChanged": "base",
    "Patch": "base",
    "CACHE_LAYERS": "cache",
    "cache_of": "cache",
    "check_cache_layers": "cache",
    "ENCODER_STREAM": "encoder",
    "REUSE_ENCODER": "encoder",
    "check_encoder_stream": "encoder",
    "check_reuse_encoder": "encoder",
    "contiguous_encoder_stream": "encoder",
    "reuse_encoder": "encoder",
    "TWIN": "twin",
    "as_transformers": "twin",
}
_PATCHES = ("ENCODER_STREAM", "REUSE_ENCODER", "CACHE_LAYERS", "ATTENTION_LAYOUT", "ASR_DEFAULTS", "TWIN")

__all__ = sorted([*_WHERE, "PATCHES", "check_all"])


def __getattr__(name: str):
    if name == "PATCHES":
        return tuple(__getattr__(patch) for patch in _PATCHES)
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)


def check_all() -> None:
    """Every check against the installed transformers (the model-shaped one on a tiny random Whisper)."""
    import transformers

    from .asr_pipeline import check_asr_pipeline
    from .attention import check_attention_layout
    from .cache import check_cache_layers
    from .encoder import check_encoder_stream, check_reuse_encoder, contiguous_encoder_stream

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
