"""Throughput and WER of podscribe vs faster-whisper on the same `base` weights, measured in one run.

    .venv/bin/python bench/bench_transcribe.py [--speech ../shared/speech] [--quick] [--compute-types float32,int8]

Inputs: the human-referenced English clips of the shared speech set as an archive of one-piece files
(podscribe: one job through the runner, so cross-file batches; faster-whisper: transcribe() per file)
and a ~3-minute long-form mp3 joined from them with pauses. Prints audio
seconds per wall second ("x real time"), WER, and ratios to faster-whisper int8.
Numbers depend on the machine; run everything here in one go to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline import audio  # noqa: E402
from pipeline.decode import DecodeOptions  # noqa: E402
from pipeline.metrics import wer  # noqa: E402
from pipeline.models import registry  # noqa: E402
from pipeline.models.load import Models, load_models  # noqa: E402
from pipeline.runner import JobOptions, run  # noqa: E402
from pipeline.runtime import pick_runtime  # noqa: E402


def english_clips(speech: Path, quick: bool):
    rows = [json.loads(line) for line in (speech / "references.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r["language"] == "en" and r["ref_type"] == "human"]
    rows = rows[:12] if quick else rows
    return [(speech / r["audio"], r["text"], r["duration_s"]) for r in rows]


def long_form(clips, folder: Path) -> tuple[Path, str, float]:
    rng = np.random.default_rng(7)
    parts, texts = [], []
    for path, text, _ in sorted(clips, key=lambda c: c[0].name):
        parts += [audio.decode(path), np.zeros(int(rng.uniform(0.4, 2.0) * audio.SAMPLE_RATE), np.float32)]
        texts.append(text)
        if sum(map(len, parts)) > 180 * audio.SAMPLE_RATE:
            break
    samples = np.concatenate(parts)
    mp3 = folder / "long.mp3"
    subprocess.run(
        [
            "ffmpeg",
            "-nostdin",
            "-v",
            "error",
            "-y",
            "-f",
            "f32le",
            "-ar",
            "16000",
            "-ac",
            "1",
            "-i",
            "pipe:",
            "-b:a",
            "96k",
            str(mp3),
        ],
        input=samples.tobytes(),
        check=True,
    )
    return mp3, " ".join(texts), len(samples) / audio.SAMPLE_RATE


def podscribe_archive(models: Models, clips, batch_size: int, folder: Path):
    """The clips as an archive of one-piece files: one job through the runner (probing, hashing, cross-file
    batches, Parquet rows per file), as `podscribe transcribe clips/` runs it."""
    out = folder / f"archive-{models.runtime.compute_type}"
    shutil.rmtree(out, ignore_errors=True)
    options = JobOptions(out_dir=out, decode=DecodeOptions(language="en", batch_size=batch_size), progress=False)
    start = time.perf_counter()
    summary = run([str(p) for p, _, _ in clips], options, models=models)
    wall = time.perf_counter() - start
    assert summary.done == len(clips), summary.failures
    import pyarrow.dataset as ds

    texts: dict[str, list[str]] = {}
    files = {r["file_id"]: r["path"] for r in ds.dataset(out / "files").to_table().to_pylist()}
    for r in sorted(ds.dataset(out / "segments").to_table().to_pylist(), key=lambda r: r["segment"]):
        texts.setdefault(files[r["file_id"]], []).append(r["text"])
    return wall, [" ".join(texts.get(str(p), [])) for p, _, _ in clips]


def podscribe_long(models: Models, mp3: Path, folder: Path):
    out = folder / f"job-{models.runtime.compute_type}-{models.assistant_name or 'none'}"
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    run([str(mp3)], JobOptions(out_dir=out, decode=DecodeOptions(language="en"), progress=False), models=models)
    wall = time.perf_counter() - start
    import pyarrow.dataset as ds

    rows = sorted(ds.dataset(out / "segments").to_table().to_pylist(), key=lambda r: r["segment"])
    return wall, " ".join(r["text"] for r in rows)


def faster_whisper_runs(model_dir: Path, compute_type: str, clips, mp3: Path):
    from faster_whisper import WhisperModel

    model = WhisperModel(str(model_dir), device="cpu", compute_type=compute_type, cpu_threads=os.cpu_count() or 2)
    start, hyps = time.perf_counter(), []
    for path, _, _ in clips:  # from the files, as podscribe's archive job reads them
        segments, _ = model.transcribe(str(path), language="en", beam_size=1)
        hyps.append(" ".join(s.text.strip() for s in segments))
    clips_wall = time.perf_counter() - start
    start = time.perf_counter()
    segments, _ = model.transcribe(str(mp3), language="en", beam_size=1)
    long_text = " ".join(s.text.strip() for s in segments)
    return clips_wall, hyps, time.perf_counter() - start, long_text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speech", type=Path, default=Path(os.environ.get("PODSCRIBE_SPEECH_DIR", "../shared/speech")))
    parser.add_argument("--quick", action="store_true", help="12 clips only")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--compute-types", default="float32,int8", help="podscribe's, one run each")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import transformers

    transformers.logging.set_verbosity_error()

    clips = english_clips(args.speech, args.quick)
    clip_audio = sum(d for _, _, d in clips)
    refs = [t for _, t, _ in clips]
    folder = Path(tempfile.mkdtemp(prefix="podscribe-bench-"))
    mp3, long_ref, long_audio = long_form(clips, folder)
    print(f"clips: {len(clips)} ({clip_audio:.0f} s); long-form: {long_audio:.0f} s; CPU threads: {os.cpu_count()}")

    rows = []
    for compute_type in args.compute_types.split(","):
        models = load_models("base", "none", pick_runtime("cpu", compute_type))
        cw, hyps = podscribe_archive(models, clips, args.batch_size, folder)
        lw, long_hyp = podscribe_long(models, mp3, folder)
        label = f"podscribe base {compute_type}, bs {args.batch_size}"
        rows.append((label, cw, wer(refs, hyps), lw, wer([long_ref], [long_hyp])))
    model_dir = registry.ct2_directory("base", folder)
    for compute_type in ("int8", "float32"):
        cw, hyps, lw, long_hyp = faster_whisper_runs(model_dir, compute_type, clips, mp3)
        rows.append(
            (f"faster-whisper base {compute_type}, beam 1", cw, wer(refs, hyps), lw, wer([long_ref], [long_hyp]))
        )

    ref_clips, ref_long = next((r[1], r[3]) for r in rows if r[0].startswith("faster-whisper base int8"))
    print(
        f"\n{'configuration':58} {'archive xRT':>11} {'WER':>7} {'long xRT':>9} {'WER':>7} {'vs fw-int8 (archive/long)':>24}"
    )
    for label, cw, cwer, lw, lwer in rows:
        print(
            f"{label:58} {clip_audio / cw:11.2f} {cwer:7.2%} {long_audio / lw:9.2f} {lwer:7.2%} "
            f"{ref_clips / cw:11.2f}x / {ref_long / lw:.2f}x"
        )
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
