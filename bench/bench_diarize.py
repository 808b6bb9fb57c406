"""Speaker labels: sentences with the right speaker per turn length, speech time right, counts, cost.

    .venv/bin/python -m bench.bench_diarize [--job-dir DIR] [--longform ../shared/longform] [--model base]
        [--rules sentence,keep,nearest] [--words-cost] [--skip-exchanges] [--skip-longform] [--skip-clips]

Quick exchanges: conversations built from ../shared/speech's real clips by exchanges.py (seeded, not tuned
to): two or three readers, long turns with turns of 0.3-1.0 s (and some of 1-2 s) between them, 0.2-0.7 s
pauses. Then the long-form set (../shared/longform). Both are transcribed with podscribe (`--model base`,
word timings; reused when finished in --job-dir), then labelled as `--diarize` does (`Diarizer.label`, model
load outside the clock), once per short-turn rule (short.py), and scored:

  sentences   a reference sentence (a turn, in the exchanges) is right when the label with most word time
              inside it maps to its speaker (best one-to-one mapping of labels); bucketed by the length of the
              turn it is in (< 0.5 s, 0.5-1 s, 1-2 s, > 2 s); "no words": the transcript has none there
  time right  reference speech time labelled with its speaker on a 10 ms grid (same mapping)
  cost        diarize seconds per audio minute, and as a share of the transcription's wall time

``--words-cost`` also transcribes without word timings (what they cost; noisy on a shared machine). Last,
conversations joined from whole clips (0.5-1.2 s pauses), one-speaker files and two espeak-ng voices, with
the clips' own spans as the speech: found vs true speaker count and the share of speech time right.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from bench import exchanges
from pipeline.diarize.diarizer import Diarizer
from pipeline.diarize.options import DiarizeOptions
from pipeline.manifest import JobDir

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


def mapping(reference, hypothesis) -> dict[str, str]:
    """Hypothesis label -> reference speaker: the one-to-one mapping with most overlapping time."""
    time: dict[tuple[str, str], float] = {}
    for a, b, who in reference:
        for lo, hi, lab in hypothesis:
            overlap = min(b, hi) - max(a, lo)
            if overlap > 0:
                time[(who, lab)] = time.get((who, lab), 0.0) + overlap
    people = sorted({w for w, _ in time})
    labels = sorted({lab for _, lab in time})
    best = max(
        itertools.permutations(labels + [None] * len(people), len(people)),
        key=lambda perm: sum(time.get((p, lab), 0.0) for p, lab in zip(people, perm)),
    )
    return {lab: p for p, lab in zip(people, best) if lab}


def sentence_scores(reference: list[tuple[float, float, str]], hypothesis, turn_length: list[float]) -> dict:
    """Per reference sentence: right when the label with most word time inside it maps to its speaker. Bucketed
    by the length of the turn (run of one speaker's sentences) the sentence is in; no words: counted wrong."""
    names = mapping(reference, hypothesis)
    out = {b: [0, 0, 0] for b in exchanges.BUCKETS}  # right, total, without words
    for (a, b, who), length in zip(reference, turn_length):
        time: dict[str, float] = {}
        for lo, hi, lab in hypothesis:
            overlap = min(b, hi) - max(a, lo)
            if overlap > 0:
                time[lab] = time.get(lab, 0.0) + overlap
        cell = out[exchanges.bucket(length)]
        cell[1] += 1
        if not time:
            cell[2] += 1
        elif names.get(max(time, key=time.get)) == who:
            cell[0] += 1
    return out


def turn_lengths(reference: list[tuple[float, float, str]], pause_s: float = 1.5) -> list[float]:
    """Each sentence's turn length: consecutive sentences of one speaker (apart by < pause_s) are one turn."""
    out, k = [], 0
    while k < len(reference):
        j = k
        while (
            j + 1 < len(reference)
            and reference[j + 1][2] == reference[k][2]
            and reference[j + 1][0] - reference[j][1] < pause_s
        ):
            j += 1
        out += [reference[j][1] - reference[k][0]] * (j - k + 1)
        k = j + 1
    return out


def add_cells(total: dict, cells: dict) -> None:
    for b, (r, n, m) in cells.items():
        cell = total.setdefault(b, [0, 0, 0])
        cell[0], cell[1], cell[2] = cell[0] + r, cell[1] + n, cell[2] + m


def cells_line(cells: dict) -> str:
    right = sum(c[0] for c in cells.values())
    total = sum(c[1] for c in cells.values())
    parts = [f"{b} {c[0]}/{c[1]}" + (f" ({c[2]} no words)" if c[2] else "") for b, c in cells.items() if c[1]]
    return f"{right}/{total} = {right / max(total, 1):.1%}   " + "   ".join(parts)


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


EXCHANGES = [(["lj", "man"], 1), (["lj", "sb1", "gb0"], 2), (["gb0", "lj"], 3), (["man", "sb1", "lj"], 4)]
N_TURNS = 24


def transcribe(args, paths: list[Path], job_dir: Path, words: bool = True) -> dict[str, tuple[dict, list[dict]]]:
    """Each file's row and segments (time order), transcribed with ``args.model`` (reused when finished)."""
    from pipeline.decode import DecodeOptions
    from pipeline.runner import JobOptions, run

    run(
        [str(p) for p in paths],
        JobOptions(job_dir, model=args.model, progress=False, decode=DecodeOptions(word_timestamps=words)),
    )
    job = JobDir(job_dir)
    segments: dict[str, list[dict]] = {}
    for s in job.read("segments").to_pylist():
        segments.setdefault(s["file_id"], []).append(s)
    return {
        Path(r["path"]).name: (r, sorted(segments.get(r["file_id"], []), key=lambda s: s["segment"]))
        for r in job.file_rows()
    }


def words_cost(args, paths: list[Path], job_dir: Path, with_words: dict) -> None:
    """The transcription's wall time without word timings, beside the one with them (same files, same run)."""
    without = transcribe(args, paths, job_dir, words=False)
    a = sum(with_words[p.name][0]["wall_s"] for p in paths)
    b = sum(without[p.name][0]["wall_s"] for p in paths)
    print(f"word timings: transcription {b:.1f} s without, {a:.1f} s with (+{a / b - 1:.1%})")


def label_all(diarizer, files, items, reference_of, turn_length_of, title: str) -> dict:
    """Labels every file with ``diarizer`` (timed), prints per file and overall: sentences right per bucket."""
    total: dict = {}
    diarize_s = wall_s = audio_s = 0.0
    results = {}
    print(f"\n{title}")
    for name, path in items:
        row, segs = files[path.name]
        t0 = time.perf_counter()
        labelled, _ = diarizer.label(path, segs, row["duration_s"])
        seconds = time.perf_counter() - t0
        reference = reference_of(name)
        hyp = hypothesis_spans(labelled)
        got = score(reference, hyp, row["duration_s"])
        cells = sentence_scores(reference, hyp, turn_length_of(name))
        add_cells(total, cells)
        diarize_s, wall_s, audio_s = diarize_s + seconds, wall_s + row["wall_s"], audio_s + row["duration_s"]
        results[name] = {**got, "cells": cells, "diarize_s": seconds, "transcribe_wall_s": row["wall_s"]}
        print(
            f"  {name:22} spk {got['speakers_ref']}/{got['speakers_found']}  time right {got['right']:6.1%}  "
            f"sentences {cells_line(cells)}  {seconds / (row['duration_s'] / 60):.2f} s/min  {seconds / row['wall_s']:.1%}"
        )
    print(
        f"  {'all':22} sentences {cells_line(total)}  "
        f"{diarize_s / (audio_s / 60):.2f} s/min  cost {diarize_s / wall_s:.1%} of transcription"
    )
    return {"files": results, "cells": total, "diarize_s": diarize_s, "transcribe_wall_s": wall_s}


def quick_exchanges(args, diarizers: dict) -> dict:
    """Conversations built from the real clips (exchanges.py, seeded): long turns with short ones between."""
    folder = args.job_dir / "exchanges-audio"
    folder.mkdir(parents=True, exist_ok=True)
    truths, items = {}, []
    for readers, seed in EXCHANGES:
        name = f"{'+'.join(readers)} #{seed}"
        x, truth = exchanges.build(args.speech, *exchanges.plan(readers, N_TURNS, seed), seed)
        path = folder / f"{'_'.join(readers)}_{seed}.wav"
        if not path.exists():
            exchanges.write_wav(path, x)
        truths[name] = truth
        items.append((name, path))
    files = transcribe(args, [p for _, p in items], args.job_dir / "exchanges")
    if args.words_cost:
        words_cost(args, [p for _, p in items], args.job_dir / "exchanges-nowords", files)
    return {
        rule: label_all(
            d,
            files,
            items,
            lambda n: [(t.start_s, t.end_s, t.who) for t in truths[n]],
            lambda n: [t.end_s - t.start_s for t in truths[n]],
            f"quick exchanges from the real clips, short-turn rule {rule!r}",
        )
        for rule, d in diarizers.items()
    }


def longform(args, diarizers: dict) -> dict:
    episodes = sorted(p.name[: -len(".ref.json")] for p in args.longform.glob("*.ref.json"))
    refs = {e: json.loads((args.longform / f"{e}.ref.json").read_text()) for e in episodes}
    items = [(e, args.longform / refs[e]["audio"]) for e in episodes]
    files = transcribe(args, [p for _, p in items], args.job_dir)
    if args.words_cost:
        words_cost(args, [p for _, p in items], args.job_dir.with_name(args.job_dir.name + "-nowords"), files)

    def reference(e):
        return [(s["start"], s["end"], s["speaker"]) for s in refs[e]["sentences"]]

    return {
        rule: label_all(
            d,
            files,
            items,
            reference,
            lambda e: turn_lengths(reference(e)),
            f"long-form set, short-turn rule {rule!r}",
        )
        for rule, d in diarizers.items()
    }


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
    parser.add_argument("--rules", default="sentence,keep,nearest", help="short-turn rules to compare")
    parser.add_argument("--speech", type=Path, default=here.parent / "shared" / "speech")
    parser.add_argument("--words-cost", action="store_true", help="also transcribe without word timings, timed")
    parser.add_argument("--skip-clips", action="store_true")
    parser.add_argument("--skip-exchanges", action="store_true")
    parser.add_argument("--skip-longform", action="store_true")
    parser.add_argument("--out", type=Path, help="results as JSON")
    args = parser.parse_args()

    diarizers = {rule: Diarizer(DiarizeOptions(short_rule=rule)) for rule in args.rules.split(",")}
    results = {}
    if not args.skip_exchanges:
        results["exchanges"] = quick_exchanges(args, diarizers)
    if not args.skip_longform:
        results["longform"] = longform(args, diarizers)
    if not args.skip_clips:
        clip_conversations(next(iter(diarizers.values())), args.speech, here)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
