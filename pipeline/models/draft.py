"""The draft's shape: a ``WhisperForCausalLM`` made of the main decoder's embeddings and some of its layers.

Distil-Whisper initialises its 2-layer decoder from the teacher's first and last layers; with ``layers=N``
the N layers are spread evenly from first to last. The draft reads the main encoder's output, so it needs
no encoder of its own and costs the encoder nothing.

A **reduced vocabulary** (``vocab_ids``): the draft proposes only from the tokens its training transcripts
used most (topped up with the tokenizer's most frequent pieces, see ``reduced_vocab``) plus every special and
timestamp token. Its output projection is those rows of the (tied) embedding
matrix — a fraction of the 51,865-row product every full step pays. The input embedding keeps every row (a
lookup costs nothing), since the main model commits tokens the draft could never propose. Saved as a plain
tied ``WhisperForCausalLM`` with the ids in ``config.podscribe_draft["vocab"]``; ``apply_draft_vocab`` gives a
loaded model its reduced projection and ``draft_vocab_ids`` (read by ``decode/kv_cache.py``, which scatters
its logits back to the full width, every other token impossible). The main model verifies with its full
vocabulary, so the output stays the main model's whatever the draft cannot say.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path

import torch
from transformers import WhisperForCausalLM, WhisperForConditionalGeneration

DRAFT_KEY = "podscribe_draft"  # the config entry that says what a distilled draft was made for


def layer_choice(n_main: int, n_draft: int) -> list[int]:
    """Which main decoder layers initialise the draft: first and last, the others evenly between."""
    if not 1 <= n_draft <= n_main:
        raise ValueError(f"a draft takes 1..{n_main} of the main decoder's layers, not {n_draft}")
    if n_draft == 1:
        return [n_main - 1]
    return sorted({round(i * (n_main - 1) / (n_draft - 1)) for i in range(n_draft)})


def make_draft(main: WhisperForConditionalGeneration, n_layers: int) -> WhisperForCausalLM:
    """A float32 decoder-only draft with the main decoder's embeddings, final norm and chosen layers."""
    chosen = layer_choice(main.config.decoder_layers, n_layers)
    config = copy.deepcopy(main.config)
    config.is_encoder_decoder = False
    config.decoder_layers = len(chosen)
    config.tie_word_embeddings = True
    config.architectures = ["WhisperForCausalLM"]
    draft = WhisperForCausalLM(config)
    src, dst = main.model.decoder, draft.model.decoder
    with torch.no_grad():
        dst.embed_tokens.weight.copy_(src.embed_tokens.weight.float())
        dst.embed_positions.weight.copy_(src.embed_positions.weight.float())
        dst.layer_norm.load_state_dict({k: v.float() for k, v in src.layer_norm.state_dict().items()})
        for i, j in enumerate(chosen):
            dst.layers[i].load_state_dict({k: v.float() for k, v in src.layers[j].state_dict().items()})
    draft.tie_weights()
    draft.generation_config = copy.deepcopy(main.generation_config)
    return draft.float()


def reduced_vocab(token_counts: dict[int, int], size: int | None, vocab_size: int, eot: int) -> list[int] | None:
    """The draft's vocabulary: ``size`` text tokens plus every special and timestamp token (ids from
    end-of-text on). None: the full vocabulary.

    The text tokens are the transcripts' most used (ties by id), then, while there is room, the lowest ids
    not yet taken: a byte-level BPE numbers its tokens in merge order, so low ids are the pieces most common
    in the tokenizer's own training text. An archive's next episode uses words its training transcripts did
    not; the frequent general pieces let the draft still propose them."""
    if size is None:
        return None
    text = sorted((t for t in token_counts if t < eot), key=lambda t: (-token_counts[t], t))[:size]
    chosen = set(text)
    fill = (t for t in range(eot) if t not in chosen)
    while len(chosen) < min(size, eot):
        chosen.add(next(fill))
    return sorted(chosen | set(range(eot, vocab_size)))


def project(draft: WhisperForCausalLM, hidden: torch.Tensor, vocab: torch.Tensor | None) -> torch.Tensor:
    """Training logits: over the reduced vocabulary's rows of the tied embedding, or all of them."""
    weight = draft.model.decoder.embed_tokens.weight
    return hidden @ (weight if vocab is None else weight[vocab]).T


def apply_draft_vocab(model: torch.nn.Module) -> torch.nn.Module:
    """A loaded distilled draft with a reduced vocabulary gets its small output projection (its own Linear,
    so int8 quantizes it like any layer) and ``draft_vocab_ids``; other models are returned as they are."""
    info = getattr(model.config, DRAFT_KEY, None) or {}
    vocab = info.get("vocab")
    if not vocab:
        return model
    ids = torch.tensor(vocab, dtype=torch.long, device=model.proj_out.weight.device)
    weight = model.proj_out.weight.detach()[ids].clone()
    small = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False, device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        small.weight.copy_(weight)
    model.proj_out = small
    model.draft_vocab_ids = ids
    return model


def check_draft_fits(model: torch.nn.Module, main_config, name: str) -> None:
    """A decoder-only draft reads the main encoder's output: its width must be the main model's."""
    if getattr(model.config, "d_model", None) != main_config.d_model:
        from .registry import ModelUnavailable

        raise ModelUnavailable(
            f"assistant {name!r} is a decoder-only draft of width {model.config.d_model}; it cannot read the "
            f"main model's encoder output (width {main_config.d_model}). Distil a draft for this model "
            "(podscribe distill) or pick another assistant."
        )


def save_draft(draft: WhisperForCausalLM, processor, out_dir: Path, info: dict) -> None:
    """A Transformers model directory in ``out_dir`` (weights, config with ``podscribe_draft``, tokenizer):
    written into ``out_dir/training/export`` first, then each file renamed into place, config.json last,
    so a directory with a config always holds a whole draft."""
    out_dir = Path(out_dir)
    tmp = out_dir / "training" / "export"
    if tmp.exists():
        shutil.rmtree(tmp)
    setattr(draft.config, DRAFT_KEY, info)
    draft.save_pretrained(tmp)
    processor.save_pretrained(tmp)
    (tmp / "podscribe_draft.json").write_text(json.dumps(info, indent=2, sort_keys=True))
    (out_dir / "config.json").unlink(missing_ok=True)
    for f in sorted(tmp.iterdir(), key=lambda f: f.name == "config.json"):
        os.replace(f, out_dir / f.name)
    tmp.rmdir()
