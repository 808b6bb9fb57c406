"""Build a small held-out long-form set from the real speech clips of ../shared/speech.

    .venv/bin/python -m bench.make_speech_episodes --out /tmp/speech-episodes [--seed N] [--speech DIR]

Why: podscribe's long-form constants (piece limits, silence thresholds, the VAD gate, the coverage
check, ...) are tuned on the three synthetic TTS episodes of ../shared/longform. This script builds a
second, held-out set in exactly that folder's format -- real human read speech with human transcripts,
laid out as podcast episodes -- so that `python -m bench.bench_longform --longform DIR` can check those
constants on audio they were not tuned on. (The clips themselves are the ones bench_transcribe.py uses
clip by clip; what is held out is the long-form layout, levels and conditions.)

Every English clip with a human transcript (language "en", ref_type "human") is one reference sentence.
Each clip is decoded to 16 kHz mono, trimmed by energy (10 ms frames, 5 ms hop; frames more than 50 dB
below the clip's loudest frame, or below -70 dBFS, are cut from both ends), given a 4 ms fade inside
the clip, and levelled to -21 dBFS active RMS (+-1 dB) before the per-speaker offsets below (a clip
whose peak would pass 0.89 goes in that much quieter). So a sentence's start/end are sample-exact on
the 16 kHz master and bound the clip's audible audio. Real recordings keep up to ~0.6 s of room tone
inside those bounds under the 50 dB rule (LibriSpeech, LibriVox); --trim-above-noise DB also cuts
frames less than DB above each clip's noise floor, keeping 50 ms around the words.

  real01_quiet_guest   HOST/GUEST alternate, GUEST 15-20 dB down; pauses 0.2-1.2 s and a few 1.5-2.5 s;
                       a 15-25 s music bed mid-episode (0.6-1.2 s of silence each side); MP3 48 kb/s.
  real02_phone_caller  HOST/CALLER alternate; CALLER band-limited to 300-3400 Hz, sent through 8 kHz
                       G.711 mu-law and given light line noise; a music intro; 10-15 s of digital
                       silence mid-episode; AAC 48 kb/s in .m4a, stereo with identical channels.
  real03_noisy_room    HOST/GUEST alternate; pink noise over the whole file at 15 dB SNR (to active
                       speech RMS); pauses as above, and a quarter of them only 0.2 s; Opus 24 kb/s.

There are only ~5 minutes of such clips, so the episodes (~4-4.5 min each) share clips: each episode
takes the clips used least so far, so each clip is used two or three times, never twice in one episode.
Everything random comes from --seed (and the episode name). The output folder holds the audio, a
<name>.ref.json per episode, a copy of the long-form score.py, manifest.json and README.md; it is
derived data and is not to be committed. Finally each file is decoded again and checked against the
master, and the scorer is run on a perfect and on an empty hypothesis.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench import common
from bench.common import LONGFORM, REPO, SPEECH, english_clips, load_scorer
from pipeline.audio import media

SR = 16000
LEVEL_DBFS = -21.0  # active RMS of every clip before per-speaker offsets
JITTER_DB = 1.0  # +- random offset per clip
TRIM_DB, TRIM_FLOOR_DBFS = 50.0, -70.0
TRIM_PAD_S = 0.05  # kept around the words with --trim-above-noise
ACTIVE_DB = 35.0  # 20 ms frames within this of the loudest count as active speech
FADE_S = 0.004
MUSIC_DBFS = -23.0
PEAK = 0.89
LONG_PAUSE_SHARE = 0.07
DEFAULT_SEED = 20250930
VERSION = "1.0"


@dataclass
class Clip:
    audio: str  # path relative to the speech folder: the sentence's "voice"
    text: str
    source: str
    samples: np.ndarray  # trimmed 16 kHz mono float32, not yet levelled
    lead_s: float  # what trimming cut from the start / end
    tail_s: float
    uses: int = 0

    @property
    def seconds(self) -> float:
        return len(self.samples) / SR


@dataclass(frozen=True)
class Spec:
    name: str
    title: str
    speakers: tuple[str, str]  # the first is the host; clips alternate between the two
    encoding: dict
    target_s: float  # stop adding clips once the estimated length reaches this
    second_gain_db: tuple[float, float] = (0.0, 0.0)  # offset of the second speaker, per clip
    music: str | None = None  # "intro" | "mid"
    silence_s: tuple[float, float] | None = None  # a digital-silence gap mid-episode
    phone: bool = False  # the second speaker is on the phone
    noise_snr_db: float | None = None  # pink noise over the whole file
    short_gap_share: float = 0.0  # pauses of exactly 0.2 s
    description: str = ""


SPECS = (
    Spec(
        "real01_quiet_guest",
        "Held-out real speech A: a quiet guest (guest 15-20 dB below the host), music bed",
        ("HOST", "GUEST"),
        {"ext": "mp3", "codec": "libmp3lame", "ar": 22050, "ac": 1, "bitrate": "48k"},
        target_s=245.0,
        second_gain_db=(-20.0, -15.0),
        music="mid",
        description="GUEST 15-20 dB below HOST; 15-25 s music bed mid-episode",
    ),
    Spec(
        "real02_phone_caller",
        "Held-out real speech B: a caller on the phone line, music intro, dead air",
        ("HOST", "CALLER"),
        {"ext": "m4a", "codec": "aac", "ar": 44100, "ac": 2, "bitrate": "48k"},
        target_s=258.0,
        music="intro",
        silence_s=(10.0, 15.0),
        phone=True,
        description="CALLER 300-3400 Hz through 8 kHz mu-law with line noise; music intro; 10-15 s digital silence",
    ),
    Spec(
        "real03_noisy_room",
        "Held-out real speech C: a noisy room (pink noise at 15 dB SNR), quick turn-taking",
        ("HOST", "GUEST"),
        {"ext": "ogg", "codec": "libopus", "ar": 48000, "ac": 1, "bitrate": "24k"},
        target_s=245.0,
        noise_snr_db=15.0,
        short_gap_share=0.25,
        description="pink noise over the whole file at 15 dB SNR; a quarter of the pauses 0.2 s",
    ),
)


# -- signal helpers ----------------------------------------------------------------------------


def db(power: float) -> float:
    return float(10 * np.log10(power + 1e-20))


def frame_power(x: np.ndarray, frame: int, hop: int) -> np.ndarray:
    if len(x) < frame:
        return np.array([np.mean(x.astype(np.float64) ** 2)])
    idx = np.arange(0, len(x) - frame + 1, hop)
    csum = np.concatenate([[0.0], np.cumsum(x.astype(np.float64) ** 2)])
    return (csum[idx + frame] - csum[idx]) / frame


def trim_bounds(x: np.ndarray, above_noise_db: float | None = None) -> tuple[int, int]:
    """[start, end) of the audible part: 10 ms frames (5 ms hop) above max(loudest - 50 dB, -70 dBFS).

    With above_noise_db, frames must also be that far above the clip's noise floor (its 10th-percentile
    frame), and TRIM_PAD_S is kept on each side so that soft onsets survive: this cuts the room tone
    that recordings (LibriSpeech, LibriVox) carry before and after the words, which the 50 dB rule keeps."""
    frame, hop = SR // 100, SR // 200
    p = 10 * np.log10(frame_power(x, frame, hop) + 1e-20)
    threshold = max(p.max() - TRIM_DB, TRIM_FLOOR_DBFS)
    pad = 0
    if above_noise_db is not None:
        threshold = max(threshold, float(np.percentile(p, 10)) + above_noise_db)
        pad = int(TRIM_PAD_S * SR)
    loud = np.flatnonzero(p > threshold)
    return max(0, int(loud[0] * hop) - pad), int(min(len(x), loud[-1] * hop + frame + pad))


def active_power(x: np.ndarray) -> float:
    """Mean power of the 20 ms frames within ACTIVE_DB of the loudest one."""
    p = frame_power(x, SR // 50, SR // 50)
    return float(p[p >= p.max() * 10 ** (-ACTIVE_DB / 10)].mean())


def fade(x: np.ndarray, seconds: float) -> np.ndarray:
    n = min(int(seconds * SR), len(x) // 2)
    if n:
        ramp = 0.5 - 0.5 * np.cos(np.linspace(0, np.pi, n))
        x = x.copy()
        x[:n] *= ramp
        x[-n:] *= ramp[::-1]
    return x


def spectral_filter(x: np.ndarray, gain) -> np.ndarray:
    """Zero-phase filter: multiply the spectrum by gain(freqs_hz)."""
    spec = np.fft.rfft(x.astype(np.float64))
    f = np.fft.rfftfreq(len(x), 1 / SR)
    return np.fft.irfft(spec * gain(f), len(x)).astype(np.float32)


def phone_band(f: np.ndarray) -> np.ndarray:
    """4th-order Butterworth magnitudes: high-pass at 300 Hz, low-pass at 3400 Hz."""
    with np.errstate(divide="ignore"):
        hp = 1 / np.sqrt(1 + (300.0 / np.maximum(f, 1e-3)) ** 8)
    return hp / np.sqrt(1 + (f / 3400.0) ** 8)


def ffmpeg_pipe(data: bytes, fmt_in: str, rate_in: int, fmt_out: str, rate_out: int) -> bytes:
    """Raw mono audio through ffmpeg: resampled from rate_in to rate_out and converted between raw formats."""
    return subprocess.run(
        [
            "ffmpeg",
            "-nostdin",
            "-v",
            "error",
            "-f",
            fmt_in,
            "-ar",
            str(rate_in),
            "-ac",
            "1",
            "-i",
            "pipe:",
            "-ar",
            str(rate_out),
            "-f",
            fmt_out,
            "pipe:",
        ],
        input=data,
        capture_output=True,
        check=True,
    ).stdout


def telephone(x: np.ndarray) -> np.ndarray:
    """300-3400 Hz, then down to 8 kHz G.711 mu-law and back up to 16 kHz (same length as x)."""
    band = spectral_filter(x, phone_band)
    scale = 0.5 / max(1e-6, float(np.abs(band).max()))  # mu-law is level dependent: send it a healthy level
    mulaw = ffmpeg_pipe((band * scale).astype(np.float32).tobytes(), "f32le", SR, "mulaw", 8000)
    y = np.frombuffer(ffmpeg_pipe(mulaw, "mulaw", 8000, "f32le", SR), np.float32) / scale
    return np.pad(y, (0, max(0, len(x) - len(y))))[: len(x)].astype(np.float32)


def pink_noise(n: int, rng: np.random.Generator) -> np.ndarray:
    """Unit-RMS noise with 1/f power above 20 Hz."""
    spec = np.fft.rfft(rng.standard_normal(n))
    f = np.fft.rfftfreq(n, 1 / SR)
    spec *= np.where(f >= 20, 1 / np.sqrt(np.maximum(f, 20)), 0)
    y = np.fft.irfft(spec, n)
    return (y / np.sqrt(np.mean(y**2))).astype(np.float32)


def music_bed(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """A podcast jingle: plucked I-V-vi-IV chords, sine bass, kick and a noise hi-hat, at MUSIC_DBFS RMS."""
    n = int(round(seconds * SR))
    out = np.zeros(n)
    beat = 60 / rng.uniform(96, 124)
    root = int(rng.integers(55, 62))  # MIDI G3..C4
    hz = lambda m: 440 * 2 ** ((m - 69) / 12)  # noqa: E731
    chords = [(0, (0, 4, 7)), (7, (0, 4, 7)), (9, (0, 3, 7)), (5, (0, 4, 7))]
    hat_noise = spectral_filter(rng.standard_normal(n).astype(np.float32), lambda f: (f > 6000).astype(float))

    def add(at: float, sig: np.ndarray) -> None:
        i = int(at * SR)
        if i < n:
            out[i : i + len(sig)] += sig[: n - i]

    def tone(freq: float, dur: float, decay: float, harmonics: int) -> np.ndarray:
        t = np.arange(int(dur * SR)) / SR
        wave = sum(
            np.sin(2 * np.pi * freq * k * t) / k**1.5 * np.exp(-t * decay * (1 + 0.4 * k))
            for k in range(1, harmonics + 1)
        )
        return wave * np.minimum(1, t / 0.003)

    for b in range(int(seconds / beat) + 1):
        at = b * beat
        offset, triad = chords[(b // 4) % 4]
        if b % 2 == 0:  # chord strum on beats 1 and 3
            for k, step in enumerate(triad):
                add(at + 0.012 * k, 0.22 * tone(hz(root + offset + step), 1.6, 2.5, 6))
            t = np.arange(int(0.25 * SR)) / SR  # kick: falling sine
            add(at, 0.8 * np.sin(2 * np.pi * np.cumsum(45 + 80 * np.exp(-t * 30)) / SR) * np.exp(-t * 14))
        add(at, 0.45 * tone(hz(root + offset - 24), beat, 3.0, 2))  # bass on every beat
        for half in (0.0, 0.5):  # hi-hat on every eighth
            i, m = int((at + half * beat) * SR), int(0.06 * SR)
            if i < n:
                env = np.exp(-np.arange(min(m, n - i)) / SR * 70) * (0.35 if half else 0.25)
                out[i : i + len(env)] += hat_noise[i : i + len(env)] * env
    ramp_in, ramp_out = int(0.8 * SR), int(1.5 * SR)
    out[:ramp_in] *= np.linspace(0, 1, ramp_in)
    out[-ramp_out:] *= np.linspace(1, 0, ramp_out)
    out *= 10 ** (MUSIC_DBFS / 20) / np.sqrt(np.mean(out**2))
    return out.astype(np.float32)


# -- clips -------------------------------------------------------------------------------------


def load_clips(speech: Path, above_noise_db: float | None = None) -> list[Clip]:
    clips = []
    for c in english_clips(speech):
        x = media.decode(c.path)
        a, b = trim_bounds(x, above_noise_db)
        clips.append(Clip(c.raw["audio"], c.text, c.raw["source"], x[a:b], a / SR, (len(x) - b) / SR))
    return clips


def pick_clips(clips: list[Clip], spec: Spec, rng: np.random.Generator) -> list[Clip]:
    """The least-used clips first (ties in random order) until the estimated length reaches the target."""
    fixed = 1.5 + (21.5 if spec.music else 0) + (12.5 if spec.silence_s else 0)
    order = sorted(clips, key=lambda c: (c.uses, rng.random()))
    chosen, est = [], fixed
    for c in order:
        if est >= spec.target_s:
            break
        chosen.append(c)
        est += c.seconds + 0.8
    for c in chosen:
        c.uses += 1
    rng.shuffle(chosen)
    return chosen


def pauses(n: int, spec: Spec, rng: np.random.Generator) -> list[float]:
    """n pauses: 0.2-1.2 s, a few (7 %, at least 2) 1.5-2.5 s, and the spec's share of exactly 0.2 s."""
    out = list(rng.uniform(0.2, 1.2, n))
    idx = rng.permutation(n)
    n_long = max(2, round(LONG_PAUSE_SHARE * n))
    n_short = round(spec.short_gap_share * n)
    for i in idx[:n_long]:
        out[i] = rng.uniform(1.5, 2.5)
    for i in idx[n_long : n_long + n_short]:
        out[i] = 0.2
    return out


