"""Speaker labels: sentences with the right speaker and speech time right per turn length, and their cost.

    .venv/bin/python -m bench.bench_diarize [--job-dir DIR] [--longform ../shared/longform] [--model base]
        [--rules sentence,keep,nearest] [--per-file] [--words-cost] [--skip-exchanges] [--skip-longform]
        [--skip-clips] [--out results.json]

Two sets. Quick exchanges: conversations built from ../shared/speech's real clips by exchanges.py (seeded, not
tuned to): two or three readers, long turns with turns of 0.3-1.0 s (and some of 1-2 s) between them, 0.2-0.7 s
pauses; four more with 0.25-0.45 s backchannels and short pieces said by the reader who then goes on after a
pause (where a short turn's own voice is weakest and the short-turn rules differ). Then the long-form set
(../shared/longform). Both are transcribed with podscribe (`--model base`, word timings; reused when finished
in --job-dir), then labelled as `--diarize` does (`Diarizer.label`, model load outside the clock), once per
short-turn rule (short.py), and printed as one table per rule:

  sentences   a reference sentence (a turn, in the exchanges) is right when the label with most word time
              inside it maps to its speaker (best one-to-one mapping of labels); bucketed by the length of the
              turn it is in (< 0.5 s, 0.5-1 s, 1-2 s, > 2 s); a sentence without decoded words counts wrong
  time right  the sentences' time labelled with their speaker on a 10 ms grid (same mapping; the gaps
              between decoded words count as not labelled)
  cost        labelling seconds per audio minute, and as a share of the transcription's wall time

per set and overall, with the issue's targets; then the rules side by side (with the exchanges' short turns
split into a reader going on after a pause and another reader). ``--words-cost`` also transcribes without
word timings (what they cost; noisy on a shared machine). Last, conversations joined from whole clips
(0.5-1.2 s pauses), one-speaker files and two espeak-ng voices, with the clips' own spans as the speech: found
vs true speaker count and the share of speech time right.
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
from bench.common import cpu_s
from pipeline.diarize.diarizer import Diarizer
from pipeline.diarize.options import DiarizeOptions
from pipeline.storage.manifest import JobDir

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


def sentence_scores(reference: list[tuple[float, float, str]], hypothesis, keys: list[str]) -> dict:
    """Per reference sentence: right when the label with most word time inside it maps to its speaker; and its
    time on the 10 ms grid labelled with its speaker (same mapping). Summed per key (``keys[k]``: sentence k's
    bucket); no words: counted wrong. Cells: [right, sentences, without words, time right s, time s]."""
    names = mapping(reference, hypothesis)
    n = int(max([b for _, b, _ in reference] + [hi for _, hi, _ in hypothesis] + [0]) / STEP_S) + 2
    hyp = grid([(lo, hi, names.get(lab, "?")) for lo, hi, lab in hypothesis], n)
    out: dict[str, list[float]] = {}
    for (a, b, who), key in zip(reference, keys):
        time: dict[str, float] = {}
        for lo, hi, lab in hypothesis:
            overlap = min(b, hi) - max(a, lo)
            if overlap > 0:
                time[lab] = time.get(lab, 0.0) + overlap
        cell = out.setdefault(key, [0, 0, 0, 0.0, 0.0])
        cell[1] += 1
        if not time:
            cell[2] += 1
        elif names.get(max(time, key=time.get)) == who:
            cell[0] += 1
        span = hyp[int(a / STEP_S) : int(b / STEP_S)]
        cell[3] += np.count_nonzero(span == who) * STEP_S
        cell[4] += len(span) * STEP_S
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
    for key, cell in cells.items():
        into = total.setdefault(key, [0, 0, 0, 0.0, 0.0])
        for i, v in enumerate(cell):
            into[i] += v


def summed(cells: dict, keys=None) -> list[float]:
    out = [0, 0, 0, 0.0, 0.0]
    for key, cell in cells.items():
        if keys is None or key in keys:
            add_cells({"": out}, {"": cell})
    return out


def sentences_cell(c) -> str:
    return f"{c[0]}/{c[1]} {c[0] / c[1]:6.1%}" if c[1] else "-"


def time_cell(c) -> str:
    return f"{c[3] / c[4]:.1%}" if c[4] else "-"


def table(title: str, sets: dict[str, dict]) -> dict:
    """Per set and overall: sentences right and speech time right per turn-length bucket, then the cost of
    labelling. ``sets``: name -> label_all's result. Returns the overall cells and cost."""
    overall = {"cells": {}, "diarize_s": 0.0, "diarize_cpu_s": 0.0, "transcribe_wall_s": 0.0, "audio_s": 0.0}
    for got in sets.values():
        add_cells(overall["cells"], got["cells"])
        for k in ("diarize_s", "diarize_cpu_s", "transcribe_wall_s", "audio_s"):
            overall[k] += got[k]
    rows = {**sets, "overall": overall} if len(sets) > 1 else dict(sets)
    width = 16
    print(f"\n{title}")
    print(f"  {'':17} {'':11}" + "".join(f"{b:>{width}}" for b in (*exchanges.BUCKETS, "all")))
    for name, got in rows.items():
        cells = got["cells"]
        line = [sentences_cell(cells.get(b, [0, 0])) for b in exchanges.BUCKETS] + [sentences_cell(summed(cells))]
        print(f"  {name:17} {'sentences':11}" + "".join(f"{x:>{width}}" for x in line))
        line = [time_cell(cells.get(b, [0] * 5)) for b in exchanges.BUCKETS] + [time_cell(summed(cells))]
        print(f"  {'':17} {'time right':11}" + "".join(f"{x:>{width}}" for x in line))
        missing = summed(cells)[2]
        if missing:
            print(f"  {'':17} ({missing} sentences without decoded words, counted wrong)")
    for name, got in rows.items():
        print(
            f"  cost, {name}: {got['diarize_s'] / (got['audio_s'] / 60):.2f} s per audio minute "
            f"({got['diarize_cpu_s'] / (got['audio_s'] / 60):.2f} CPU s), "
            f"{got['diarize_s'] / got['transcribe_wall_s']:.1%} of the transcription's wall time"
        )
    cells = overall["cells"]
    everything, quick = summed(cells), summed(cells, ("<0.5 s", "0.5-1 s"))
    cost = overall["diarize_s"] / overall["transcribe_wall_s"]
    print(
        f"  targets: sentences {everything[0] / everything[1]:.1%} (>= 97%), turns under 1 s "
        f"{quick[0] / max(quick[1], 1):.1%} (>= 90%), cost {cost:.1%} (<= 10%)"
    )
    return overall


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
    from pipeline.audio import media

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
        clips = [(who, media.decode(speech / rel)) for who, rel in parts]
        out.append((name, *_joined(clips, rng)))
    text = (here / "examples" / "episode.txt").read_text().splitlines()
    lines = [line.split("|", 1) for line in text if "|" in line and not line.startswith("#")]
    clips = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, (voice, text) in enumerate(lines[:12]):
            wav = Path(tmp) / f"{k}.wav"
            subprocess.run(["espeak-ng", "-v", voice, "-s", "135", "-w", str(wav), text], check=True)
            clips.append((voice, media.decode(wav)))
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


