"""Fast tests (no model): Whisper's time constants agree with each other, and the prompts made from a
generation config are Whisper's (multilingual and English-only)."""

from __future__ import annotations

from transformers import GenerationConfig

from pipeline.facts import whisper
from pipeline.facts.whisper import Tokens


def test_time_constants_are_one_consistent_block():
    assert whisper.MEL_FRAME_S == 0.01 and whisper.WINDOW_MEL_FRAMES == 3000
    assert whisper.ENCODER_FRAMES_PER_S == 50 and whisper.ENCODER_FRAME_S == whisper.TIMESTAMP_S
    assert whisper.WINDOW_MEL_FRAMES // whisper.ENCODER_STRIDE == 1500  # the encoder's positions


def _config(multilingual: bool) -> GenerationConfig:
    return GenerationConfig(
        decoder_start_token_id=50258,
        eos_token_id=50257,
        no_timestamps_token_id=50363,
        prev_sot_token_id=50361,
        is_multilingual=multilingual,
        lang_to_id={"<|en|>": 50259, "<|de|>": 50261} if multilingual else None,
        task_to_id={"transcribe": 50359, "translate": 50358} if multilingual else None,
    )


def test_prompts_are_whispers():
    multi = Tokens.of(_config(True))
    assert multi.prompt("de") == [50258, 50261, 50359]
    assert multi.prompt("en", "translate", timestamps=False, context=[50361, 11]) == [
        50361,
        11,
        50258,
        50259,
        50358,
        50363,
    ]
    assert multi.timestamp_begin == 50364 and multi.prev_sot == 50361 and multi.no_speech is None
    english = Tokens.of(_config(False))
    assert english.prompt("de") == [50258] and english.prompt(None, timestamps=False) == [50258, 50363]
