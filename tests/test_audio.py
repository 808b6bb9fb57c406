"""Audio stage on real ffmpeg: containers, streamed decoding, cutting at silences, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import ffmpeg, write_wav
from pipeline.audio import media
from pipeline.audio.media import AudioError, CutOptions

SR = media.SAMPLE_RATE


@pytest.fixture(scope="module")
def jfk(clips) -> np.ndarray:
    return media.decode(next(c.path for c in clips if c.path.name == "jfk.flac"))


CONTAINERS = {
    "mp3": ["-c:a", "libmp3lame", "-b:a", "64k"],
    "m4a": ["-c:a", "aac", "-b:a", "64k"],
    "opus": ["-c:a", "libopus", "-b:a", "32k"],
    "ogg": ["-c:a", "libvorbis"],
    "flac": ["-c:a", "flac"],
    "wav": ["-c:a", "pcm_s16le", "-ar", "44100", "-ac", "2"],
}


@pytest.mark.parametrize("ext", [*CONTAINERS, "mp4"])
def test_every_container_decodes_to_16k_mono(ext, clips, tmp_path, jfk):
    src = next(c.path for c in clips if c.path.name == "jfk.flac")
    out = tmp_path / f"jfk.{ext}"
    if ext == "mp4":  # a video file: the audio stream is picked, the picture ignored
        ffmpeg(
            "-f",
            "lavfi",
            "-i",
            "color=c=black:s=64x64:r=5",
            "-i",
            str(src),
            "-shortest",
            "-c:v",
            "libx264",
            "-c:a",
            "aac",
            "-map",
            "0:v",
            "-map",
            "1:a",
            str(out),
        )
    else:
        ffmpeg("-i", str(src), *CONTAINERS[ext], str(out))
    info = media.probe(out)
    samples = media.decode(out, info.duration_s)
    assert samples.dtype == np.float32
    assert abs(len(samples) / SR - 11.0) < 0.15
    assert abs(media.rms_db(samples) - media.rms_db(jfk)) < 1.5  # the same speech, not noise or silence


def _speech_with_gaps(jfk: np.ndarray, gaps_s: list[float]) -> tuple[np.ndarray, list[tuple[int, int]]]:
    parts, silences, pos = [], [], 0
    for gap in gaps_s:
        parts.append(jfk)
        pos += len(jfk)
        n = int(gap * SR)
        parts.append(np.zeros(n, np.float32))
        silences.append((pos, pos + n))
        pos += n
    parts.append(jfk)
    return np.concatenate(parts), silences


def test_cuts_fall_in_silences_and_cover_every_sample(jfk):
    samples, silences = _speech_with_gaps(jfk, [1.0, 0.8, 1.2, 0.6, 1.0])
    blocks = (samples[i : i + 7919] for i in range(0, len(samples), 7919))  # odd block size
    pieces = list(media.cut(blocks, CutOptions(min_s=15, max_s=30)))
    assert pieces[0].start_sample == 0
    for a, b in zip(pieces, pieces[1:]):
        assert a.end_sample == b.start_sample  # contiguous, sample-exact
        assert any(lo <= a.end_sample <= hi for lo, hi in silences), (
            f"cut at {a.end_sample / SR:.2f}s is not in a pause"
        )
    assert pieces[-1].end_sample == len(samples)
    assert np.array_equal(np.concatenate([p.samples for p in pieces]), samples)
    for p in pieces[:-1]:
        assert 15 <= p.duration_s <= 30


def _tone_with_silences(total_s: float, silences_s: list[tuple[float, float]]) -> np.ndarray:
    """Loud noise for ``total_s`` seconds with digital silence in each (start, end) span."""
    samples = (np.random.default_rng(1).standard_normal(int(total_s * SR)) * 0.3).astype(np.float32)
    for a, b in silences_s:
        samples[int(a * SR) : int(b * SR)] = 0.0
    return samples


@pytest.mark.parametrize(
    "silences_s, prefer_s, cut_s",
    [
        ([(16.0, 17.5), (26.0, 26.4)], 20.0, 26.2),  # a short silence late beats a long one early: a fuller window
        ([(16.0, 17.5), (26.0, 26.4)], 15.0, 16.75),  # no preference: the longest silence (before 0045)
        ([(16.0, 17.5), (22.0, 22.1)], 20.0, 16.75),  # the late gap is too short to count: the longest earlier one
        ([(16.0, 17.5), (26.0, 26.4)], 27.0, 16.75),  # nothing after 27 s: the longest from --min-piece on
    ],
)
def test_a_cut_prefers_a_silence_late_in_the_window(silences_s, prefer_s, cut_s):
    samples = _tone_with_silences(40.0, silences_s)
    at = media.choose_cut(samples, CutOptions(min_s=15, max_s=30, prefer_s=prefer_s))
    assert abs(at / SR - cut_s) < 0.05, f"cut at {at / SR:.2f} s, expected {cut_s} s"


def test_a_stretch_without_silence_is_cut_at_its_quietest_point_before_the_maximum():
    rng = np.random.default_rng(0)
    t = np.arange(70 * SR) / SR
    envelope = 0.3 + 0.25 * np.sin(2 * np.pi * t / 13.0)  # never silent; quietest every 13 s
    samples = (rng.standard_normal(len(t)) * envelope).astype(np.float32)
    pieces = list(media.cut(iter([samples]), CutOptions(min_s=15, max_s=30)))
    for p in pieces[:-1]:
        assert 15 <= p.duration_s <= 30
        phase = (p.end_sample / SR) % 13.0  # minimum of the envelope at 13 * (k + 3/4)
        assert abs(phase - 9.75) < 0.5, f"cut at {p.end_sample / SR:.2f}s, not at a quiet point"


def test_short_file_is_one_piece(jfk, tmp_path):
    path = write_wav(tmp_path / "short.wav", jfk)
    pieces = list(media.pieces(path))
    assert len(pieces) == 1 and pieces[0].start_sample == 0 and pieces[0].n_samples == len(jfk)


def test_piece_limits_are_validated():
    with pytest.raises(ValueError):
        CutOptions(min_s=20, max_s=10)
    with pytest.raises(ValueError):
        CutOptions(min_s=10, max_s=40)


def test_streaming_holds_a_bounded_window(tmp_path):
    """An hour-long file is never held whole: pieces arrive while ffmpeg is still decoding. (FLAC: the
    quickest compressed hour to make and read back, which keeps this in the fast tier.)"""
    path = tmp_path / "hour.flac"
    ffmpeg("-f", "lavfi", "-i", "sine=f=220:r=8000:d=3600", str(path))
    info = media.probe(path)
    assert info.duration_s == pytest.approx(3600, abs=1)
    biggest, count, total = 0, 0, 0
    for block in media.stream(path, info.duration_s):
        biggest = max(biggest, len(block))
        count += 1
        total += len(block)
    assert biggest <= 5 * SR and count > 600
    assert total / SR == pytest.approx(3600, abs=0.5)


def test_bad_inputs_raise_readable_errors(tmp_path, clips):
    empty = tmp_path / "empty.mp3"
    empty.write_bytes(b"")
    text = tmp_path / "notes.mp3"
    text.write_text("these are show notes, not audio\n" * 20)
    page = tmp_path / "episode.mp3"  # a failed download: the server's error page under the episode's name
    page.write_text("<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head><body>gone</body></html>\n")
    good = tmp_path / "good.mp3"
    ffmpeg("-i", str(next(c.path for c in clips if c.path.name == "gb0.wav")), "-t", "60", str(good))
    truncated = tmp_path / "truncated.mp3"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    cases = {
        tmp_path / "missing.wav": "not found",
        empty: "empty",
        text: 'not audio: ffmpeg found no audio stream in it; it is a text file starting "these are show notes',
        page: r"not audio: .*it is a web page \(HTML\)",
        tmp_path: "not a regular file",
    }
    for path, message in cases.items():
        with pytest.raises(AudioError, match=message):
            media.probe(path)
    warnings: list[str] = []  # a truncated file keeps what decodes, and says so
    kept = np.concatenate(list(media.stream(truncated, media.probe(truncated).duration_s, warnings)))
    assert 25 < len(kept) / media.SAMPLE_RATE < 35 and warnings and warnings[0].startswith("truncated: decoded")
    video_only = tmp_path / "silent_film.mp4"
    ffmpeg("-f", "lavfi", "-i", "color=c=black:s=64x64:r=5:d=2", "-c:v", "libx264", str(video_only))
    with pytest.raises(AudioError, match="no audio stream"):
        media.probe(video_only)


@pytest.mark.parametrize("ext", ["mp3", "wav"])
def test_channels_that_cancel_in_the_mono_mix_decode_as_their_difference(ext, clips, tmp_path, jfk):
    src = next(c.path for c in clips if c.path.name == "jfk.flac")
    out = tmp_path / f"out_of_phase.{ext}"  # one channel's polarity inverted: ffmpeg's mono mix is silence
    ffmpeg("-i", str(src), "-af", "pan=stereo|c0=c0|c1=-1*c0", str(out))
    warnings: list[str] = []
    samples = np.concatenate(list(media.stream(out, media.probe(out).duration_s, warnings)))
    assert abs(len(samples) / SR - 11.0) < 0.15
    assert abs(media.rms_db(samples) - media.rms_db(jfk)) < 4.5  # the speech, not -100 dB of residue
    assert len(warnings) == 1 and warnings[0].startswith("out of phase: the two channels cancel"), warnings
    # Stereo that does not cancel is ffmpeg's mono mix, bit for bit: two voices, one a side; and in phase.
    left, right = (
        next(c.path for c in clips if c.path.name == f"stereo_diarization_{s}.wav") for s in ("left", "right")
    )
    for name, pan in (("sides", None), ("in_phase", "pan=stereo|c0=c0|c1=c0")):
        path = tmp_path / f"{name}.{ext}"
        if pan:
            ffmpeg("-i", str(src), "-af", pan, str(path))
        else:
            ffmpeg("-i", str(left), "-i", str(right), "-filter_complex", "amerge=inputs=2", str(path))
        warnings = []
        mine = np.concatenate(list(media.stream(path, None, warnings)))
        theirs = _ffmpeg_mono(path)
        assert not warnings and np.array_equal(mine, theirs), name


def _ffmpeg_mono(path) -> np.ndarray:
    import subprocess

    args = ["ffmpeg", "-nostdin", "-v", "error", "-i", media.ffmpeg_name(path), "-map", "0:a:0", "-ac", "1"]
    args += ["-ar", str(SR), "-acodec", "pcm_f32le", "-f", "f32le", "-"]
    return np.frombuffer(subprocess.run(args, capture_output=True, check=True).stdout, np.float32)


def test_pause_cut_takes_the_latest_pause_in_the_window_and_never_cuts_speech():
    from pipeline.audio.media import CutOptions, pause_cut

    opts = CutOptions(min_s=15.0, max_s=30.0, at_pauses=True)
    window = np.zeros(30 * media.SAMPLE_RATE, np.float32)
    speech = [(0.5, 12.0), (13.0, 21.0), (22.0, 27.6), (28.4, 30.0)]
    assert pause_cut(window, opts, speech) == 28 * media.SAMPLE_RATE  # 27.6-28.4: the latest, not the longest
    assert pause_cut(window, opts, [(0.5, 12.0), (13.0, 30.0)]) is None  # the only pause is before min_s
    assert pause_cut(window, opts, [(0.5, 29.9)]) is None  # one long span: the caller falls back to energy
    assert pause_cut(window, opts, [(0.5, 16.0), (16.1, 30.0)]) is None  # 0.1 s is no pause (min_silence_s)