# -- episodes ----------------------------------------------------------------------------------


@dataclass
class Timeline:
    parts: list[np.ndarray] = field(default_factory=list)
    n: int = 0

    def add(self, x: np.ndarray) -> tuple[int, int]:
        self.parts.append(x.astype(np.float32))
        self.n += len(x)
        return self.n - len(x), self.n

    def gap(self, seconds: float) -> tuple[int, int]:
        return self.add(np.zeros(int(round(seconds * SR)), np.float32))

    def samples(self) -> np.ndarray:
        return np.concatenate(self.parts)


def render_sentence(clip: Clip, speaker: str, spec: Spec, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """The clip as it goes into the episode, and its active level in dBFS."""
    level = LEVEL_DBFS + rng.uniform(-JITTER_DB, JITTER_DB)
    if speaker != spec.speakers[0]:
        level += rng.uniform(*spec.second_gain_db)
    x = clip.samples
    if spec.phone and speaker != spec.speakers[0]:
        x = telephone(x)
        a, b = trim_bounds(x)  # the phone band can leave quieter edges: trim again
        x = x[a:b]
    gain = 10 ** (level / 20) / np.sqrt(active_power(x))
    x = x * np.float32(min(gain, PEAK / float(np.abs(x).max())))  # a peaky clip goes in quieter, not clipped
    level = db(active_power(x))
    if spec.phone and speaker != spec.speakers[0]:  # line hiss, 28 dB below the caller, inside the sentence
        hiss = spectral_filter(rng.standard_normal(len(x)).astype(np.float32), phone_band)
        x = x + hiss * np.float32(10 ** ((level - 28) / 20) / np.sqrt(np.mean(hiss.astype(np.float64) ** 2)))
    return fade(x, FADE_S), level


def trim_rule(above_noise_db: float | None) -> str:
    rule = f"10 ms frames more than {TRIM_DB:g} dB below the clip's loudest (or below {TRIM_FLOOR_DBFS:g} dBFS)"
    if above_noise_db is None:
        return rule + " cut from both ends; a recording's room tone within that range stays inside start/end"
    return (
        rule + f" or less than {above_noise_db:g} dB above its noise floor (10th-percentile frame) cut from "
        f"both ends, keeping {1000 * TRIM_PAD_S:g} ms on each side"
    )


def build_episode(spec: Spec, clips: list[Clip], seed: int, trim: str) -> tuple[np.ndarray, dict]:
    rng = np.random.default_rng([seed, zlib.crc32(spec.name.encode())])
    gaps = pauses(len(clips) - 1, spec, rng)
    middle = len(clips) // 2  # music bed or silence goes before this sentence
    tl, sentences, nonspeech = Timeline(), [], []
    if spec.music == "intro":
        tl.gap(0.3)
        nonspeech.append(("music", *tl.add(music_bed(rng.uniform(15, 25), rng))))
        tl.gap(rng.uniform(0.6, 1.2))
    else:
        tl.gap(0.5)
    for i, clip in enumerate(clips):
        if i == middle and spec.music == "mid":
            tl.gap(rng.uniform(0.6, 1.2))
            nonspeech.append(("music", *tl.add(music_bed(rng.uniform(15, 25), rng))))
            tl.gap(rng.uniform(0.6, 1.2))
        elif i == middle and spec.silence_s:
            nonspeech.append(("silence", *tl.gap(rng.uniform(*spec.silence_s))))
        elif i:
            tl.gap(gaps[i - 1])
        speaker = spec.speakers[i % 2]
        x, level = render_sentence(clip, speaker, spec, rng)
        a, b = tl.add(x)
        sentences.append(
            {
                "idx": i,
                "speaker": speaker,
                "voice": clip.audio,
                "start": round(a / SR, 6),
                "end": round(b / SR, 6),
                "start_sample": a,
                "end_sample": b,
                "text": clip.text,
                "level_dbfs": round(level, 2),
            }
        )
        crossings = [k * 30 for k in range(a // (30 * SR) + 1, (b - 1) // (30 * SR) + 1)]
        if crossings:
            sentences[-1]["crosses_30s"] = crossings
    tl.gap(1.0)
    master = tl.samples()

    noise = None
    if spec.noise_snr_db is not None:
        speech_power = np.mean([10 ** (s["level_dbfs"] / 10) for s in sentences])
        noise_power = speech_power / 10 ** (spec.noise_snr_db / 10)
        master = master + pink_noise(len(master), rng) * np.float32(np.sqrt(noise_power))
        spans = np.concatenate([master[s["start_sample"] : s["end_sample"]] for s in sentences]).astype(np.float64)
        noise = {
            "kind": "pink",
            "snr_db": spec.noise_snr_db,
            "definition": "10*log10(mean active power of the sentences / noise power), whole file; active "
            f"power = mean power of a clip's 20 ms frames within {ACTIVE_DB:.0f} dB of its loudest",
            "snr_db_over_sentence_spans": round(db(np.mean(spans**2)) - db(noise_power), 2),
        }
    gain = min(1.0, PEAK / float(np.abs(master).max()))
    master = (master * np.float32(gain)).astype(np.float32)

    ref = {
        "audio": f"{spec.name}.{spec.encoding['ext']}",
        "duration": round(len(master) / SR, 6),
        "title": spec.title,
        "length_class": "short",
        "sample_rate_master": SR,
        "encoding": spec.encoding,
        "speakers": speaker_notes(spec),
        "seed": seed,
        "noise": noise,
        "designed_30s_crossing": [],
        "master_gain_db": round(db(gain**2), 2),
        "timing_note": "start/end are seconds on the 16 kHz master timeline (start_sample/end_sample are 16 kHz "
        "sample indices, end exclusive); they bound each energy-trimmed clip of real read speech; "
        "nonspeech regions contain no speech at all",
        "trim": trim,
        "sentences": sentences,
        "nonspeech": [{"kind": k, "start": round(a / SR, 6), "end": round(b / SR, 6)} for k, a, b in nonspeech],
    }
    return master, ref


def speaker_notes(spec: Spec) -> dict:
    host, other = spec.speakers
    base = f"real read speech (clips of ../shared/speech), {LEVEL_DBFS:g} dBFS active RMS +-{JITTER_DB:g} dB"
    notes = {host: base}
    if spec.phone:
        notes[other] = base + "; 300-3400 Hz, through 8 kHz G.711 mu-law, phone-band hiss 28 dB below the speech"
    elif spec.second_gain_db != (0.0, 0.0):
        lo, hi = spec.second_gain_db
        notes[other] = base + f", then {lo:g} to {hi:g} dB"
    else:
        notes[other] = base
    return notes


# -- files and checks --------------------------------------------------------------------------


def encode(master: np.ndarray, path: Path, enc: dict) -> None:
    common.encode(
        path,
        master,
        *("-map_metadata", "-1", "-fflags", "+bitexact", "-c:a", enc["codec"], "-b:a", enc["bitrate"]),
        *("-ar", str(enc["ar"]), "-ac", str(enc["ac"])),
    )


def decode_check(path: Path, master: np.ndarray) -> dict:
    """Decode with podscribe's own decoder; length and offset (cross-correlation of the first 60 s) vs the master."""
    y = media.decode(path)
    m = min(len(master), len(y), 60 * SR)
    size = 1 << int(np.ceil(np.log2(2 * m)))
    xc = np.fft.irfft(np.fft.rfft(y[:m], size) * np.conj(np.fft.rfft(master[:m], size)), size)
    lag = int(np.argmax(xc))
    lag = lag - size if lag > size // 2 else lag
    return {
        "decoded_samples_16k": len(y),
        "decoded_duration": round(len(y) / SR, 4),
        "length_diff_ms": round(1000 * (len(y) - len(master)) / SR, 2),
        "offset_samples_16k": lag,
        "offset_ms": round(1000 * lag / SR, 2),
        "decoder": "pipeline.audio.media.decode (ffmpeg)",
    }


def score_checks(folder: Path) -> dict:
    """Perfect hypothesis (the references as rows) must score 0 % with nothing unmatched; empty must be 100 % D."""
    scorer = load_scorer(folder)
    out = {}
    for audio_name, ref in scorer.load_refs(folder).items():
        rows = [
            {"file": audio_name, "start": s["start"], "end": s["end"], "text": s["text"], "row": i}
            for i, s in enumerate(ref["sentences"])
        ]
        perfect = scorer.score_episode(ref, rows)
        empty = scorer.score_episode(ref, [])
        out[audio_name] = {
            "ref_words": perfect["ref_words"],
            "perfect_wer": perfect["wer"],
            "perfect_unmatched": perfect["timestamps"]["unmatched_sentences"],
            "perfect_start_err_max": max(perfect["timestamps"]["_start_errors"]),
            "perfect_hallucinated_words": perfect["hallucination"]["words"],
            "empty_wer": empty["wer"],
            "empty_deletions": empty["deletions"],
        }
        ok = (
            perfect["wer"] == 0
            and out[audio_name]["perfect_unmatched"] == 0
            and empty["wer"] == 1.0
            and empty["deletions"] == perfect["ref_words"]
        )
        out[audio_name]["ok"] = ok
    return out


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tool_versions() -> dict:
    ff = subprocess.run(["ffmpeg", "-version"], capture_output=True, text=True).stdout.splitlines()[0]
    return {"ffmpeg": ff, "numpy": np.__version__, "python": sys.version.split()[0], "generator": VERSION}


def write_readme(folder: Path, speech: Path, manifest: dict) -> None:
    seed, trim = manifest["seed"], manifest["trim"]
    lines = [
        "# Held-out long-form set from real speech (derived data, do not commit)",
        "",
        f"Made by podscribe's `bench/make_speech_episodes.py` (version {VERSION}) with seed {seed} from the English, "
        f"human-transcribed clips (language `en`, ref_type `human`) of `{speech}` (see its SOURCES.md for where each "
        "clip comes from and its licence). It is derived data for benchmarking only: regenerate it, do not commit it:",
        "",
        f"    {manifest['command']}",
        "",
        "Same format as `../shared/longform` (`<name>.ref.json`, and `score.py` copied from there), so "
        "`bench/bench_longform.py --longform <this folder>` and `python3 score.py --ref-dir . --hyp hyp.jsonl` work "
        "as on the development set. Each clip is one reference sentence (its whole transcript; some clips hold "
        f"more or less than one sentence). Clips are energy-trimmed ({trim}), levelled to {LEVEL_DBFS:g} dBFS "
        f"active RMS +-{JITTER_DB:g} dB (a clip whose peak would pass {PEAK:g} goes in quieter) and placed "
        "sample-exactly. Speaker labels alternate clip by clip and are roles, not voices (most clips are the one "
        "LJ Speech reader). `manifest.json` has sizes, checksums, the decode checks, each clip's source and trim, "
        "and the scorer checks.",
        "",
        "| episode | file | length | sentences | words | conditions |",
        "|---|---|---|---|---|---|",
    ]
    for name, e in manifest["episodes"].items():
        lines.append(
            f"| {name} | {e['audio']} ({e['encoding']['codec']} {e['encoding']['bitrate']}, "
            f"{e['encoding']['ar']} Hz, {e['encoding']['ac']} ch) | {e['duration'] / 60:.1f} min "
            f"({e['duration']:.1f} s) | {e['sentences']} | {e['words']} | {e['conditions']} |"
        )
    failed = manifest["checks_failed"]
    lines += [
        "",
        "Checks when it was made: each file decoded with pipeline.audio.media.decode matches the master's length "
        "within 50 ms at offset 0; score.py gives the references, as a hypothesis, 0 % WER with no sentence "
        "unmatched, and an empty hypothesis 100 % (all deletions): "
        + (f"FAILED for {', '.join(failed)}." if failed else "all passed."),
    ]
    lines += [
        "",
        "Clip use (the set has too little audio for disjoint episodes, so every clip appears in two or "
        "three episodes, in different roles and conditions, never twice in one):",
        "",
    ]
    for clip, c in manifest["clips"].items():
        lines.append(f"- `{clip}`: {', '.join(c['episodes']) if c['episodes'] else 'unused'}")
    (folder / "README.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="output folder (outside the repository)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--speech", type=Path, default=SPEECH)
    parser.add_argument(
        "--trim-above-noise",
        type=float,
        default=None,
        metavar="DB",
        help="also trim frames less than DB above each clip's noise floor (e.g. 10), keeping 50 ms "
        "around the words; default: the 50 dB rule alone, as the development set",
    )
    parser.add_argument(
        "--scorer",
        type=Path,
        default=LONGFORM / "score.py",
        help="the long-form scorer to copy into the folder",
    )
    args = parser.parse_args()
    out, speech = args.out.resolve(), args.speech.resolve()
    if out == REPO or REPO in out.parents:
        parser.error("write the episodes outside the repository")
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(args.scorer, out / "score.py")

    clips = load_clips(speech, args.trim_above_noise)
    trim = trim_rule(args.trim_above_noise)
    print(f"{len(clips)} clips, {sum(c.seconds for c in clips):.1f} s after trimming", flush=True)
    rng = np.random.default_rng(args.seed)
    command = " ".join([".venv/bin/python -m bench.make_speech_episodes", *sys.argv[1:]])
    manifest = {
        "seed": args.seed,
        "command": command,
        "speech_dir": str(speech),
        "trim": trim,
        "tools": tool_versions(),
        "episodes": {},
    }
    use: dict[str, list[str]] = {c.audio: [] for c in clips}
    for spec in SPECS:
        chosen = pick_clips(clips, spec, rng)
        master, ref = build_episode(spec, chosen, args.seed, trim)
        path = out / ref["audio"]
        encode(master, path, spec.encoding)
        ref["decode_check"] = decode_check(path, master)
        (out / f"{spec.name}.ref.json").write_text(json.dumps(ref, indent=1, ensure_ascii=False) + "\n")
        for c in chosen:
            use[c.audio].append(spec.name)
        words = sum(len(s["text"].split()) for s in ref["sentences"])
        manifest["episodes"][spec.name] = {
            "audio": ref["audio"],
            "bytes": path.stat().st_size,
            "sha256": sha256(path),
            "duration": ref["duration"],
            "sentences": len(ref["sentences"]),
            "words": words,
            "conditions": spec.description,
            "encoding": spec.encoding,
            "nonspeech": ref["nonspeech"],
            "noise": ref["noise"],
            "decode_check": ref["decode_check"],
            "crosses_30s": sum(1 for s in ref["sentences"] if s.get("crosses_30s")),
        }
        dc = ref["decode_check"]
        print(
            f"{spec.name}: {ref['duration']:.1f} s, {len(ref['sentences'])} sentences, {words} words; "
            f"decoded {dc['length_diff_ms']:+.1f} ms, offset {dc['offset_samples_16k']} samples",
            flush=True,
        )
    manifest["clips"] = {
        c.audio: {
            "source": c.source,
            "trimmed_lead_s": round(c.lead_s, 3),
            "trimmed_tail_s": round(c.tail_s, 3),
            "episodes": use[c.audio],
        }
        for c in clips
    }
    checks = score_checks(out)
    for name, c in checks.items():
        print(
            f"score check {name}: refW {c['ref_words']}, perfect WER {c['perfect_wer']:.3f} "
            f"(unmatched {c['perfect_unmatched']}), empty WER {c['empty_wer']:.3f} ({c['empty_deletions']} D)"
        )
    bad = [
        n
        for n, e in manifest["episodes"].items()
        if abs(e["decode_check"]["length_diff_ms"]) > 50 or e["decode_check"]["offset_samples_16k"] != 0
    ]
    bad += [n for n, c in checks.items() if not c["ok"]]
    manifest["score_checks"], manifest["checks_failed"] = checks, bad
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    write_readme(out, speech, manifest)
    if bad:
        sys.exit(f"checks failed: {bad}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
