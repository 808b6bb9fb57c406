"""Decode stage: the assistant path is token-identical to the main model alone, and really drafts."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import perturbed_draft, tiny_random_models, with_assistant
from pipeline import audio
from pipeline.decode import DecodeOptions, Transcriber
from pipeline.models.load import quantized_self_draft
from pipeline.segments import is_non_speech_text


@pytest.fixture(scope="module")
def speech_pieces(clips) -> list[np.ndarray]:
    names = ["jfk.flac", "LJ001-0001.wav", "1089-134686-0000.flac", "test.wav"]
    by_name = {c.path.name: c for c in clips}
    return [audio.decode(by_name[n].path) for n in names]


# Random weights fail every check of Whisper's: the fallback would decode each piece six more times. These
# tests are about the first pass; second chances with and without an assistant: tests/test_second_chances.py.
FIRST_PASS = {"fallback_beams": 0, "coverage": False}


def _tokens(models, pieces, **opts):
    results = Transcriber(models, DecodeOptions(language="en", **opts)).transcribe(pieces)
    return [r.tokens for r in results], results


@pytest.mark.parametrize("seed", [0])  # more seeds, batch sizes and draft kinds: test_speculative.py
def test_tiny_random_pair_assistant_is_token_identical(seed, base_models, speech_pieces):
    main = tiny_random_models(base_models, seed)
    pieces = speech_pieces[:1]  # random weights babble to the length limit: one piece is enough
    alone, _ = _tokens(main, pieces, **FIRST_PASS)
    for name, draft in [
        ("perturbed", perturbed_draft(main.main, seed)),
        ("self-int8", quantized_self_draft(main.main)),
    ]:
        assisted, results = _tokens(with_assistant(main, draft, name), pieces, **FIRST_PASS)
        assert assisted == alone, f"seed {seed}, {name} draft changed the main model's tokens"
        assert all(r.stats.draft_calls > 0 for r in results), "the assistant never ran"


def test_real_base_with_int8_self_draft_is_token_identical(base_models, base_self_int8, speech_pieces):
    alone, plain = _tokens(base_models, speech_pieces, word_timestamps=True)
    assisted, results = _tokens(base_self_int8, speech_pieces, word_timestamps=True)
    assert assisted == alone
    for r, p in zip(results, plain):
        assert r.stats.draft_calls > 0 and r.stats.accepted > 0
        assert r.stats.main_calls < len(r.tokens) / 2, "a good draft should save most main calls"
        assert [s.text for s in r.segments] == [s.text for s in p.segments]
        assert [s.words for s in r.segments] == [s.words for s in p.segments]  # timings come from the main model


def test_language_is_detected_when_not_given(base_models, clips):
    by_lang = {c.language: c for c in clips if c.path.parent.name == "picovoice_leopard"}
    pieces = [audio.decode(by_lang[lang].path) for lang in ("en", "de", "fr")]
    results = Transcriber(base_models, DecodeOptions(language=None)).transcribe(pieces)
    assert [r.language for r in results] == ["en", "de", "fr"]


def test_english_only_model_refuses_other_languages(tiny_en_models):
    with pytest.raises(ValueError, match="English-only"):
        Transcriber(tiny_en_models, DecodeOptions(language="de"))


@pytest.mark.parametrize(
    "text,expected",
    [
        ("♪ ♪", True),
        ("[Music]", True),
        ("(upbeat music)", True),
        ("...", True),
        ("Thank you.", False),
        ("[Music] and then", False),
    ],
)
def test_non_speech_texts(text, expected):
    assert is_non_speech_text(text) is expected


def test_silence_is_not_decoded(tiny_en_models):
    results = Transcriber(tiny_en_models).transcribe([np.zeros(16000 * 20, np.float32)])
    assert results[0].skipped == "silence" and results[0].segments == [] and results[0].stats.main_calls == 0


def test_assistant_checkpoints_load_decoder_only_or_seq2seq(base_models, speech_pieces, tmp_path, runtime, cache_dir):
    """A Distil-Whisper-like checkpoint (same encoder shape) drafts with the main encoder; another shape keeps
    its own encoder. Both leave the main model's tokens as they are."""
    from transformers import WhisperForCausalLM, WhisperForConditionalGeneration

    from pipeline.models.load import load_assistant

    main = tiny_random_models(base_models, 5)
    alone, _ = _tokens(main, speech_pieces[:1], **FIRST_PASS)
    for name, kind, seed, d_model in [
        ("same", WhisperForCausalLM, 6, 64),
        ("other", WhisperForConditionalGeneration, 7, 32),
    ]:
        draft_models = tiny_random_models(base_models, seed, d_model=d_model)
        draft_models.main.save_pretrained(tmp_path / name)
        base_models.processor.save_pretrained(tmp_path / name)
        draft = load_assistant(str(tmp_path / name), main.main, main.processor, runtime, cache_dir)
        assert type(draft) is kind
        assisted, results = _tokens(with_assistant(main, draft, name), speech_pieces[:1], **FIRST_PASS)
        assert assisted == alone and results[0].stats.draft_calls > 0
