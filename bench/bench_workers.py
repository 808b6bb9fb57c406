"""One job, 1 vs N workers on this machine: audio hours per wall hour, and what N GPUs would give.

    .venv/bin/python -m bench.bench_workers [--inputs ../shared/speech ../shared/longform] [--model tiny.en]
                                            [--workers 1 2]

Runs the same job with `podscribe transcribe --workers K` for each K, one after the other (never two
benchmarks at once: on 2 cores they would halve each other), each into a fresh job dir, and times the whole
command (model loading included, as a night's run pays it). Then it reads the job's files table:
each worker's own rate (audio over its decode time), and the longest file's decode time.

The throughput model for N workers with one device each: total audio / (N x per-worker rate), but never less
than the longest file's own decode time (one file is one worker's: the tail), plus the model load.
On this 2-core CPU, 2 workers share two cores (1 thread each) instead of 1 worker using both: what it
shows is the mechanism and the overheads, not GPU scaling.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.dataset as ds

from bench.common import LONGFORM, REPO, SPEECH


def _run(inputs: list[str], model: str, workers: int, out: Path) -> float:
    cmd = [
        sys.executable,
        "-m",
        "pipeline.cli",
        "transcribe",
        "--out",
        str(out),
        "--model",
        model,
        "-q",
        "--workers",
        str(workers),
        "--",
        *inputs,
    ]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"workers={workers} failed:\n{proc.stderr[-3000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", nargs="+", default=[str(SPEECH), str(LONGFORM)])
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--predict", type=int, nargs="+", default=[1, 2, 4, 8])
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="podscribe-workers-"))
    print(f"cores: {os.cpu_count()}; model {args.model}; inputs {' '.join(args.inputs)}")
    print(f"{'workers':>7} | {'wall s':>7} | {'audio h':>7} | {'audio h / wall h':>16} | {'per worker x':>12} | files")
    measured = {}
    for k in args.workers:
        out = folder / f"job-{k}"
        wall = _run(args.inputs, args.model, k, out)
        rows = [r for r in ds.dataset(out / "files").to_table().to_pylist() if r["status"] == "done"]
        audio_s = sum(r["duration_s"] for r in rows)
        decode_s = sum(r["wall_s"] for r in rows)
        by_worker: dict[str, int] = {}
        for r in rows:
            by_worker[r["worker"]] = by_worker.get(r["worker"], 0) + 1
        measured[k] = (wall, audio_s, decode_s, max(r["wall_s"] for r in rows))
        print(
            f"{k:>7} | {wall:7.1f} | {audio_s / 3600:7.3f} | {audio_s / wall:16.1f} | {audio_s / decode_s:12.1f} | "
            f"{', '.join(str(n) for n in sorted(by_worker.values(), reverse=True))}"
        )
    one_wall, audio_s, decode_s, longest_s = measured[min(measured)]
    load_s = max(0.0, one_wall - decode_s)  # start-up: imports, model load, planning
    rate = audio_s / decode_s
    print(
        f"\nmodel from the {min(measured)}-worker run: per-worker rate {rate:.1f}x real time, start-up {load_s:.0f} s, "
        f"longest file {longest_s:.0f} s of decode time"
    )
    for n in args.predict:
        predicted = load_s + max(audio_s / (n * rate), longest_s)
        print(f"  {n} workers (one device each): {predicted:6.0f} s -> {audio_s / predicted:5.1f} audio h per wall h")
    for k, (wall, *_rest) in measured.items():
        if k != min(measured):
            predicted = load_s + max(audio_s / (k * rate), longest_s)
            print(
                f"  measured with {k} workers on this machine: {wall:.0f} s (the model says {predicted:.0f} s "
                "with a device each; here they share the cores)"
            )


if __name__ == "__main__":
    main()
