"""Throughput and WER of podscribe vs faster-whisper on the same `base` weights, measured in one run.

    .venv/bin/python -m bench.bench_transcribe [--speech ../shared/speech] [--quick] [--compute-types float32,int8]
    .venv/bin/python -m bench.bench_transcribe --model tiny.en --clips 1 --compute-types float32 --skip-long --skip-fw
                                                # the smoke test (bench/smoke.sh): every step on one clip

Inputs: the human-referenced English clips of the shared speech set as an archive of one-piece files
(podscribe: one job through the runner, so cross-file batches; faster-whisper: transcribe() per file)
and a ~3-minute long-form mp3 joined from them with pauses. Prints audio
seconds per wall second ("x real time"), WER, and ratios to faster-whisper int8.
Numbers depend on the machine; run everything here in one go to compare.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

from bench.common import SPEECH, Clip, english_clips, long_form
from pipeline.decode import DecodeOptions
from pipeline.facts.metrics import wer
from pipeline.facts.runtime import pick_runtime
from pipeline.job.config import JobOptions
from pipeline.job.run import run
from pipeline.models import registry
from pipeline.models.load import Models, load_models


def podscribe_archive(models: Models, clips, batch_size: int, folder: Path):
    """The clips as an archive of one-piece files: one job through the runner (probing, hashing, cross-file
    batches, Parquet rows per file), as `podscribe transcribe clips/` runs it."""
    out = folder / f"archive-{models.runtime.compute_type}"
    shutil.rmtree(out, ignore_errors=True)
    options = JobOptions(out_dir=out, decode=DecodeOptions(language="en", batch_size=batch_size), progress=False)
    start = time.perf_counter()
    summary = run([str(c.path) for c in clips], options, models=models)
    wall = time.perf_counter() - start
    assert summary.done == len(clips), summary.failures
    import pyarrow.dataset as ds

    texts: dict[str, list[str]] = {}
    files = {r["file_id"]: r["path"] for r in ds.dataset(out / "files").to_table().to_pylist()}
    for r in sorted(ds.dataset(out / "segments").to_table().to_pylist(), key=lambda r: r["segment"]):
        texts.setdefault(files[r["file_id"]], []).append(r["text"])
    return wall, [" ".join(texts.get(str(c.path), [])) for c in clips]


def podscribe_long(models: Models, mp3: Path, folder: Path):
    out = folder / f"job-{models.runtime.compute_type}-{models.assistant_name or 'none'}"
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    run([str(mp3)], JobOptions(out_dir=out, decode=DecodeOptions(language="en"), progress=False), models=models)
    wall = time.perf_counter() - start
    import pyarrow.dataset as ds

    rows = sorted(ds.dataset(out / "segments").to_table().to_pylist(), key=lambda r: r["segment"])
    return wall, " ".join(r["text"] for r in rows)


def faster_whisper_runs(model_dir: Path, compute_type: str, clips: list[Clip], mp3: Path | None):
    from faster_whisper import WhisperModel

    model = WhisperModel(str(model_dir), device="cpu", compute_type=compute_type, cpu_threads=os.cpu_count() or 2)
    start, hyps = time.perf_counter(), []
    for clip in clips:  # from the files, as podscribe's archive job reads them
        segments, _ = model.transcribe(str(clip.path), language="en", beam_size=1)
        hyps.append(" ".join(s.text.strip() for s in segments))
    clips_wall = time.perf_counter() - start
    if mp3 is None:
        return clips_wall, hyps, None, None
    start = time.perf_counter()
    segments, _ = model.transcribe(str(mp3), language="en", beam_size=1)
    long_text = " ".join(s.text.strip() for s in segments)
    return clips_wall, hyps, time.perf_counter() - start, long_text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speech", type=Path, default=SPEECH)
    parser.add_argument("--quick", action="store_true", help="12 clips only")
    parser.add_argument("--clips", type=int, default=0, help="the first N clips only (0: all; --quick: 12)")
    parser.add_argument("--model", default="base", help="podscribe's model (faster-whisper runs base)")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--compute-types", default="float32,int8", help="podscribe's, one run each")
    parser.add_argument("--skip-long", action="store_true", help="the clips only, no long-form file")
    parser.add_argument("--skip-fw", action="store_true", help="podscribe only")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import transformers

    transformers.logging.set_verbosity_error()

    clips = english_clips(args.speech, args.clips or (12 if args.quick else 0))
    if not clips:
        raise SystemExit(f"no English human-referenced clips in {args.speech} (set --speech or PODSCRIBE_SPEECH_DIR)")
    clip_audio = sum(c.duration_s for c in clips)
    refs = [c.text for c in clips]
    folder = Path(tempfile.mkdtemp(prefix="podscribe-bench-"))
    mp3, long_ref, long_audio = None, "", 0.0
    if not args.skip_long:
        mp3, joined = long_form(clips, folder)
        long_ref, long_audio = " ".join(joined.texts), joined.duration_s
    print(f"clips: {len(clips)} ({clip_audio:.0f} s); long-form: {long_audio:.0f} s; CPU threads: {os.cpu_count()}")

    rows = []
    for compute_type in args.compute_types.split(","):
        models = load_models(args.model, "none", pick_runtime("cpu", compute_type))
        cw, hyps = podscribe_archive(models, clips, args.batch_size, folder)
        lw, lwer = None, None
        if mp3 is not None:
            lw, long_hyp = podscribe_long(models, mp3, folder)
            lwer = wer([long_ref], [long_hyp])
        label = f"podscribe {args.model} {compute_type}, bs {args.batch_size}"
        rows.append((label, cw, wer(refs, hyps), lw, lwer))
    if not args.skip_fw:
        model_dir = registry.ct2_directory("base", folder)
        for compute_type in ("int8", "float32"):
            cw, hyps, lw, long_hyp = faster_whisper_runs(model_dir, compute_type, clips, mp3)
            lwer = None if mp3 is None else wer([long_ref], [long_hyp])
            rows.append((f"faster-whisper base {compute_type}, beam 1", cw, wer(refs, hyps), lw, lwer))

    fw = next(((r[1], r[3]) for r in rows if r[0].startswith("faster-whisper base int8")), None)
    print(
        f"\n{'configuration':58} {'archive xRT':>11} {'WER':>7} {'long xRT':>9} {'WER':>7} {'vs fw-int8 (archive/long)':>24}"
    )
    for label, cw, cwer, lw, lwer in rows:
        long_cells = f"{long_audio / lw:9.2f} {lwer:7.2%}" if lw else f"{'-':>9} {'-':>7}"
        ratio = f"{fw[0] / cw:11.2f}x / " + (f"{fw[1] / lw:.2f}x" if lw else "-") if fw else f"{'-':>12}"
        print(f"{label:58} {clip_audio / cw:11.2f} {cwer:7.2%} {long_cells} {ratio}")
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
