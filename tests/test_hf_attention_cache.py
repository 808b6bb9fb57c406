"""The attention-layout check (pipeline/backend/hf_internals/attention.py) runs at every batch the decoder and the
word timings run: it reads each attention class's ``forward`` signature once, and still refuses, at every call, a
stand-in class whose ``forward`` does not take ``hidden_states`` first. A tiny random Whisper (the fast tier)."""

from __future__ import annotations

import pytest
import torch
import transformers
from transformers.models.whisper import modeling_whisper

from pipeline.backend.hf_internals import ATTENTION_LAYOUT, InternalsChanged, attention


def tiny_whisper() -> transformers.WhisperForConditionalGeneration:
    config = transformers.WhisperConfig(
        d_model=16,
        encoder_layers=1,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        num_mel_bins=8,
        max_source_positions=8,
        max_target_positions=16,
        vocab_size=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=3,
    )
    torch.manual_seed(0)
    return transformers.WhisperForConditionalGeneration(config).eval()


def attention_modules(model) -> list[torch.nn.Module]:
    return [getattr(layer, part) for layer in model.model.decoder.layers for part in ("self_attn", "encoder_attn")]


def test_forward_signature_read_once_per_class(monkeypatch):
    class Fresh(modeling_whisper.WhisperAttention):  # a class no earlier check has seen
        pass

    model = tiny_whisper()
    for attn in attention_modules(model):
        attn.__class__ = Fresh
    reads = []
    original = attention.parameter_names
    monkeypatch.setattr(attention, "parameter_names", lambda function: reads.append(function) or original(function))
    for _ in range(3):
        assert attention.check_attention_layout(model) is model.model.decoder
    assert len(reads) == 1, f"{len(reads)} signature reads for 4 modules of one class over 3 checks"


def test_a_class_whose_forward_lacks_hidden_states_is_refused_at_every_check():
    class Renamed(modeling_whisper.WhisperAttention):
        def forward(self, states, key_value_states=None, cache=None, **kwargs):
            return super().forward(states, key_value_states=key_value_states, cache=cache, **kwargs)

    model = tiny_whisper()
    model.model.decoder.layers[1].encoder_attn.__class__ = Renamed
    for _ in range(2):  # the cached answer refuses too
        with pytest.raises(InternalsChanged, match=rf"{ATTENTION_LAYOUT.name}.*layers\[1\]\.encoder_attn"):
            attention.check_attention_layout(model)
    attention.check_attention_layout(tiny_whisper())  # the installed class still passes
