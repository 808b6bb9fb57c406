"""The patches into transformers' internals (pipeline/backend/hf_internals/): each check passes on the installed
transformers and fails with a clear error — naming the patch, what is missing and the installed version — on a
stand-in that lacks what the patch relies on. Tiny random Whisper modules only (no weights: the fast tier)."""

from __future__ import annotations

import copy

import pytest
import torch
import transformers
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from transformers.models.whisper import modeling_whisper

from helpers import tiny_whisper
from pipeline.backend import hf_internals as hf
from pipeline.backend.hf_internals import InternalsChanged
from pipeline.backend.hf_internals import attention as hf_attention


def changed(patch: hf.Patch, *words: str):
    """The error a check must give: the patch, the installed version, and what is missing."""
    pattern = rf"{patch.name}.*transformers {transformers.__version__}"
    return pytest.raises(InternalsChanged, match=pattern), words


def assert_names(error, words) -> None:
    message = str(error.value)
    assert all(word in message for word in words), message


def test_every_check_passes_on_the_installed_transformers():
    hf.check_all()
    assert len(hf.PATCHES) == 6


def test_encoder_stream_check():
    model = hf.contiguous_encoder_stream(tiny_whisper())
    assert len(model.model.encoder.layers[0]._forward_pre_hooks) == 1
    hf.contiguous_encoder_stream(model)  # once only
    assert len(model.model.encoder.layers[0]._forward_pre_hooks) == 1

    class Layer(torch.nn.Module):
        def forward(self, inputs, attention_mask=None):
            return inputs

    raises, words = changed(hf.ENCODER_STREAM, "Layer.forward(hidden_states")
    with raises as error:
        hf.check_encoder_stream(Layer)
    assert_names(error, words)
    other = tiny_whisper()
    other.model.encoder.layers[0] = Layer()
    with pytest.raises(InternalsChanged, match="contiguous_encoder_stream"):
        hf.contiguous_encoder_stream(other)


def test_reuse_encoder_check():
    hf.check_reuse_encoder()

    class Encoder:
        def forward(self, features, attention_mask=None): ...

    raises, words = changed(hf.REUSE_ENCODER, "WhisperEncoder.forward(input_features")
    with raises as error:
        hf.check_reuse_encoder(encoder_class=Encoder)
    assert_names(error, words)

    class Model:  # no get_encoder
        pass

    with pytest.raises(InternalsChanged, match="get_encoder"):
        hf.check_reuse_encoder(model_class=Model)


def test_cache_layers_check():
    """The installed caches pass, and ``cache_of`` builds a cache the decoder reads as it is: the same hidden
    states as when the decoder projects the keys/values itself. Stand-ins: a cache whose layers do not hold what
    ``update`` stored, an EncoderDecoderCache without ``is_updated``, an attention that projects anyway."""
    hf.check_cache_layers()
    model = tiny_whisper()
    encoded = torch.randn(2, 8, 16)
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    from pipeline.decode.kv_cache import CrossKV

    with torch.no_grad():
        cross = CrossKV.project(model, encoded)
        ours = model.model.decoder(input_ids=ids, encoder_hidden_states=encoded, cache=hf.cache_of(cross))
        theirs = model.model.decoder(input_ids=ids, encoder_hidden_states=encoded)
    assert torch.allclose(ours.last_hidden_state, theirs.last_hidden_state, atol=1e-6)

    class Forgetful(DynamicCache):
        def update(self, key_states, value_states, layer_idx, *args, **kwargs):
            return super().update(key_states * 0, value_states * 0, layer_idx, *args, **kwargs)

    raises, words = changed(hf.CACHE_LAYERS, ".keys / .values")
    with raises as error:
        hf.check_cache_layers(dynamic=Forgetful)
    assert_names(error, words)

    class NoFlags(EncoderDecoderCache):
        def __init__(self, *caches):
            super().__init__(*caches)
            del self.is_updated

    with pytest.raises(InternalsChanged, match="is_updated"):
        hf.check_cache_layers(encoder_decoder=NoFlags)

    class Projecting(modeling_whisper.WhisperAttention):
        def forward(self, hidden_states, key_value_states=None, cache=None, **kwargs):
            return super().forward(hidden_states, key_value_states=key_value_states, cache=None, **kwargs)

    with pytest.raises(InternalsChanged, match="reading an is_updated cross-attention cache"):
        hf.check_cache_layers(attention_class=Projecting)

    class OldDecoder:
        def forward(self, input_ids=None, encoder_hidden_states=None, past_key_values=None): ...

    with pytest.raises(InternalsChanged, match="cache="):
        hf.check_cache_layers(decoder_class=OldDecoder)