# Quick exchanges: long turns with short ones (0.3-1.0 s) and some of 1-2 s between them; then backchannels of
# 0.25-0.45 s and short pieces said by the reader who then goes on after a pause (where a short turn's voice
# is least clear, and the short-turn rules differ). Readers and seeds chosen before any was measured.
EXCHANGES = [(["lj", "man"], 1), (["lj", "sb1", "gb0"], 2), (["gb0", "lj"], 3), (["man", "sb1", "lj"], 4)]
BACKCHANNELS = [(["lj", "man"], 11), (["lj", "gb0"], 12), (["sb1", "man", "lj"], 13), (["gb0", "man"], 14)]
N_TURNS = 24
BACKCHANNEL_PLAN = {"n_turns": 36, "short_share": 0.5, "tiny_share": 0.5, "same_share": 0.4}


def transcribe(args, paths: list[Path], job_dir: Path, words: bool = True) -> dict[str, tuple[dict, list[dict]]]:
    """Each file's row and segments (time order), transcribed with ``args.model`` (reused when finished)."""
    from pipeline.decode import DecodeOptions
    from pipeline.job.config import JobOptions
    from pipeline.job.run import run

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


class WeakCount:
    """Counts the short stretches whose own voice was weak evidence (short.decide's margin not met), and those
    among them where the rules would choose differently."""

    def __init__(self):
        from pipeline.diarize import short
        from pipeline.diarize.options import SHORT_RULES

        self.short, self.real, self.rules = short, short.decide, SHORT_RULES
        self.weak = self.judged = self.split = 0
        short.decide = self

    def __call__(self, who, rows, vectors, new_sentence, ids, centre, *rest, **kw):
        margin = kw.get("margin", self.short.MARGIN)
        choices = [self.real(who, rows, vectors, new_sentence, ids, centre, rule, margin=margin) for rule in self.rules]
        for k, row in enumerate(rows):
            if row is not None and len(ids) >= 2 and np.any(vectors[row]):
                v = vectors[row] / max(float(np.linalg.norm(vectors[row])), 1e-8)
                top = np.sort(centre @ v)[::-1]
                self.judged += 1
                self.weak += int(top[0] - top[1] < margin)
                self.split += int(len({c[k] for c in choices}) > 1)
        return self.real(who, rows, vectors, new_sentence, ids, centre, *rest, **kw)


