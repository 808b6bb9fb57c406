"""podscribe's feature extractor and tokenizer (models/processor.py) against transformers' on the same files: mel
filters and features bit for bit, decoded text on thousands of random token rows, encodings and special ids; the
processor picks them where the files allow and gives transformers' own classes where those are handed on."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from helpers import offline_vocabulary
from pipeline.models.processor import LogMel, Processor, Tokenizer, mel_filters


@pytest.mark.identity
@pytest.mark.parametrize("n_mels", [80, 128])
def test_features_are_transformers_bit_for_bit(n_mels):
    """Rows shorter and longer than 30 s, empty, float64 and float32, alone and in a list."""
    from transformers import WhisperFeatureExtractor

    theirs, ours = WhisperFeatureExtractor(feature_size=n_mels), LogMel(feature_size=n_mels)
    assert np.array_equal(ours.mel_filters, theirs.mel_filters) and ours.mel_filters.dtype == theirs.mel_filters.dtype
    rng = np.random.default_rng(0)
    rows = [rng.standard_normal(n) * 0.1 for n in (0, 1234, 16000, 480000, 500000)]
    rows += [(np.sin(np.arange(48000) / 7.0) * 0.5).astype(np.float32), np.zeros(16000, np.float32)]
    for row in rows:
        expected = theirs([row], sampling_rate=16000, return_tensors="pt").input_features
        got = ours([row], sampling_rate=16000, return_tensors="pt").input_features
        assert got.dtype == expected.dtype and torch.equal(got, expected), len(row)
        assert torch.equal(ours(row, sampling_rate=16000).input_features, expected)
    both = ours(rows[1:3], sampling_rate=16000).input_features
    assert torch.equal(both, theirs(rows[1:3], sampling_rate=16000, return_tensors="pt").input_features)


def test_features_refuse_what_they_do_not_compute(tmp_path):
    with pytest.raises(ValueError, match="16000 Hz"):
        LogMel()([np.zeros(10)], sampling_rate=8000)
    config = tmp_path / "preprocessor_config.json"
    for odd in (
        '{"dither": 1e-5}',
        '{"padding_value": 1.0}',
        '{"do_normalize": true}',
        '{"return_attention_mask": true}',
    ):
        config.write_text(odd)
        assert LogMel.from_file(config) is None, odd
    config.write_text('{"feature_size": 128, "n_fft": 400}')
    assert LogMel.from_file(config).mel_filters.shape == (201, 128)
    assert mel_filters(80, 400, 16000).shape == (201, 80)


@pytest.fixture(scope="module", params=["base", "tiny.en"])
def vocabulary(request, tmp_path_factory):
    """(the folder of an offline model's tokenizer files, transformers' tokenizer of it)."""
    folder = tmp_path_factory.mktemp(f"vocabulary-{request.param}")
    return folder, offline_vocabulary(request.param, folder).processor.tokenizer


@pytest.mark.identity
def test_decoded_text_is_transformers_on_random_rows(vocabulary):
    """Rows of text, special and timestamp tokens, some led by a previous-text prompt, with and without
    skip_special_tokens (which drops the prompt too)."""
    folder, theirs = vocabulary
    ours = Tokenizer.from_files(folder)
    size, prev = len(theirs), theirs.convert_tokens_to_ids("<|startofprev|>")
    rnd = random.Random(0)
    for _ in range(2000):
        ids = [rnd.randrange(size) if rnd.random() < 0.3 else rnd.randrange(50000) for _ in range(rnd.randint(0, 30))]
        if rnd.random() < 0.2:
            ids = [prev, *ids]
        for skip in (False, True):
            assert ours.decode(ids, skip_special_tokens=skip) == theirs.decode(ids, skip_special_tokens=skip), ids


def test_encodings_vocabulary_and_special_ids_are_transformers(vocabulary):
    folder, theirs = vocabulary
    ours = Tokenizer.from_files(folder)
    for text in (
        " hello world",
        " Ça va? 1984, $14.2 million",
        " 日本語のテキスト",
        "  two  spaces",
        " <|en|> in text",
        "",
    ):
        assert ours.encode(text, add_special_tokens=False) == theirs.encode(text, add_special_tokens=False), text
    assert ours.get_vocab() == theirs.get_vocab() and len(ours) == len(theirs)
    assert set(ours.all_special_ids) == set(theirs.all_special_ids)
    assert ours.unk_token_id == theirs.unk_token_id and ours.eos_token == theirs.eos_token
    names = ["<|startofprev|>", "<|nospeech|>", "<|nocaptions|>", "<|notimestamps|>", "<|0.00|>", "no such token"]
    assert ours.convert_tokens_to_ids(names) == theirs.convert_tokens_to_ids(names)
    ids = [0, 220, 50257, 50360, len(theirs) - 1]
    assert ours.convert_ids_to_tokens(ids) == theirs.convert_ids_to_tokens(ids)
    assert ours.convert_ids_to_tokens(50257) == theirs.convert_ids_to_tokens(50257)


def test_the_processor_is_podscribes_where_the_files_allow_and_hands_on_transformers(vocabulary, tmp_path):
    from transformers import WhisperFeatureExtractor, WhisperProcessor, WhisperTokenizer

    folder, theirs = vocabulary
    processor = Processor.from_pretrained(str(folder))
    assert isinstance(processor.tokenizer, Tokenizer) and isinstance(processor.feature_extractor, LogMel)
    extractor, tokenizer = processor.transformers()
    assert isinstance(extractor, WhisperFeatureExtractor) and isinstance(tokenizer, WhisperTokenizer)
    assert list(processor.get_prompt_ids("hello there")) == list(theirs.get_prompt_ids("hello there"))
    processor.save_pretrained(tmp_path / "saved")
    assert WhisperProcessor.from_pretrained(tmp_path / "saved").tokenizer.get_vocab() == theirs.get_vocab()

    config = tmp_path / "saved" / "tokenizer_config.json"
    config.write_text(config.read_text().replace('"WhisperTokenizer', '"SomeOtherTokenizer'))
    assert Tokenizer.from_files(tmp_path / "saved") is None  # not Whisper's: transformers' classes decide
    (tmp_path / "saved" / "tokenizer.json").unlink()
    assert Tokenizer.from_files(tmp_path / "saved") is None
