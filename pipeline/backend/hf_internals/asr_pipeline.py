"""The ASR pipeline's patches: its private generation defaults (greedy, not beams), and its model's
``generate`` routed to podscribe's decoder."""

from __future__ import annotations

import copy
import functools
import inspect

import torch

from .base import Patch, require

ASR_DEFAULTS = Patch(
    "asr_greedy_by_default / routed_model",
    "the ASR pipeline's _generation_defaults dict and its _forward calling self.model.generate",
)


@functools.cache
def check_asr_pipeline(pipeline_class=None) -> None:
    if pipeline_class is None:  # imported here: the pipelines package is heavy, and only hf_asr.py needs it
        from transformers import AutomaticSpeechRecognitionPipeline as pipeline_class
    try:
        source = inspect.getsource(pipeline_class._forward)
    except (AttributeError, OSError, TypeError):
        source = ""
    require(
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
    require(ASR_DEFAULTS, isinstance(defaults, dict), "the pipeline's _generation_defaults dict")
    asr._generation_defaults["num_beams"] = 1
