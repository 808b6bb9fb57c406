"""The CT2 → Transformers converter's parameter names (pipeline/models/ct2.py) against the installed transformers:
a tiny random Whisper taken to CTranslate2's variables by CTranslate2's own converter (``WhisperLoader``, no
weights, no files) comes back under every name of a fresh ``WhisperForConditionalGeneration``'s state dict, with
the same values — so a parameter transformers renames fails here, not as a model loaded with random weights."""

from __future__ import annotations

import numpy as np
import torch
import transformers

from pipeline.models import ct2

TIED = {"proj_out.weight"}  # the output projection is the token embedding (the converter's tie_word_embeddings)


def test_converter_names_every_parameter_of_a_fresh_whisper():
    from ctranslate2.converters.transformers import WhisperLoader

    config = transformers.WhisperConfig(
        d_model=16,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=4,
        encoder_ffn_dim=32,
        decoder_ffn_dim=24,
        num_mel_bins=8,
        max_source_positions=8,
        max_target_positions=12,
        vocab_size=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=3,
    )
    torch.manual_seed(0)
    model = transformers.WhisperForConditionalGeneration(config).eval()
    spec = WhisperLoader().get_model_spec(model)
    variables = {
        name: value.detach().numpy() if torch.is_tensor(value) else np.asarray(value)
        for name, value in spec.variables().items()
    }
    state, shape = ct2.to_transformers_state_dict(ct2.CT2Model("WhisperSpec", 0, variables))
    expected = model.state_dict()
    assert set(state) == set(expected) - TIED, (
        f"missing: {sorted(set(expected) - TIED - set(state))}, unknown: {sorted(set(state) - set(expected))}"
    )
    assert all(np.array_equal(state[name], expected[name].numpy()) for name in state)
    assert shape == {key: getattr(config, key) for key in shape}
