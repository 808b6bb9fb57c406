"""Long-form accuracy and speed: podscribe vs faster-whisper on the same `base` weights, scored in one run.

    .venv/bin/python -m bench.bench_longform [--episodes dev01_garden,dev03_jazz] [--skip-fw] [--first-pass]
                                             [--compute-types float32,int8] [--whispercpp [--whispercpp-converter PATH]]
                                             [--out results.json] [--job-dir DIR] [--longform ../shared/longform]
                                             [--busy 2] [--rounds 3]

Episodes: every <name>.ref.json in the long-form folder, or those named in --episodes. The folder is
../shared/longform by default (three synthetic podcast episodes with sample-accurate references; override
with --longform or $PODSCRIBE_LONGFORM_DIR, e.g. with a held-out set from bench.make_speech_episodes),
scored with its own score.py (WER, S/D/I, sentences without a hypothesis, words in music/silence,
start-time error, border duplicates).

Configurations (all on this machine's CPU, one after the other, models loaded before the clock starts):
  podscribe          `pipeline.job.run.run` with default `JobOptions` and model `base`, exactly what
                     `podscribe transcribe <episodes> --model base` does (plain batched greedy, VAD gate,
                     language detected per piece, second chances on: coverage check, beam fallback);
  podscribe 1st pass (--first-pass) the same without the second chances, to show what they cost and buy;
  podscribe cut      (--cut-variant JSON, repeatable) the defaults with other CutOptions, e.g. '{"prefer_s": 22}';
  fw greedy          faster-whisper on podscribe's offline `base` (the CTranslate2 model.bin from its two
                     wheels, assembled into a temp dir): int8, beam 1, vad_filter=True, temperature=0
                     (no fallback), everything else faster-whisper's default;
  fw fallback        the same with faster-whisper's default temperature fallback (0.0, 0.2, ..., 1.0);
  whisper.cpp base   (--whispercpp) whisper.cpp through pywhispercpp on the same `base` weights converted to ggml
                     f16 (once, into the cache, by whisper.cpp's convert-h5-to-ggml.py: --whispercpp-converter PATH
                     or $PODSCRIBE_WHISPERCPP_CONVERTER): greedy, temperature 0 without fallback, language detected,
                     no VAD, as many threads as faster-whisper. An optional peer: the `whispercpp` extra
                     (bench/whispercpp.py says what it needs and how the model is made).

Wall time is per episode (podscribe: its files table's wall_s; faster-whisper: transcribe() plus consuming
its segment generator; whisper.cpp: ffmpeg's decode plus transcribe(); file decoding included for all).
`x RT` = audio seconds per wall second. Each configuration's per-episode info (printed after the table) counts its
encoder windows: where the time of the encoder, the probe and the scoring goes, and the first thing to compare
when one program is faster (podscribe: each decoded piece's passes and coverage clips; faster-whisper: its
``encode`` calls).
Numbers depend on the machine; compare configurations from the same run. Runs on one machine spread (by ~15% on
the 2-core EPYCs of 2026-12-06, by 20-60% on 7 December's): ``--rounds 3`` runs podscribe and faster-whisper again,
alternating, and gives the ratio of the medians.

Beside each wall, each configuration's CPU seconds (this process's, every thread, and its finished children's:
podscribe's ffmpeg) and the machine's steal over the run (``/proc/stat``: time the hypervisor gave no program
here). The CPU a program used is not what another tenant took from it, so its ratio moves less between runs than
the walls' do; it is not the target (a program that waits on one core uses less CPU and takes longer), it says
whether a swing of the walls was the program or the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from bench.common import LONGFORM, cpu_s, discover_episodes, episode_files, load_scorer, score, steal_s
from pipeline.models import registry

FW_DEFAULT_TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
COVERAGE_REASON = "uncovered speech"  # a redecode that is a coverage clip (second_chances.cover), its own window


# -- what a run cost -----------------------------------------------------------------


class Cost:
    """A run's wall, CPU and steal seconds, from entering to leaving (``into`` a result: ``run_wall_s``, ``cpu_s``,
    ``steal_s``)."""

    def __enter__(self) -> Cost:
        self.start = (time.perf_counter(), cpu_s(), steal_s())
        return self

    def __exit__(self, *exc) -> None:
        now = (time.perf_counter(), cpu_s(), steal_s())
        self.run_wall_s, self.cpu_s, self.steal_s = (b - a for a, b in zip(self.start, now))

    def into(self, result: dict) -> dict:
        """The costs added where the run did not measure its own (a run measures the part its walls time: not
        a model's load)."""
        for key in ("run_wall_s", "cpu_s", "steal_s"):
            result.setdefault(key, getattr(self, key))
        return result


def measured(run, *args, **kwargs) -> dict:
    """``run(*args, **kwargs)``'s result with its costs (``Cost``, where it did not measure them itself) and the
    load average after it."""
    with Cost() as cost:
        result = run(*args, **kwargs)
    cost.into(result)["load_avg_after"] = os.getloadavg()
    return result


# -- podscribe -----------------------------------------------------------------------


def run_child(args, names: list[str], longform: Path, tmp: Path, env: dict[str, str]) -> dict:
    """podscribe's default configuration run by this script in a child process with ``env`` added (what a
    process reads only as it starts: libgomp's spin count); its results as the default run's."""
    out = tmp / "child.json"
    command = [sys.executable, "-m", "bench.bench_longform", "--skip-fw", "--longform", str(longform)]
    command += ["--episodes", ",".join(names), "--out", str(out)]
    command += ["--language", args.language] if args.language else []
    subprocess.run(command, env={**os.environ, **env}, check=True, stdout=subprocess.DEVNULL)
    result = json.loads(out.read_text())["configurations"]["podscribe base"]
    result.pop("scores")
    return {**result, "env": env}


def run_podscribe(
    files: dict[str, Path],
    job_dir: Path,
    language: str | None,
    second_chances: bool = True,
    cut=None,
    compute_type: str = "auto",
    threads: int | None = None,
) -> dict:
    import pyarrow.dataset as ds

    from pipeline.decode import DecodeOptions
    from pipeline.facts.runtime import pick_runtime
    from pipeline.job.config import JobOptions
    from pipeline.job.run import run
    from pipeline.models.load import load_models

    shutil.rmtree(job_dir, ignore_errors=True)
    decode = (
        DecodeOptions(language=language)
        if second_chances
        else DecodeOptions(language=language, coverage=False, fallback_beams=0)
    )
    options = JobOptions(
        out_dir=job_dir,
        model="base",
        compute_type=compute_type,
        decode=decode,
        progress=False,
        threads=threads,
        **({"cut": cut} if cut else {}),
    )
    models = load_models(
        options.model, options.assistant, pick_runtime(options.device, options.compute_type), options.cache_dir
    )
    with Cost() as cost:
        summary = run([str(p) for p in files.values()], options, models=models)
    total = cost.run_wall_s
    if summary.failed:
        raise RuntimeError(f"podscribe failed on {summary.failures}")
    file_rows = ds.dataset(job_dir / "files").to_table().to_pylist()
    segments = ds.dataset(job_dir / "segments").to_table().to_pylist()
    pieces = ds.dataset(job_dir / "pieces").to_table().to_pylist()
    out = cost.into({"total_wall_s": total, "job_dir": str(job_dir), "episodes": {}})
    for name, path in files.items():
        frow = next(r for r in file_rows if Path(r["path"]).name == path.name)
        segs = sorted((s for s in segments if s["file_id"] == frow["file_id"]), key=lambda s: s["segment"])
        ps = sorted((p for p in pieces if p["file_id"] == frow["file_id"]), key=lambda p: p["piece"])
        langs = [p["language"] for p in ps if not p["skipped"]]
        out["episodes"][name] = {
            "wall_s": frow["wall_s"],
            "duration_s": frow["duration_s"],
            "rows": [{"audio": path.name, "start": s["start_s"], "end": s["end_s"], "text": s["text"]} for s in segs],
            "info": {
                "decode_mode": frow["decode_mode"],
                "n_pieces": len(ps),
                # encoder passes: each decoded piece's windows (a second one where the seek rule moved on) and
                # each short clip the coverage check decoded again (faster-whisper's: its encode calls); a fallback
                # rung decodes from its piece's (or clip's) encoder states, no window of its own
                "encoder_windows": sum(p["passes"] or 0 for p in ps if not p["skipped"])
                + sum(1 for p in ps for r in p.get("redecodes") or () if r["reason"] == COVERAGE_REASON),
                "skipped": {k: sum(1 for p in ps if p["skipped"] == k) for k in {p["skipped"] for p in ps} if k},
                "non_en_pieces": sum(1 for lang in langs if lang != "en"),
                # what the second chances cost: their share of the main model's decoder calls
                "redecode_call_share": round(
                    sum(p["redecode_calls"] or 0 for p in ps) / max(1, sum(p["main_calls"] for p in ps)), 3
                ),
                "redecodes": [
                    {
                        "piece": p["piece"],
                        "at_s": round(p["start_s"] + d["start_s"], 2),
                        "span_s": round(d["end_s"] - d["start_s"], 2),
                        "reason": d["reason"],
                        "n_tokens": len(d["tokens"]),
                    }
                    for p in ps
                    for d in p.get("redecodes") or ()
                ],
            },
        }
    return out


# -- faster-whisper ------------------------------------------------------------------


def run_faster_whisper(model, files: dict[str, Path], temperature, language: str | None, beam_size: int = 1) -> dict:
    out = {"episodes": {}}
    windows = [0]
    encode = model.encode

    def counted(*args, **kwargs):  # its encoder passes: the windows of its VAD-packed speech and language detection
        windows[0] += 1
        return encode(*args, **kwargs)

    model.encode = counted
    try:
        for name, path in files.items():
            windows[0] = 0
            start = time.perf_counter()
            segments, info = model.transcribe(
                str(path), language=language, beam_size=beam_size, temperature=temperature, vad_filter=True
            )
            rows = [{"audio": path.name, "start": s.start, "end": s.end, "text": s.text.strip()} for s in segments]
            wall = time.perf_counter() - start
            out["episodes"][name] = {
                "wall_s": wall,
                "duration_s": info.duration,
                "rows": rows,
                "info": {
                    "language": info.language,
                    "language_probability": round(info.language_probability, 3),
                    "encoder_windows": windows[0],
                    "speech_kept_s": round(info.duration_after_vad, 1),
                },
            }
    finally:
        del model.encode
    return out


def episodes_wall_s(result: dict) -> float:
    """A run's wall time as the table counts it: the sum of its episodes' walls."""
    return sum(ep["wall_s"] for ep in result["episodes"].values())


def more_rounds(rounds: int, files, tmp: Path, language, results: dict, fw_model, fw_runs) -> dict:
    """Runs 2..``rounds`` of podscribe's defaults and of faster-whisper's runs (those of run 1), alternating which
    goes first; each label's walls (run 1's first) and whether each later run gave run 1's segments."""
    labels = [label for label in ["podscribe base", *(run[0] for run in fw_runs)] if label in results]
    out = {
        label: {
            "walls_s": [episodes_wall_s(results[label])],
            "cpu_s": [results[label]["cpu_s"]],
            "steal_s": [results[label]["steal_s"]],
            "same_segments": [],
        }
        for label in labels
    }
    for k in range(1, rounds):
        for label in labels if k % 2 == 0 else labels[::-1]:
            print(f"round {k + 1}: {label} ...", flush=True)
            if label == "podscribe base":
                r = measured(run_podscribe, files, tmp / f"job-round-{k + 1}", language)
            else:
                _, temperature, beams = next(run for run in fw_runs if run[0] == label)
                r = measured(run_faster_whisper, fw_model, files, temperature, language, beams)
            out[label]["walls_s"].append(episodes_wall_s(r))
            out[label]["cpu_s"].append(r["cpu_s"])
            out[label]["steal_s"].append(r["steal_s"])
            first = results[label]["episodes"]
            out[label]["same_segments"].append(all(r["episodes"][n]["rows"] == first[n]["rows"] for n in files))
    return out if rounds > 1 else {}


def report_rounds(rounds: dict) -> None:
    if not rounds:
        return
    print("rounds (wall s, alternated; median; CPU s; the same segments as round 1):")
    medians = {label: statistics.median(r["walls_s"]) for label, r in rounds.items()}
    cpu = {label: statistics.median(r["cpu_s"]) for label, r in rounds.items()}
    for label, r in rounds.items():
        walls = ", ".join(f"{w:.1f}" for w in r["walls_s"])
        cpus = ", ".join(f"{c:.1f}" for c in r["cpu_s"])
        same = "yes" if all(r["same_segments"]) else "NO"
        steal = sum(r["steal_s"])
        print(
            f"  {label:<28} {walls}; median {medians[label]:.1f}; CPU {cpus} (steal {steal:.1f} s in all); "
            f"same segments: {same}"
        )
    if "podscribe base" in medians:
        for label, m in medians.items():
            if label != "podscribe base":
                print(
                    f"  {label} / podscribe base, medians: {m / medians['podscribe base']:.2f}x "
                    f"(CPU seconds: {cpu[label] / cpu['podscribe base']:.2f}x)"
                )


# -- the table ----------------------------------------------------------------------


def _f(x, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def table_rows(label: str, scores: dict, result: dict) -> list[list[str]]:
    rows = []
    for name, e in list(scores["episodes"].items()) + [("OVERALL", scores["overall"])]:
        eps = list(result["episodes"].values()) if name == "OVERALL" else [result["episodes"][name]]
        wall, dur = sum(ep["wall_s"] for ep in eps), sum(ep["duration_s"] for ep in eps)
        ts = e["timestamps"]
        dup = e["border_duplicates"]["borders"]
        rows.append(
            [
                label,
                name,
                str(e["ref_words"]),
                _f(100 * e["wer"], ".1f"),
                f"{e['deletions']}/{e['substitutions']}/{e['insertions']}",
                str(ts["unmatched_sentences"]),
                f"{e['hallucination']['words']}",
                _f(ts["start_err_median"], ".2f"),
                _f(ts["start_err_p90"], ".2f"),
                _f(100 * e["wer_cut30_sentences"] if e["wer_cut30_sentences"] is not None else None, ".1f"),
                str(dup),
                f"{wall:.0f}",
                f"{dur / wall:.2f}",
            ]
        )
    return rows


def print_table(all_rows: list[list[str]]) -> None:
    hdr = [
        "configuration",
        "episode",
        "refW",
        "WER%",
        "D/S/I",
        "unm",
        "hallW",
        "ts med",
        "ts p90",
        "cut30%",
        "dup",
        "wall s",
        "x RT",
    ]
    w = [max(len(hdr[i]), *(len(r[i]) for r in all_rows)) for i in range(len(hdr))]
    line = lambda cells: "  ".join(c.ljust(w[i]) if i < 2 else c.rjust(w[i]) for i, c in enumerate(cells))  # noqa: E731
    print(line(hdr))
    last = None
    for r in all_rows:
        if last is not None and r[0] != last:
            print()
        print(line(r))
        last = r[0]
    print(
        "D/S/I = deleted/substituted/inserted words; unm = reference sentences no hypothesis segment overlaps; "
        "hallW = hypothesis words in segments centred in music or silence; ts = absolute start-time error (s); "
        "cut30 = WER of sentences straddling k*30 s; dup = border duplicates; x RT = audio s per wall s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--longform", type=Path, default=LONGFORM)
    parser.add_argument(
        "--episodes", default=None, help="comma-separated episode names (default: every <name>.ref.json in --longform)"
    )
    parser.add_argument("--skip-fw", action="store_true", help="podscribe only")
    parser.add_argument("--skip-podscribe", action="store_true", help="faster-whisper only")
    parser.add_argument(
        "--cut-variant",
        action="append",
        default=[],
        help="also run podscribe with other CutOptions, as JSON: '{\"prefer_s\": 22}' (repeatable)",
    )
    parser.add_argument(
        "--first-pass",
        action="store_true",
        help="also run podscribe without its second chances (no coverage check, no fallback)",
    )
    parser.add_argument(
        "--compute-types", default=None, help="also run podscribe with these compute types, e.g. float32,int8"
    )
    parser.add_argument(
        "--fw-beam",
        action="store_true",
        help="also run faster-whisper at its own defaults (beam 5, temperature fallback): ~2x its greedy time",
    )
    parser.add_argument(
        "--whispercpp",
        action="store_true",
        help="also run whisper.cpp (pywhispercpp, the `whispercpp` extra) on the same base weights as ggml f16",
    )
    parser.add_argument(
        "--whispercpp-converter",
        default=None,
        help="whisper.cpp's models/convert-h5-to-ggml.py, to make the ggml model the first time "
        "(default: $PODSCRIBE_WHISPERCPP_CONVERTER)",
    )
    parser.add_argument("--language", default=None, help="force a language (default: detected, as a user runs it)")
    parser.add_argument(
        "--job-dir",
        type=Path,
        default=None,
        help="keep podscribe's job dir (manifests) here; default: a temp dir, removed",
    )
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        help="keep N other processes busy-looping on the CPUs during every run (a machine that is not idle)",
    )
    parser.add_argument(
        "--libgomp-spin",
        action="store_true",
        help="also run podscribe (in a child process) with libgomp's own spin count, 300,000 turns, as before "
        "podscribe set GOMP_SPINCOUNT (pipeline/facts/runtime.py, OPENMP_WAIT)",
    )
    parser.add_argument(
        "--env-variant",
        action="append",
        default=[],
        metavar="NAME=VALUE[,NAME=VALUE]",
        help="also run podscribe in a child process with these environment variables (what a process reads only "
        "as it starts), e.g. THP_MEM_ALLOC_ENABLE=0; repeatable",
    )
    parser.add_argument(
        "--threads-variants",
        default="",
        help="comma-separated CPU thread counts: podscribe run again with each (--threads), e.g. 1 beside --busy",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run podscribe's defaults and faster-whisper's runs this many times, alternating which goes first: every "
        "wall, the medians' ratio, and whether each run gave the first run's segments (on a machine whose runs spread)",
    )
    parser.add_argument("--out", type=Path, help="write all results (scores, per-sentence details, hypotheses) as JSON")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()

    if args.skip_fw and args.skip_podscribe and not args.whispercpp:
        parser.error("--skip-fw and --skip-podscribe leave nothing to run")
    whispercpp_model = None
    if args.whispercpp:  # before anything runs: a missing extra or converter is said at once, not after the others
        from bench import whispercpp

        try:
            whispercpp.check_installed()
            whispercpp_model = whispercpp.ggml_model(args.whispercpp_converter)
        except whispercpp.Unavailable as e:
            sys.exit(f"--whispercpp: {e}")
    longform = args.longform.resolve()
    if not (longform / "score.py").is_file():
        sys.exit(f"no long-form set at {longform} (score.py missing); pass --longform")
    scorer = load_scorer(longform)
    names = [n.strip() for n in args.episodes.split(",") if n.strip()] if args.episodes else discover_episodes(longform)
    files = episode_files(longform, names)
    audio_s = sum(json.loads((longform / f"{n}.ref.json").read_text())["duration"] for n in names)
    print(f"episodes: {', '.join(names)} ({audio_s / 60:.1f} min); CPU threads: {os.cpu_count()}", flush=True)

    tmp = Path(tempfile.mkdtemp(prefix="podscribe-longform-"))
    results: dict[str, dict] = {}
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    if busy:
        print(f"{len(busy)} busy-looping processes beside every run", flush=True)
    try:
        if not args.skip_podscribe:
            job_dir = args.job_dir or tmp / "job"
            print("podscribe base (defaults) ...", flush=True)
            results["podscribe base"] = measured(run_podscribe, files, job_dir, args.language)
            for compute_type in filter(None, (args.compute_types or "").split(",")):
                label = f"podscribe base {compute_type}"
                print(f"{label} ...", flush=True)
                results[label] = measured(
                    run_podscribe, files, tmp / f"job-{compute_type}", args.language, compute_type=compute_type
                )
            for threads in [int(t) for t in filter(None, args.threads_variants.split(","))]:
                label = f"podscribe base, {threads} thread{'s' * (threads > 1)}"
                print(f"{label} ...", flush=True)
                results[label] = measured(
                    run_podscribe, files, tmp / f"job-threads-{threads}", args.language, threads=threads
                )
            for k, spec in enumerate(args.cut_variant):
                from pipeline.audio.media import CutOptions

                variant = CutOptions(**json.loads(spec))
                label = f"podscribe cut {spec}" if len(args.cut_variant) > 1 else "podscribe cut"
                print(f"{label}: {variant} ...", flush=True)
                results[label] = measured(run_podscribe, files, tmp / f"job-cut-{k}", args.language, cut=variant)
            if args.libgomp_spin:
                label = "podscribe base, libgomp spin"
                print(f"{label} (a child process) ...", flush=True)
                results[label] = measured(run_child, args, names, longform, tmp, {"GOMP_SPINCOUNT": "300000"})
            for variant in args.env_variant:
                env = dict(item.split("=", 1) for item in variant.split(","))
                label = f"podscribe base, {variant}"
                print(f"{label} (a child process) ...", flush=True)
                results[label] = measured(run_child, args, names, longform, tmp, env)
            if args.first_pass:
                print("podscribe base, first pass only ...", flush=True)
                results["podscribe 1st pass"] = measured(
                    run_podscribe, files, tmp / "job-first-pass", args.language, False
                )
        fw_model, fw_runs = None, [("fw int8 greedy", 0.0, 1), ("fw int8 fallback", list(FW_DEFAULT_TEMPERATURES), 1)]
        if not args.skip_fw:
            from faster_whisper import WhisperModel

            fw_model = WhisperModel(
                str(registry.ct2_directory("base", tmp)),
                device="cpu",
                compute_type="int8",
                cpu_threads=os.cpu_count() or 2,
            )
            if args.fw_beam:
                fw_runs.append(("fw int8 beam 5 + fallback", list(FW_DEFAULT_TEMPERATURES), 5))
            for label, temperature, beams in fw_runs:
                print(f"{label} ...", flush=True)
                results[label] = measured(run_faster_whisper, fw_model, files, temperature, args.language, beams)
        rounds = more_rounds(args.rounds, files, tmp, args.language, results, fw_model, fw_runs)
        if whispercpp_model is not None:
            label = "whisper.cpp base"
            print(f"{label} ({whispercpp_model.name}) ...", flush=True)
            results[label] = measured(
                whispercpp.run, whispercpp.load(whispercpp_model, threads=os.cpu_count() or 2), files, args.language
            )
            results[label]["versions"] = whispercpp.describe()
    finally:
        for process in busy:
            process.kill()
            process.wait()
        if args.job_dir is None:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            shutil.rmtree(tmp / "base", ignore_errors=True)  # the joined model.bin (registry.ct2_directory)

    scores = {label: score(scorer, longform, r) for label, r in results.items()}
    print()
    print_table([row for label in results for row in table_rows(label, scores[label], results[label])])
    for label, r in results.items():
        info = {n: ep["info"] for n, ep in r["episodes"].items()}
        load = r["load_avg_after"]
        busy = (
            " (more runnable processes than CPUs: its wall times are contended)"
            if load[1] > (os.cpu_count() or 1) + 0.5
            else ""
        )
        print(
            f"{label}: CPU {r['cpu_s']:.1f} s over {r['run_wall_s']:.1f} s of run, the machine's steal {r['steal_s']:.1f} s; "
            f"load average after it {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}{busy}; {json.dumps(info)}"
        )
    if "podscribe base" in results and len(results) > 1:
        base = results["podscribe base"]["cpu_s"]
        ratios = ", ".join(
            f"{label} {r['cpu_s'] / base:.2f}x" for label, r in results.items() if label != "podscribe base"
        )
        print(
            f"CPU seconds against podscribe base's (what each used, whatever the machine's other work took): {ratios}"
        )
    report_rounds(rounds)
    if args.out:
        payload = {
            "episodes": names,
            "audio_s": audio_s,
            "cpu_threads": os.cpu_count(),
            "busy_processes": args.busy,
            "configurations": {label: {"scores": scores[label], **results[label]} for label in results},
            "rounds": rounds,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(payload, indent=1, default=float))
        print(f"results: {args.out}")


if __name__ == "__main__":
    main()
