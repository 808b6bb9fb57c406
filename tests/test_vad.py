"""The VAD's two views of one pass (pipeline/audio/vad.py): padded spans for gating, the unpadded voice for starts;
Silero's pass without faster-whisper's package (pipeline/audio/silero.py), span for span faster-whisper's."""

from __future__ import annotations

from pathlib import Path

import conftest
import numpy as np
import pytest

from pipeline.audio import media, silero, vad
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


LONGFORM = Path(conftest.SPEECH).parent / "longform"


@pytest.mark.parametrize(
    "threshold, min_speech_ms, min_silence_ms", [(0.4, 250, 500), (0.5, 0, 2000), (0.2, 1000, 100), (0.9, 250, 500)]
)
def test_silero_pass_is_faster_whispers_span_for_span(clips, threshold, min_speech_ms, min_silence_ms):
    """The port runs faster-whisper's model file and loop: the same probabilities, bit for bit, and the same spans as
    ``faster_whisper.vad.get_speech_timestamps`` (no padding) on real speech with pauses, a podcast's music beds,
    silence and noise, a tone, lengths that are and are not whole windows, at several settings."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps, get_vad_model

    rng = np.random.default_rng(3)
    parts = []
    for clip in clips[:6]:
        parts += [media.decode(clip.path), np.zeros(int(rng.choice([0.2, 0.6, 2.5]) * SAMPLE_RATE), np.float32)]
    speech = np.concatenate(parts)
    episode = sorted(LONGFORM.glob("dev0*.mp3"))
    beds = media.decode(episode[0])[: 240 * SAMPLE_RATE] if episode else speech  # music, a caller, silence
    tone = (0.3 * np.sin(2 * np.pi * 440 * np.arange(3 * SAMPLE_RATE) / SAMPLE_RATE)).astype(np.float32)
    noise = (0.05 * rng.standard_normal(2 * SAMPLE_RATE + 100)).astype(np.float32)
    cases = [
        speech,
        beds,
        np.concatenate([tone, speech[: 5 * SAMPLE_RATE], noise]),
        speech[: 512 * 40],
        speech[: 512 * 60 - 10],
        noise[:700],
    ]
    found = 0
    for samples in cases:
        theirs = get_speech_timestamps(
            samples,
            VadOptions(
                threshold=threshold,
                min_speech_duration_ms=min_speech_ms,
                min_silence_duration_ms=min_silence_ms,
                speech_pad_ms=0,
            ),
            sampling_rate=SAMPLE_RATE,
        )
        ours = silero.speech(samples, threshold, min_speech_ms, min_silence_ms, SAMPLE_RATE)
        assert ours == [(s["start"], s["end"]) for s in theirs]
        found += len(ours)
        padded = np.pad(samples, (0, silero.WINDOW - len(samples) % silero.WINDOW))
        assert np.array_equal(silero.probabilities(samples), get_vad_model()(padded.copy()))
    assert found >= 5  # speech was heard: the comparison is not of empty lists


def test_silero_names_a_missing_model(monkeypatch):
    """Without faster-whisper installed, the VAD says what it needs instead of an import error deep in a thread."""
    monkeypatch.setattr(silero.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(RuntimeError, match="faster-whisper"):
        silero.model_path()
