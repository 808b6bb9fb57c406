"""transformers' own Whisper ``generate``: the reference podscribe's loop must equal token for token.

The tests and ``bench/`` compare with it: greedy with and without an assistant (``speculative.py``), and the
second chances' beam search and seeded sampling (``search.py``). No job runs it (decision 0051).
Greedy (``num_beams=1`` set explicitly: the ASR pipeline would otherwise default to
beam search, which silently disables an assistant), ``return_segments=True``.
transformers' assisted generation is batch-size 1, so with an assistant rows go one by one.
``prompt_ids`` (``<|startofprev|>`` + text, as ``processor.get_prompt_ids`` makes them) go to
every row; the returned tokens and segments exclude them, as podscribe's do.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from ..backend.hf_internals.encoder import reuse_encoder
from ..backend.hf_internals.twin import as_transformers
from ..facts.whisper import Tokens


class CallCounter:
    """Counts forward calls of a module while active (proves that an assistant really ran)."""

    def __init__(self, module: torch.nn.Module | None):
        self.calls = 0
        self._module = module

    @contextmanager
    def active(self):
        if self._module is None:
            yield self
            return
        handle = self._module.register_forward_hook(lambda *_: self._bump())
        try:
            yield self
        finally:
            handle.remove()

    def _bump(self):
        self.calls += 1


def generate_kwargs(
    model,
    languages: list[str | None],
    timestamps: bool = True,
    task: str = "transcribe",
    num_beams: int = 1,
    temperature: float = 0.0,
    max_new_tokens: int | None = None,
) -> dict:
    kwargs = {"num_beams": num_beams, "do_sample": temperature > 0, "return_timestamps": timestamps}
    if max_new_tokens:
        kwargs["max_new_tokens"] = max_new_tokens
    if temperature > 0:
        kwargs["temperature"] = temperature
    if Tokens.of(model.generation_config).multilingual:
        kwargs.update(language=languages if len(set(languages)) > 1 else languages[0], task=task)
    return kwargs


def _strip(row: list[int], eot: int, prompt_len: int = 0) -> list[int]:
    row = row[prompt_len:]
    return row[: row.index(eot)] if eot in row else row


@torch.inference_mode()
def hf_generate(
    model,
    features: torch.Tensor,
    languages: list[str | None],
    timestamps: bool = True,
    assistant=None,
    encoded: torch.Tensor | None = None,
    task: str = "transcribe",
    prompt_ids: list[int] | None = None,
    num_beams: int = 1,
    temperature: float = 0.0,
    max_new_tokens: int | None = None,
):
    """Per row: (token ids after the prompt without end-of-text, segment dicts, (main calls, draft calls)).
    ``model``: transformers' or podscribe's own (``models/torch_whisper.py``), run as transformers' here."""
    model = as_transformers(model)
    eot = Tokens.of(model.generation_config).eot
    main_counter, draft_counter = CallCounter(model), CallCounter(assistant)
    if encoded is None:
        encoded = model.get_encoder()(features).last_hidden_state
    groups = [list(range(features.shape[0]))] if assistant is None else [[i] for i in range(features.shape[0])]
    out = []
    for rows in groups:
        main_counter.calls = draft_counter.calls = 0
        feats = features[rows]
        extra = {"assistant_model": assistant} if assistant is not None else {}
        if prompt_ids:
            extra["prompt_ids"] = torch.tensor(prompt_ids, dtype=torch.long, device=features.device)
        with main_counter.active(), draft_counter.active(), reuse_encoder(model, feats, encoded[rows]):
            res = model.generate(
                input_features=feats,
                return_segments=True,
                **extra,
                **generate_kwargs(
                    model, [languages[i] for i in rows], timestamps, task, num_beams, temperature, max_new_tokens
                ),
            )
        if isinstance(res, dict) and "segments" in res:
            seqs, segs = res["sequences"].tolist(), res["segments"]
            prompt_len = 0
        else:  # one pass without timestamps: a ModelOutput / tensor of prompt + tokens
            seqs = (res.sequences if hasattr(res, "sequences") else res).tolist()
            segs = [None] * len(rows)
            prompt_len = _prompt_len(model, timestamps) + len(prompt_ids or ())
        for row, seg in zip(seqs, segs):
            out.append((_strip(row, eot, prompt_len), seg, (main_counter.calls, draft_counter.calls)))
    return out


def _prompt_len(model, timestamps: bool) -> int:
    return len(Tokens.of(model.generation_config).prompt("en", timestamps=timestamps))