def test_attention_layout_check():
    """podscribe's decoder and the word timings read the attention modules' weights by name: a model laid out
    otherwise is refused when the decoder is built, with the missing name in the message."""
    from pipeline.decode.kv_cache import KVCacheDecoder

    model = tiny_whisper()
    assert hf.check_attention_layout(model) is model.model.decoder
    KVCacheDecoder(model)
    renamed = copy.deepcopy(model)
    attn = renamed.model.decoder.layers[1].encoder_attn
    attn.query = attn.q_proj
    del attn.q_proj
    raises, words = changed(hf.ATTENTION_LAYOUT, "layers[1].encoder_attn.q_proj")
    with raises as error:
        KVCacheDecoder(renamed)
    assert_names(error, words)
    rescaled = copy.deepcopy(model)
    rescaled.model.decoder.layers[0].self_attn.scaling = 1.0  # scaled after the product instead
    with pytest.raises(InternalsChanged, match=r"layers\[0\].self_attn: scaling = head_dim \*\* -0.5"):
        hf.check_attention_layout(rescaled)
    flat = copy.deepcopy(model)
    del flat.proj_out
    with pytest.raises(InternalsChanged, match="proj_out"):
        hf.check_attention_layout(flat)


def test_asr_pipeline_check():
    hf.check_asr_pipeline()

    class Pipeline:
        def _forward(self, model_inputs, **generate_kwargs):
            return self.model(**model_inputs)

    raises, words = changed(hf.ASR_DEFAULTS, "self.model.generate")
    with raises as error:
        hf.check_asr_pipeline(Pipeline)
    assert_names(error, words)

    class Defaults:
        _generation_defaults = {"num_beams": 5}

    hf.asr_greedy_by_default(asr := Defaults())
    assert asr._generation_defaults == {"num_beams": 1}
    with pytest.raises(InternalsChanged, match="_generation_defaults"):
        hf.asr_greedy_by_default(object())


def test_language_names_are_transformers_own():
    """The language names the decoder accepts come from languages.py (no transformers internal): the same table as
    transformers' TO_LANGUAGE_CODE."""
    from transformers.models.whisper.tokenization_whisper import TO_LANGUAGE_CODE

    from pipeline.facts.languages import CODE_OF_NAME

    assert CODE_OF_NAME == TO_LANGUAGE_CODE


def attention_modules(model) -> list[torch.nn.Module]:
    return [getattr(layer, part) for layer in model.model.decoder.layers for part in ("self_attn", "encoder_attn")]


def test_forward_signature_read_once_per_class(monkeypatch):
    class Fresh(modeling_whisper.WhisperAttention):  # a class no earlier check has seen
        pass

    model = tiny_whisper()
    for attn in attention_modules(model):
        attn.__class__ = Fresh
    reads = []
    original = hf_attention.parameter_names
    monkeypatch.setattr(hf_attention, "parameter_names", lambda function: reads.append(function) or original(function))
    for _ in range(3):
        assert hf_attention.check_attention_layout(model) is model.model.decoder
    assert len(reads) == 1, f"{len(reads)} signature reads for 4 modules of one class over 3 checks"


def test_a_class_whose_forward_lacks_hidden_states_is_refused_at_every_check():
    class Renamed(modeling_whisper.WhisperAttention):
        def forward(self, states, key_value_states=None, cache=None, **kwargs):
            return super().forward(states, key_value_states=key_value_states, cache=cache, **kwargs)

    model = tiny_whisper()
    model.model.decoder.layers[1].encoder_attn.__class__ = Renamed
    for _ in range(2):  # the cached answer refuses too
        with pytest.raises(InternalsChanged, match=rf"{hf.ATTENTION_LAYOUT.name}.*layers\[1\]\.encoder_attn"):
            hf_attention.check_attention_layout(model)
    hf_attention.check_attention_layout(tiny_whisper())  # the installed class still passes


def test_twin_check():
    """podscribe's own Whisper (models/torch_whisper.py) gets a transformers twin sharing its modules; a model with
    a module transformers' class has no place for is refused, naming it."""
    from pipeline.models.torch_whisper import TorchWhisper

    theirs = tiny_whisper()
    ours = TorchWhisper(theirs.config, theirs.generation_config)
    ours.load_state_dict(theirs.state_dict())
    twin = hf.as_transformers(ours)
    assert isinstance(twin, modeling_whisper.WhisperForConditionalGeneration) and twin.proj_out is ours.proj_out
    assert hf.as_transformers(theirs) is theirs
    features = torch.randn(1, 8, 16)
    with torch.no_grad():
        assert torch.equal(
            twin.get_encoder()(features).last_hidden_state, theirs.get_encoder()(features).last_hidden_state
        )

    other = TorchWhisper(theirs.config, theirs.generation_config)
    other.model.decoder.extra = torch.nn.Linear(2, 2)
    raises, words = changed(hf.TWIN, "model.decoder.extra")
    with raises as error:
        hf.as_transformers(other)
    assert_names(error, words)
