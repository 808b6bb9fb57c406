"""Load a main Whisper model and an optional assistant that shares its tokenizer."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ..backend.hf_internals.twin import as_transformers
from ..backend.quantize import quantize
from ..facts.runtime import Runtime
from ..facts.whisper import Tokens
from . import torch_whisper
from .processor import Processor
from .registry import OFFLINE_HINT, SELF_INT8, ModelUnavailable, ResolvedModel, draft_for, hub_id, resolve

if TYPE_CHECKING:  # transformers' modeling stack is imported where a model needs it (models/torch_whisper.py)
    from transformers import WhisperForCausalLM, WhisperForConditionalGeneration

log = logging.getLogger("podscribe")
AUTO = "auto"
CUDA_DEFAULTS = ("openai/whisper-large-v3", "distil-whisper/distil-large-v3")
CPU_DEFAULTS = ("base", None)
AUTO_CANDIDATES = {"cuda": "distil-whisper/distil-large-v3", "cpu": SELF_INT8}  # what `auto` measures against plain


@dataclass(kw_only=True)
class Models:
    main: WhisperForConditionalGeneration | torch_whisper.TorchWhisper
    processor: Processor
    assistant: torch.nn.Module | None
    main_ref: ResolvedModel
    assistant_name: str | None
    runtime: Runtime
    auto: bool = False  # the assistant is a candidate: use it only where calibration shows it is faster

    @property
    def tokenizer(self):
        return self.processor.tokenizer

    def transformers_main(self) -> WhisperForConditionalGeneration:
        """The main model as transformers' class, for what runs transformers' own forward (its ``generate``, the
        ASR pipeline): the model itself, or one built around its very modules (``hf_internals.twin``)."""
        return as_transformers(self.main)

    def with_assistant(self, assistant: torch.nn.Module | None, name: str | None) -> Models:
        """The same main model with another draft (None: alone), used as given (not a candidate)."""
        return dataclasses.replace(self, assistant=assistant, assistant_name=name, auto=False)

    @functools.cached_property
    def tokens(self) -> Tokens:
        """The main model's special tokens and prompts (the assistant shares its vocabulary: checked at load)."""
        return Tokens.of(self.main.generation_config, self.tokenizer)

    def describe(self) -> dict:
        return {
            "model": self.main_ref.name,
            "model_sha256": self.main_ref.fingerprint,
            "assistant": f"{AUTO}:{self.assistant_name}" if self.auto else self.assistant_name,
            "runtime": self.runtime.describe(),
        }


def default_names(runtime: Runtime) -> tuple[str, str | None]:
    return CUDA_DEFAULTS if runtime.is_cuda else CPU_DEFAULTS


def draft_candidate(main: ResolvedModel, runtime: Runtime, table: dict[str, str | None]) -> str | None:
    """The draft a device's table names (``--assistant default`` or ``auto``), where it fits this main model.

    On CUDA that draft is distil-large-v3: distilled from large-v3, it shares large-v3's tokenizer and
    encoder, so it drafts for large-v3 alone. For any other main model (``--model tiny.en`` on a GPU) it would
    be refused for its vocabulary, or, offline, could not even be fetched: the run ended before its first file.
    There the default is no draft. The CPU's self-int8 draft is made from the main model itself: it fits any.
    """
    draft = table["cuda" if runtime.is_cuda else "cpu"]
    if draft is None or draft == SELF_INT8 or not runtime.is_cuda:
        return draft
    return draft if hub_id(main.name) == CUDA_DEFAULTS[0] else None


