"""transformers' ASR pipeline, routed through podscribe's decoder.

    from pipeline.decode.hf_asr import asr_pipeline
    asr = asr_pipeline(models)                      # models from pipeline.models.load.load_models
    asr(["a.wav", "b.mp3"], batch_size=4, return_timestamps=True,
        generate_kwargs={"assistant_model": draft, "language": "en"})

transformers' own ``generate`` refuses an ``assistant_model`` at batch size > 1
and gets seq2seq assistants wrong with timestamps. Here the pipeline's model is a
view of the main model (same weights) whose ``generate`` runs podscribe's loop
(``generate.py``): greedy, any batch size, either assistant kind, the same token
ids as transformers' main-alone greedy output. Short-form input only (the
pipeline's default, or ``chunk_length_s=30``); beam search and sampling are refused.
``prompt_ids`` (``processor.get_prompt_ids(text)``) prompt every input, as in transformers.
"""

from __future__ import annotations

import copy

import torch

from ..backend import hf_internals
from ..models.load import Models
from .forced import first_step_logits
from .generate import Generator
from .transcriber import most_likely_languages

UNSUPPORTED = {"num_beams": 1, "do_sample": False, "return_token_timestamps": False, "temperature": None}


class RoutedGenerate:
    """A drop-in ``generate(input_features=..., **kwargs)`` backed by podscribe's Generator."""

    def __init__(self, models: Models):
        self.models = models
        self._generators: dict[tuple, Generator] = {}
        self.last_stats = []  # per row of the last call: DecodeStats

    def _generator(self, assistant, timestamps: bool) -> Generator:
        key = (id(assistant), timestamps)
        if key not in self._generators:
            m = self.models
            self._generators[key] = Generator(m.with_assistant(assistant, None), timestamps=timestamps)
        return self._generators[key]

    @torch.inference_mode()
    def __call__(
        self,
        input_features=None,
        attention_mask=None,
        assistant_model=None,
        return_timestamps=None,
        language=None,
        task=None,
        return_segments=False,
        prompt_ids=None,
        **kwargs,
    ):
        for key, allowed in UNSUPPORTED.items():
            if key in kwargs and kwargs.pop(key) not in (allowed, None):
                raise ValueError(f"podscribe's decoder is greedy only: {key} is not supported")
        kwargs.pop("generation_config", None)
        kwargs.pop("pad_token_id", None)
        if kwargs:
            raise ValueError(f"podscribe's decoder does not take {sorted(kwargs)}")
        main = self.models.main
        timestamps = bool(
            return_timestamps
            if return_timestamps is not None
            else getattr(main.generation_config, "return_timestamps", False)
        )
        generator = self._generator(assistant_model, timestamps)
        if input_features.shape[-1] > generator.window:
            raise ValueError("podscribe's decoder takes up to 30 s per input: use the pipeline with chunk_length_s=30")
        if generator.draft_extractor is not None:
            raise ValueError(
                "this assistant has its own mel bins: it needs the audio, which the ASR pipeline does not "
                "pass to generate; use podscribe's Transcriber (or the CLI) for it"
            )
        features = input_features.to(self.models.runtime.device, main.dtype)
        rows = features.shape[0]
        encoded = main.get_encoder()(features).last_hidden_state  # once: language detection and decoding share it
        languages = self._languages(language, encoded) if self.models.tokens.multilingual else [None] * rows
        context = [int(t) for t in prompt_ids] if prompt_ids is not None else []
        prompts = [generator.prompt(lang, task or "transcribe", context) for lang in languages]
        out = generator.generate(features, prompts, encoded)
        self.last_stats = [g.stats for g in out]
        pad = main.generation_config.pad_token_id
        width = max(1, max(len(g.tokens) for g in out))
        sequences = torch.full((rows, width), pad, dtype=torch.long, device=features.device)
        for i, g in enumerate(out):
            sequences[i, : len(g.tokens)] = torch.tensor(g.tokens, dtype=torch.long)
        if not return_segments:
            return sequences
        segments = [
            [
                {
                    "start": torch.tensor(s["start"], dtype=torch.float64),
                    "end": torch.tensor(s["end"], dtype=torch.float64),
                    "tokens": torch.tensor(s["tokens"], dtype=torch.long),
                }
                for s in g.segments
            ]
            for g in out
        ]
        return {"sequences": sequences, "segments": segments}

    def _languages(self, language, encoded) -> list[str]:
        lang_to_id = self.models.tokens.language_ids
        if language is not None:
            given = language if isinstance(language, list) else [language] * encoded.shape[0]
            return [self.models.tokens.language(lang) for lang in given]
        return most_likely_languages(first_step_logits(self.models.main, encoded, self.models.tokens.sot), lang_to_id)


def routed_model(models: Models):
    """A view of the main model (weights shared, nothing copied) whose ``generate`` is podscribe's."""
    return hf_internals.routed_model(models.transformers_main(), RoutedGenerate(models))


def asr_pipeline(models: Models, **kwargs):
    from transformers import pipeline

    extractor, tokenizer = models.processor.transformers()  # transformers' classes, which its pipeline takes
    tokenizer = copy.deepcopy(tokenizer)
    if tokenizer.pad_token is None:  # batching pads with it; Whisper pads with end-of-text
        tokenizer.pad_token = tokenizer.eos_token
    asr = pipeline(
        "automatic-speech-recognition",
        model=routed_model(models),
        tokenizer=tokenizer,
        feature_extractor=extractor,
        device=models.runtime.device,
        **kwargs,
    )
    hf_internals.asr_greedy_by_default(asr)
    return asr