def shared_embeddings(diarizers: dict) -> dict:
    """The rules differ only in what a short stretch with weak evidence takes: every rule after the first reuses
    the first one's windows and vectors for a file (so only the first rule's cost is a cost)."""
    memo: dict = {}
    for diarizer in diarizers.values():

        def embed(stream, regions, real=diarizer.embed):
            key = tuple(regions)
            if key not in memo:
                memo[key] = real(stream, regions)
            return memo[key]

        diarizer.embed = embed
    return memo


def label_all(diarizer, files, items, reference_of, keys_of, per_file: bool) -> dict:
    """Labels every file with ``diarizer`` (timed, the model loaded outside the clock) and scores it."""
    total: dict = {}
    diarize_s = wall_s = audio_s = cpu_total = 0.0
    results = {}
    for name, path in items:
        row, segs = files[path.name]
        t0, c0 = time.perf_counter(), cpu_s()
        labelled, _ = diarizer.label(path, segs, row["duration_s"])
        seconds, cpu = time.perf_counter() - t0, cpu_s() - c0
        reference = reference_of(name)
        hyp = hypothesis_spans(labelled)
        got = score(reference, hyp, row["duration_s"])
        cells = sentence_scores(reference, hyp, keys_of(name))
        add_cells(total, cells)
        diarize_s, wall_s, audio_s = diarize_s + seconds, wall_s + row["wall_s"], audio_s + row["duration_s"]
        cpu_total += cpu
        results[name] = {**got, "cells": cells, "diarize_s": seconds, "transcribe_wall_s": row["wall_s"]}
        if per_file:
            c = summed(cells)
            print(
                f"    {name:24} spk {got['speakers_ref']}/{got['speakers_found']}  time right {got['right']:6.1%}  "
                f"sentences {sentences_cell(c)}  {seconds / (row['duration_s'] / 60):.2f} s/min"
            )
    cells = {b: c for b, c in total.items() if b in exchanges.BUCKETS}
    return {
        "files": results,
        "cells": cells,
        "kinds": {k: c for k, c in total.items() if k not in exchanges.BUCKETS},
        "diarize_s": diarize_s,
        "diarize_cpu_s": cpu_total,
        "transcribe_wall_s": wall_s,
        "audio_s": audio_s,
    }


def exchange_files(args) -> tuple[dict, list, dict]:
    """The quick-exchange conversations (exchanges.py, seeded), written once and transcribed (reused)."""
    folder = args.job_dir / "exchanges-audio"
    folder.mkdir(parents=True, exist_ok=True)
    truths, items = {}, []
    for plans, kw in ((EXCHANGES, {"n_turns": N_TURNS}), (BACKCHANNELS, BACKCHANNEL_PLAN)):
        for readers, seed in plans:
            name = f"{'+'.join(readers)} #{seed}"
            x, truth = exchanges.build(args.speech, *exchanges.plan(readers, seed=seed, **kw), seed)
            path = folder / f"{'_'.join(readers)}_{seed}.wav"
            if not path.exists():
                exchanges.write_wav(path, x)
            truths[name] = truth
            items.append((name, path))
    files = transcribe(args, [p for _, p in items], args.job_dir / "exchanges")
    if args.words_cost:
        words_cost(args, [p for _, p in items], args.job_dir / "exchanges-nowords", files)
    return files, items, truths


def exchange_keys(truth: list) -> list[str]:
    """Each turn's bucket, and for short turns a second key: the same reader going on, or another reader."""
    out = []
    for k, t in enumerate(truth):
        key = exchanges.bucket(t.end_s - t.start_s)
        if t.kind in ("tiny", "short"):
            same = k and truth[k - 1].who == t.who
            key += " | " + ("same reader goes on" if same else "another reader")
        out.append(key)
    return out


def by_bucket(result: dict) -> dict:
    """label_all's result with the exchange keys folded into their buckets (the kinds kept aside)."""
    cells: dict = {}
    kinds: dict = {}
    for key, cell in {**result["cells"], **result["kinds"]}.items():
        bucket, _, kind = key.partition(" | ")
        add_cells(cells, {bucket: cell})
        if kind:
            add_cells(kinds, {kind: cell})
    return {**result, "cells": cells, "kinds": kinds}


