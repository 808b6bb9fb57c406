"""Quick exchanges built from real voices: long turns with short ones (0.3-1.0 s) between them, as in talk.

Each reader's clips (../shared/speech) are cut at their own pauses (10 ms frames 30 dB under the clip's
loudest, at least 0.1 s of them): a turn is a run of the clip's voiced stretches whose length falls in the
asked range, so a short turn is a word or a few words said whole, never a word cut in two. Turns alternate
between readers with 0.2-0.7 s pauses (as between turns in real conversation). Everything comes from a seeded
generator: a plan is the same on every machine. Used by bench/bench_diarize.py and tests/test_diarize.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

RATE = 16_000
FRAME = 160  # 10 ms
QUIET_DB = 30.0  # a frame this far under the clip's loudest is a pause
MIN_PAUSE_FRAMES = 10  # 0.1 s

# long: a reader's turn; short: a backchannel, an interjection, a one-word answer; tiny: "Mm-hm.", "Right."
LENGTHS_S = {"tiny": (0.25, 0.45), "short": (0.3, 1.0), "mid": (1.0, 2.0), "long": (2.5, 9.0)}

READERS = {
    "lj": [f"ljspeech_coqui/wavs/LJ001-00{i:02d}.wav" for i in range(1, 33)],
    "man": [
        f"librispeech_kennethwang/LibriSpeech/test-clean/1089/{p}.flac"
        for p in ("134686/1089-134686-0000", "134686/1089-134686-0001", "134691/1089-134691-0001")
    ],
    "sb1": [f"speechbrain/spk1_snt{i}.wav" for i in range(1, 6)],
    "sb2": [f"speechbrain/spk2_snt{i}.wav" for i in range(1, 6)],
    "lv": [f"pocketsphinx_librivox/sense_and_sensibility_01_austen_64kb-0{i}.wav" for i in (870, 890, 920)],
    "gb0": ["long_gb0/gb0.wav"],
    "lh": ["lhotse/2412-153948-0000.flac"],
}


@dataclass(frozen=True)
class Turn:
    start_s: float
    end_s: float
    who: str
    kind: str  # tiny, short, mid, long


def voiced_stretches(x: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) sample indices of the clip's voiced stretches, split at pauses of >= 0.1 s."""
    n = len(x) // FRAME
    if n == 0:
        return []
    rms = np.sqrt(np.mean(np.square(x[: n * FRAME].reshape(n, FRAME).astype(np.float64)), axis=1)) + 1e-10
    loud = 20 * np.log10(rms) > 20 * np.log10(rms.max()) - QUIET_DB
    out: list[list[int]] = []
    quiet = MIN_PAUSE_FRAMES
    for i, on in enumerate(loud):
        if on:
            if out and quiet < MIN_PAUSE_FRAMES:
                out[-1][1] = i + 1
            else:
                out.append([i, i + 1])
            quiet = 0
        else:
            quiet += 1
    return [(a * FRAME, b * FRAME) for a, b in out]


def pieces(x: np.ndarray, low_s: float, high_s: float) -> list[tuple[int, int]]:
    """Runs of consecutive voiced stretches whose span lies in [low_s, high_s]."""
    parts = voiced_stretches(x)
    out = []
    for i in range(len(parts)):
        for j in range(i, len(parts)):
            length = (parts[j][1] - parts[i][0]) / RATE
            if length > high_s:
                break
            if length >= low_s:
                out.append((parts[i][0], parts[j][1]))
    return out


def build(
    speech: Path, who: list[str], kinds: list[str], seed: int, pause_s: tuple[float, float] = (0.2, 0.7)
) -> tuple[np.ndarray, list[Turn]]:
    """Samples (16 kHz) and the truth for turns by ``who[k]`` of length class ``kinds[k]``."""
    from pipeline.audio import media

    rng = np.random.default_rng(seed)
    decoded: dict[str, list[np.ndarray]] = {}
    samples, truth, t = [np.zeros(RATE // 2, np.float32)], [], 0.5
    for name, kind in zip(who, kinds):
        if name not in decoded:  # each reader's clips decoded once, not once per turn
            decoded[name] = [media.decode(speech / rel) for rel in READERS[name]]
        clips = decoded[name]
        low, high = LENGTHS_S[kind]
        found = [(c, a, b) for c, x in enumerate(clips) for a, b in pieces(x, low, high)]
        if not found and kind == "tiny":  # a reader with no word that short: the three shortest short pieces
            short = [(c, a, b) for c, x in enumerate(clips) for a, b in pieces(x, *LENGTHS_S["short"])]
            found = sorted(short, key=lambda p: p[2] - p[1])[:3]
        if not found:
            raise ValueError(f"no {kind} piece in {name}'s clips")
        c, a, b = found[int(rng.integers(len(found)))]
        piece = clips[c][a:b]
        truth.append(Turn(round(t, 3), round(t + len(piece) / RATE, 3), name, kind))
        pause = float(rng.uniform(*pause_s))
        samples += [piece, np.zeros(int(pause * RATE), np.float32)]
        t += len(piece) / RATE + pause
    return np.concatenate(samples), truth


def plan(
    readers: list[str],
    n_turns: int,
    seed: int,
    short_share: float = 0.4,
    tiny_share: float = 0.0,
    same_share: float = 0.0,
) -> tuple[list[str], list[str]]:
    """Turns that alternate between readers, long ones around short ones. ``tiny_share`` of the short turns are
    0.25-0.45 s backchannels; ``same_share`` of them are said by the reader of the long turn before, who then goes
    on (a pause inside one reader's talk: the short piece must keep that reader's label), the others by another
    reader between two turns of one reader where there are two. With both shares 0 the draws (and so a seed's
    conversation) are those of the plain plan."""
    rng = np.random.default_rng(seed)
    who, kinds = [], []
    for k in range(n_turns):
        if k >= 2 and kinds[-1] in ("short", "tiny") and same_share and who[-1] == who[-2]:
            who.append(who[-1])  # the reader who paused goes on
            kinds.append("long")
            continue
        others = [r for r in readers if not who or r != who[-1]]
        who.append(others[int(rng.integers(len(others)))])
        if k == 0 or kinds[-1] != "long":
            kinds.append("long")
        else:
            u = rng.uniform()
            kind = "short" if u < short_share else "mid" if u < short_share + 0.15 else "long"
            if kind == "short" and tiny_share and rng.uniform() < tiny_share:
                kind = "tiny"
            after_own = len(who) >= 3 and who[-2] == who[-3]  # no reader talks on in pieces twice in a row
            if kind in ("short", "tiny") and same_share and rng.uniform() < same_share and not after_own:
                who[-1] = who[-2]
            kinds.append(kind)
    return who, kinds


def write_wav(path: Path, samples: np.ndarray) -> None:
    import wave

    with wave.open(str(path), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(RATE)
        f.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())


def bucket(length_s: float) -> str:
    return "<0.5 s" if length_s < 0.5 else "0.5-1 s" if length_s < 1.0 else "1-2 s" if length_s < 2.0 else ">2 s"


BUCKETS = ("<0.5 s", "0.5-1 s", "1-2 s", ">2 s")
