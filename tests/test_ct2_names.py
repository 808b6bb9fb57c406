"""The CT2 → Transformers converter's parameter names (pipeline/models/ct2.py) against the installed transformers:
a tiny random Whisper taken to CTranslate2's variables by CTranslate2's own converter (``WhisperLoader``, no
weights, no files) comes back under every name of a fresh ``WhisperForConditionalGeneration``'s state dict, with
the same values — so a parameter transformers renames fails here, not as a model loaded with random weights."""

from __future__ import annotations

import numpy as np
import torch

from helpers import tiny_whisper
from pipeline.models import ct2

TIED = {"proj_out.weight"}  # the output projection is the token embedding (the converter's tie_word_embeddings)


def test_converter_names_every_parameter_of_a_fresh_whisper():
    from ctranslate2.converters.transformers import WhisperLoader

    # encoder and decoder of different depths, heads and widths: a name mapped to the wrong side fails
    model = tiny_whisper(encoder_layers=2, decoder_attention_heads=4, decoder_ffn_dim=24, max_target_positions=12)
    config = model.config
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