def _from_pretrained(cls, ref: ResolvedModel, runtime: Runtime, **kwargs):
    """``use_kernels=False``: transformers (5.2x) swaps layers such as Whisper's GELU for kernels fetched from the
    hub on CUDA unless told not to. podscribe runs transformers' own torch modules: an offline GPU machine cannot
    fetch a kernel, the swap changes the arithmetic every identity claim is measured on, and without the
    ``kernels`` package installed the default refused to load any model at all (the first GPU run)."""
    try:
        model = cls.from_pretrained(
            ref.location,
            dtype=runtime.dtype,
            attn_implementation=runtime.attn_implementation,
            low_cpu_mem_usage=True,
            use_kernels=False,
            **kwargs,
        )
    except OSError as exc:  # hub unreachable, unknown id, missing files
        raise ModelUnavailable(f"cannot load model {ref.name!r}: {exc}\n{OFFLINE_HINT}") from exc
    from ..backend.hf_internals.encoder import contiguous_encoder_stream

    return contiguous_encoder_stream(model.to(runtime.device).eval())


def _main_model(ref: ResolvedModel, runtime: Runtime) -> torch.nn.Module:
    """On the CPU, a local checkpoint of a plain Whisper in sdpa: ``torch_whisper`` (the same arithmetic as
    transformers', without importing its modeling stack at start-up). Anything else: transformers' model."""
    if runtime.device.type == "cpu" and runtime.attn_implementation == "sdpa":
        local = Path(ref.location) / "config.json"
        if local.is_file() and torch_whisper.loadable(ref.location, _config(ref)):
            try:
                return torch_whisper.load(ref.location, runtime.dtype)
            except ValueError as exc:  # weights of another layout: transformers' loader decides what they are
                log.info("%s: transformers' Whisper (%s)", ref.name, exc)
    from transformers import WhisperForConditionalGeneration

    return _from_pretrained(WhisperForConditionalGeneration, ref, runtime)


def _processor(ref: ResolvedModel) -> Processor:
    try:
        return Processor.from_pretrained(ref.location)
    except OSError as exc:
        raise ModelUnavailable(f"cannot load the tokenizer of {ref.name!r}: {exc}\n{OFFLINE_HINT}") from exc


def check_same_tokenizer(main_proc: Processor, other_proc: Processor, other_name: str) -> None:
    a, b = main_proc.tokenizer, other_proc.tokenizer
    if a.get_vocab() != b.get_vocab() or set(a.all_special_ids) != set(b.all_special_ids):
        raise ValueError(
            f"assistant {other_name!r} does not share the main model's tokenizer "
            f"({len(b.get_vocab())} vs {len(a.get_vocab())} tokens): speculative decoding needs the same "
            "vocabulary. Pick an assistant from the same family (e.g. distil-large-v3 for large-v3), "
            f"use --assistant {SELF_INT8}, or --assistant none."
        )


def decoder_only_assistant(main: WhisperForConditionalGeneration) -> WhisperForCausalLM:
    """A WhisperForCausalLM holding a copy of the main decoder; it reads the main encoder's output."""
    from transformers import WhisperForCausalLM

    main = as_transformers(main)
    config = copy.deepcopy(main.config)
    config.is_encoder_decoder = False
    draft = WhisperForCausalLM(config).to(dtype=main.dtype)
    draft.model.decoder = copy.deepcopy(main.model.decoder)
    draft.proj_out = copy.deepcopy(main.proj_out)
    draft.generation_config = copy.deepcopy(main.generation_config)
    return draft.to(main.device).eval()


def quantized_self_draft(main: WhisperForConditionalGeneration) -> WhisperForCausalLM:
    """The main model's own decoder with int8 dynamic-quantized linear layers (CPU), sharing the encoder."""
    draft = decoder_only_assistant(main)
    if main.device.type != "cpu":
        raise ModelUnavailable(
            f"--assistant {SELF_INT8} is a CPU draft (fbgemm int8 kernels). On {main.device.type} a draft has to be "
            "cheaper per step than the main model, and int8 weights without a fused kernel are not; use "
            "distil-whisper/distil-large-v3 (the default there) or a smaller Whisper that shares the tokenizer."
        )
    draft = draft.float()
    return quantize(draft, "draft")


ENCODER_SHAPE = (
    "d_model",
    "encoder_layers",
    "encoder_attention_heads",
    "encoder_ffn_dim",
    "num_mel_bins",
    "max_source_positions",
)