def longform_files(args) -> tuple[dict, list, dict]:
    episodes = sorted(p.name[: -len(".ref.json")] for p in args.longform.glob("*.ref.json"))
    refs = {e: json.loads((args.longform / f"{e}.ref.json").read_text()) for e in episodes}
    items = [(e, args.longform / refs[e]["audio"]) for e in episodes]
    files = transcribe(args, [p for _, p in items], args.job_dir)
    if args.words_cost:
        words_cost(args, [p for _, p in items], args.job_dir.with_name(args.job_dir.name + "-nowords"), files)
    return files, items, refs


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
    parser.add_argument("--per-file", action="store_true", help="also a line per file")
    parser.add_argument("--skip-clips", action="store_true")
    parser.add_argument("--skip-exchanges", action="store_true")
    parser.add_argument("--skip-longform", action="store_true")
    parser.add_argument("--out", type=Path, help="results as JSON")
    args = parser.parse_args()

    rules = args.rules.split(",")
    weak = WeakCount()
    diarizers = {rule: Diarizer(DiarizeOptions(short_rule=rule)) for rule in rules}
    memo = shared_embeddings(diarizers)
    sets = {}
    if not args.skip_exchanges:
        files, items, truths = exchange_files(args)
        sets["quick exchanges"] = (
            files,
            items,
            lambda n: [(t.start_s, t.end_s, t.who) for t in truths[n]],
            lambda n: exchange_keys(truths[n]),
        )
    if not args.skip_longform:
        files, items, refs = longform_files(args)

        def reference(e):
            return [(s["start"], s["end"], s["speaker"]) for s in refs[e]["sentences"]]

        sets["long-form"] = (
            files,
            items,
            reference,
            lambda e: [exchanges.bucket(x) for x in turn_lengths(reference(e))],
        )
    results: dict = {}
    files, items, *_ = next(iter(sets.values()), (None, [], None))
    if items:  # warm up (first calls into torch and numpy): not part of any cost
        row, segs = files[items[0][1].name]
        next(iter(diarizers.values())).label(items[0][1], segs, row["duration_s"])
        memo.clear()
    for rule, diarizer in diarizers.items():
        weak.weak = weak.judged = weak.split = 0
        got = {}
        for name, (files, items, reference, keys) in sets.items():
            if args.per_file:
                print(f"  {name}, rule {rule!r}:")
            got[name] = by_bucket(label_all(diarizer, files, items, reference, keys, args.per_file))
        default = " (the default)" if rule == DiarizeOptions().short_rule else ""
        reused = " (windows and vectors of the first rule: its cost is not one)" if rule != rules[0] else ""
        overall = table(
            f"short-turn rule {rule!r}{default}{reused}: sentences with the right speaker, speech time right", got
        )
        print(
            f"  short stretches judged on their own voice: {weak.judged}, weak evidence (margin not met): {weak.weak},"
            f" where the rules would choose differently: {weak.split}"
        )
        results[rule] = {**got, "overall": overall, "weak": weak.weak, "judged": weak.judged, "differ": weak.split}
    if len(rules) > 1 and sets:
        compare(results, rules)
    if not args.skip_clips:
        clip_conversations(next(iter(diarizers.values())), args.speech, here)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1, default=str))


def compare(results: dict, rules: list[str]) -> None:
    """The rules side by side: sentences right per bucket, overall, and the short turns by who said them."""
    print("\nshort-turn rules side by side: sentences right (both sets)")
    kinds = sorted({k for r in rules for s in results[r].values() if isinstance(s, dict) for k in s.get("kinds", {})})
    head = [*exchanges.BUCKETS, "all", *kinds]
    print(f"  {'rule':10}" + "".join(f"{h[:22]:>24}" for h in head))
    for rule in rules:
        cells = results[rule]["overall"]["cells"]
        kind_cells: dict = {}
        for s in results[rule].values():
            if isinstance(s, dict):
                add_cells(kind_cells, s.get("kinds", {}))
        line = [sentences_cell(cells.get(b, [0, 0])) for b in exchanges.BUCKETS] + [sentences_cell(summed(cells))]
        line += [sentences_cell(kind_cells.get(k, [0, 0])) for k in kinds]
        print(f"  {rule:10}" + "".join(f"{x:>24}" for x in line))


if __name__ == "__main__":
    main()
