"""Speaker labels on the long-form set: diarization error against the references' speakers, counts, cost.

    .venv/bin/python bench/bench_diarize.py [--job-dir DIR] [--longform ../shared/longform] [--model base]

Transcribes the episodes with podscribe (`--model base --word-timestamps`, into --job-dir, reused when it is
already finished there), then times the diarize stage (`Diarizer.label`, model load outside the clock) on each
file's segments, as `--diarize` runs it, and scores it on a 10 ms grid:

  right       reference speech time labelled with its speaker, after the best one-to-one mapping of labels
  confusion   reference speech time labelled with another speaker
  missed      reference speech time no labelled word/segment covers (mostly the transcript's own gaps)
  false       labelled time outside every reference sentence (mostly pauses inside segments)
  DER         (confusion + missed + false) / reference speech time

"oracle windows" runs the same embedder and clustering on windows over the reference sentences (clustering
alone, no transcript). Cost: diarize seconds per audio minute, and as a share of the transcription's wall time.

Then conversations built from ../shared/speech's real clips, grouped by who speaks in them (LJSpeech's
reader, a LibriSpeech reader, SpeechBrain's two speakers, a LibriVox reader, ...), joined in turns with
0.5-1.2 s pauses, plus single-speaker files and two espeak-ng voices reading examples/episode.txt: found
vs true speaker count and the share of speech time right, with the clips' own spans as the speech
(`--skip-clips` leaves them out; `--skip-longform` the long-form set).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.diarize.diarizer import Diarizer  # noqa: E402
from pipeline.diarize.options import DiarizeOptions  # noqa: E402
from pipeline.manifest import JobDir  # noqa: E402

STEP_S = 0.01


def grid(spans: list[tuple[float, float, str]], n: int) -> np.ndarray:
    out = np.full(n, "", dtype=object)
    for lo, hi, who in spans:
        out[int(lo / STEP_S) : int(hi / STEP_S)] = who
    return out


def score(reference: list[tuple[float, float, str]], hypothesis: list[tuple[float, float, str]], duration: float):
    n = int(duration / STEP_S) + 1
    ref, hyp = grid(reference, n), grid(hypothesis, n)
    speech = ref != ""
    people = sorted(set(ref[speech]))
    labels = sorted(set(hyp[hyp != ""]))
    both = speech & (hyp != "")
    best = max(
        sum(np.count_nonzero(both & (ref == p) & (hyp == lab)) for p, lab in zip(people, perm) if lab)
        for perm in itertools.permutations(labels + [None] * len(people), len(people))
    )
    total = np.count_nonzero(speech)
    missed = np.count_nonzero(speech & (hyp == ""))
    false = np.count_nonzero(~speech & (hyp != ""))
    confusion = np.count_nonzero(both) - best
    return {
        "speakers_ref": len(people),
        "speakers_found": len(labels),
        "right": best / total,
        "confusion": confusion / total,
        "missed": missed / total,
        "false": false / total,
        "DER": (confusion + missed + false) / total,
    }


def hypothesis_spans(segments: list[dict]) -> list[tuple[float, float, str]]:
    out = []
    for s in segments:
        words = s.get("words") or []
        out += [(w["start_s"], w["end_s"], w["speaker"] or s["speaker"]) for w in words] or [
            (s["start_s"], s["end_s"], s["speaker"])
        ]
    return out


SPEECH_GROUPS = {
    "lj": [f"ljspeech_coqui/wavs/LJ001-00{i:02d}.wav" for i in range(1, 33)],
    "man": [
        f"librispeech_kennethwang/LibriSpeech/test-clean/1089/{p}.flac"
        for p in (
            "134686/1089-134686-0000",
            "134686/1089-134686-0001",
            "134691/1089-134691-0000",
            "134691/1089-134691-0001",
        )
    ],
    "sb1": [f"speechbrain/spk1_snt{i}.wav" for i in range(1, 6)],
    "sb2": [f"speechbrain/spk2_snt{i}.wav" for i in range(1, 6)],
    "lv": [f"pocketsphinx_librivox/sense_and_sensibility_01_austen_64kb-0{i}.wav" for i in (870, 880, 890, 920, 930)],
    "lh": ["lhotse/2412-153948-0000.flac"],
    "jfk": ["openai_whisper/jfk.flac"],
    "gb0": ["long_gb0/gb0.wav"],
}


def conversations(speech: Path, here: Path) -> list[tuple[str, np.ndarray, list[tuple[float, float, str]]]]:
    """(name, samples, truth) for conversations in turns of the clip groups, and one-speaker files."""
    from pipeline import audio

    g = SPEECH_GROUPS
    plans = {
        "lj+man+sb1 (3)": [(w, g[w][k % len(g[w])]) for k in range(5) for w in ("lj", "man", "sb1")],
        "sb1+sb2 (2)": [(w, p) for a, b in zip(g["sb1"], g["sb2"]) for w, p in (("sb1", a), ("sb2", b))],
        "lj+lv (2)": [(w, p) for a, b in zip(g["lj"][10:15], g["lv"]) for w, p in (("lj", a), ("lv", b))],
        "man+lh+lj (3)": [
            ("man", g["man"][0]),
            ("lh", g["lh"][0]),
            ("lj", g["lj"][20]),
            ("man", g["man"][3]),
            ("lj", g["lj"][21]),
        ],
        "lj (1)": [("lj", p) for p in g["lj"][:20]],
        "lv (1)": [("lv", p) for p in g["lv"]],
        "gb0 (1)": [("gb0", g["gb0"][0])],
        "jfk (1)": [("jfk", g["jfk"][0])],
    }
    rng = np.random.default_rng(0)
    out = []
    for name, parts in plans.items():
        clips = [(who, audio.decode(speech / rel)) for who, rel in parts]
        out.append((name, *_joined(clips, rng)))
    text = (here / "examples" / "episode.txt").read_text().splitlines()
    lines = [line.split("|", 1) for line in text if "|" in line and not line.startswith("#")]
    clips = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, (voice, text) in enumerate(lines[:12]):
            wav = Path(tmp) / f"{k}.wav"
            subprocess.run(["espeak-ng", "-v", voice, "-s", "135", "-w", str(wav), text], check=True)
            clips.append((voice, audio.decode(wav)))
    out.append(("espeak-ng pair (2)", *_joined(clips, rng)))
    return out


def _joined(clips, rng) -> tuple[np.ndarray, list[tuple[float, float, str]]]:
    pieces, truth, t = [np.zeros(8000, np.float32)], [], 0.5
    for who, x in clips:
        truth.append((t, t + len(x) / 16_000, who))
        pause = float(rng.uniform(0.5, 1.2))
        pieces += [x, np.zeros(int(pause * 16_000), np.float32)]
        t += len(x) / 16_000 + pause
    return np.concatenate(pieces), truth


def clip_conversations(diarizer: Diarizer, speech: Path, here: Path) -> None:
    from pipeline.diarize import cluster, turns
    from pipeline.diarize.diarizer import RELIABLE_S, Stream

    print(f"\n{'conversation from real clips':28} {'speakers true/found':>20} {'right':>7}")
    for name, samples, truth in conversations(speech, here):
        regions = [(a, b) for a, b, _ in truth]
        stream = Stream(samples[i : i + 80_000] for i in range(0, len(samples), 80_000))
        spans, vectors = diarizer.embed(stream, regions)
        reliable = np.array([hi - lo >= RELIABLE_S for lo, hi in spans])
        labels = cluster.cluster(vectors, reliable=reliable)
        found = turns.turns(regions, spans, [int(x) for x in labels])
        got = score(truth, [(t.start_s, t.end_s, t.speaker) for t in found], len(samples) / 16_000)
        print(f"{name:28} {got['speakers_ref']:>10}/{got['speakers_found']:<9} {got['right']:7.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = Path(__file__).resolve().parents[1]
    parser.add_argument(
        "--longform",
        type=Path,
        default=Path(os.environ.get("PODSCRIBE_LONGFORM_DIR", here.parent / "shared" / "longform")),
    )
    parser.add_argument("--job-dir", type=Path, default=Path("/tmp/podscribe-bench-diarize"))
    parser.add_argument("--model", default="base")
    parser.add_argument("--hop", type=float, default=DiarizeOptions.hop_s, help="window hop, s")
    parser.add_argument("--window", type=float, default=DiarizeOptions.window_s, help="window length, s")
    parser.add_argument("--change", type=float, default=None, help="diarizer.CHANGE (refine below this cosine)")
    parser.add_argument("--speech", type=Path, default=here.parent / "shared" / "speech")
    parser.add_argument("--skip-clips", action="store_true")
    parser.add_argument("--skip-longform", action="store_true")
    parser.add_argument("--out", type=Path, help="results as JSON")
    args = parser.parse_args()

    if args.change is not None:
        import pipeline.diarize.diarizer as module

        module.CHANGE = args.change
    diarizer = Diarizer(DiarizeOptions(window_s=args.window, hop_s=args.hop))
    if not args.skip_longform:
        longform(args, diarizer)
    if not args.skip_clips:
        clip_conversations(diarizer, args.speech, here)


def longform(args, diarizer: Diarizer) -> None:
    episodes = sorted(p.name[: -len(".ref.json")] for p in args.longform.glob("*.ref.json"))
    refs = {e: json.loads((args.longform / f"{e}.ref.json").read_text()) for e in episodes}
    audio = {e: args.longform / refs[e]["audio"] for e in episodes}

    from pipeline.decode import DecodeOptions
    from pipeline.runner import JobOptions, run

    run(
        [str(p) for p in audio.values()],
        JobOptions(args.job_dir, model=args.model, progress=False, decode=DecodeOptions(word_timestamps=True)),
    )
    job = JobDir(args.job_dir)
    files = {Path(r["path"]).name: r for r in job.file_rows()}
    segments: dict[str, list[dict]] = {}
    for s in job.read("segments").to_pylist():
        segments.setdefault(s["file_id"], []).append(s)

    results = {}
    for e in episodes:
        row = files[audio[e].name]
        segs = sorted(segments[row["file_id"]], key=lambda s: s["segment"])
        t0 = time.perf_counter()
        labelled, n_speakers = diarizer.label(audio[e], segs, row["duration_s"])
        seconds = time.perf_counter() - t0
        reference = [(s["start"], s["end"], s["speaker"]) for s in refs[e]["sentences"]]
        got = score(reference, hypothesis_spans(labelled), row["duration_s"])
        oracle_rows = [
            {"start_s": a, "end_s": b, "words": None, "segment": i, "text": "", "flags": []}
            for i, (a, b, _) in enumerate(reference)
        ]
        oracle = score(
            reference, hypothesis_spans(diarizer.label(audio[e], oracle_rows, row["duration_s"])[0]), row["duration_s"]
        )
        results[e] = {
            **got,
            "oracle_right": oracle["right"],
            "oracle_speakers": oracle["speakers_found"],
            "diarize_s": seconds,
            "audio_min": row["duration_s"] / 60,
            "s_per_audio_min": seconds / (row["duration_s"] / 60),
            "transcribe_wall_s": row["wall_s"],
            "share_of_transcription": seconds / row["wall_s"],
        }
    head = f"{'episode':14} {'spk ref/found':>13} {'right':>6} {'conf':>6} {'missed':>6} {'false':>6} {'DER':>6} {'oracle':>7} {'s/min':>6} {'cost':>6}"
    print(head)
    for e, r in results.items():
        print(
            f"{e:14} {r['speakers_ref']:>6}/{r['speakers_found']:<6} {r['right']:6.1%} {r['confusion']:6.1%} {r['missed']:6.1%} "
            f"{r['false']:6.1%} {r['DER']:6.1%} {r['oracle_right']:7.1%} {r['s_per_audio_min']:6.2f} {r['share_of_transcription']:6.1%}"
        )
    total_s = sum(r["diarize_s"] for r in results.values())
    print(
        f"all: {total_s:.1f} s of diarization for {sum(r['audio_min'] for r in results.values()):.1f} audio min "
        f"({total_s / sum(r['transcribe_wall_s'] for r in results.values()):.1%} of the transcription's wall time)"
    )
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
