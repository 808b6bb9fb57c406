"""The VAD's two views of one pass (pipeline/audio/vad.py): padded spans for gating, the unpadded voice for starts."""

from __future__ import annotations

import numpy as np

from pipeline.audio import media, vad
from pipeline.audio.media import SAMPLE_RATE


def test_padding_widens_spans_inside_the_audio_and_splits_short_gaps():
    # gap 1000 samples >= 2 pads: each side gets the full pad; gap 300 < 2 pads: split in half
    spans = [(100, 1000), (2000, 3000), (3300, 4000)]
    assert vad.pad(spans, 400, 4200) == [(0, 1400), (1600, 3150), (3150, 4200)]
    assert vad.pad([], 400, 4200) == []
    assert vad.pad([(500, 600)], 0, 4200) == [(500, 600)]


def test_padded_spans_are_silero_own_padding(clips):
    """One Silero pass gives both views; the padded one is exactly faster-whisper's padded output."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    rng = np.random.default_rng(0)
    parts = []
    for clip in clips[:4]:  # real speech with pauses of 0.3 s (split) and 1.5 s (padded in full) between
        parts += [media.decode(clip.path), np.zeros(int(rng.choice([0.3, 1.5]) * SAMPLE_RATE), np.float32)]
    samples = np.concatenate(parts)
    heard = vad.voice(samples)
    theirs = get_speech_timestamps(
        samples,
        VadOptions(threshold=0.4, min_speech_duration_ms=250, min_silence_duration_ms=500, speech_pad_ms=400),
        sampling_rate=SAMPLE_RATE,
    )
    assert len(heard.spans) >= 3
    assert heard.padded == [(s["start"] / SAMPLE_RATE, s["end"] / SAMPLE_RATE) for s in theirs]
    assert vad.speech_spans(samples) == heard.padded
    for (lo, hi), (plo, phi) in zip(heard.spans, heard.padded):
        assert plo <= lo < hi <= phi


def test_tightening_pulls_starts_to_just_before_the_voice():
    padded = [(0.8, 4.4), (6.1, 9.4)]
    heard = [(1.2, 4.0), (6.5, 9.0)]
    lead = vad.LEAD_S
    # early start: to the voice's onset less the lead (the padded span alone stops 0.4 s short)
    assert vad.tighten(0.0, 5.0, padded) == (0.8, 4.4)
    assert vad.tighten(0.0, 5.0, padded, heard) == (round(1.2 - lead, 3), 4.4)
    # a segment that starts inside the voice (a sentence after a short pause) keeps its start
    assert vad.tighten(2.0, 3.0, padded, heard) == (2.0, 3.0)
    # starting in the gap between voices: the next voice's onset
    assert vad.tighten(4.2, 8.0, padded, heard) == (round(6.5 - lead, 3), 8.0)
    # nothing heard under it: left alone (the VAD filter decides)
    assert vad.tighten(4.5, 6.0, [(0.8, 4.4)], [(1.2, 4.0)]) == (4.5, 6.0)