def _config(ref: ResolvedModel) -> dict:
    local = Path(ref.location) / "config.json"
    try:
        if local.is_file():
            return json.loads(local.read_text())
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(ref.location).to_dict()
    except OSError as exc:
        raise ModelUnavailable(f"cannot read the config of {ref.name!r}: {exc}\n{OFFLINE_HINT}") from exc


def assistant_class(assistant_config: dict, main_config) -> type:
    """Decoder-only (reads the main encoder's output) whenever that is possible, else seq2seq.

    A Distil-Whisper checkpoint keeps its teacher's encoder, so only its decoder is
    needed. An assistant with an encoder of its own shape (tiny drafting for large)
    runs that encoder on its own features: podscribe's loop handles both kinds
    (transformers' assisted generation mis-decodes timestamps with the second).
    """
    from transformers import WhisperForCausalLM, WhisperForConditionalGeneration

    if any("CausalLM" in a for a in assistant_config.get("architectures") or []):
        return WhisperForCausalLM
    if all(assistant_config.get(k) == getattr(main_config, k) for k in ENCODER_SHAPE):
        return WhisperForCausalLM
    return WhisperForConditionalGeneration


def load_assistant(
    name: str,
    main: WhisperForConditionalGeneration,
    processor: Processor,
    runtime: Runtime,
    cache_dir: Path | None = None,
) -> torch.nn.Module:
    from transformers import WhisperForCausalLM

    from .draft import apply_draft_vocab, check_draft_fits

    if name == SELF_INT8:
        return quantized_self_draft(main)
    ref = resolve(name, cache_dir)
    check_same_tokenizer(processor, _processor(ref), name)
    model = _from_pretrained(assistant_class(_config(ref), main.config), ref, runtime)
    if isinstance(model, WhisperForCausalLM):
        check_draft_fits(model, main.config, name)
        apply_draft_vocab(model)  # a distilled draft's reduced vocabulary, if it has one
    return model


def load_models(model: str | None, assistant: str | None, runtime: Runtime, cache_dir: Path | None = None) -> Models:
    """``model=None`` / ``assistant="default"`` pick the runtime's defaults; ``assistant="none"`` turns it off.

    With the ``int8`` compute types the main model and a loaded assistant get int8 linear layers (drafts follow
    the main model's compute type); ``self-int8`` is made from the float weights first, as it always was."""
    default_main, _ = default_names(runtime)
    main_ref = resolve(model or default_main, cache_dir)
    main = _main_model(main_ref, runtime)
    if assistant == "default":
        assistant = draft_candidate(main_ref, runtime, {"cuda": CUDA_DEFAULTS[1], "cpu": CPU_DEFAULTS[1]})
    draft, auto = None, assistant == AUTO
    if auto:  # a candidate; the job measures whether drafting with it pays (decode/auto.py)
        # a draft distilled for these very weights first (podscribe distill), else the device's default
        assistant = draft_for(main_ref, cache_dir) or draft_candidate(main_ref, runtime, AUTO_CANDIDATES)
        auto = assistant is not None  # no draft fits: plain decoding, nothing to measure
    processor = None
    if assistant in (None, "none", ""):
        assistant = None
    else:
        processor = _processor(main_ref)
        draft = load_assistant(assistant, main, processor, runtime, cache_dir)
    if runtime.int8:
        quantize(main, "int8")
        if draft is not None and assistant != SELF_INT8:
            quantize(draft, "int8")
    if runtime.weight_int8:
        quantize(main, "weight_only", runtime.dtype)
        if draft is not None and assistant != SELF_INT8:
            quantize(draft, "weight_only", runtime.dtype)
    # read while the int8 layers are packed on their thread (backend/quantize.py, decision 0048)
    processor = processor or _processor(main_ref)
    return Models(
        main=main,
        processor=processor,
        assistant=draft,
        main_ref=main_ref,
        assistant_name=assistant,
        runtime=runtime,
        auto=auto,
    )
