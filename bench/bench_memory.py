"""Peak memory of a job on a short and on a long file: an hour-long episode must not need more than a 10-minute one.

    .venv/bin/python -m bench.bench_memory [--speech ../shared/speech] [--minutes 10,60] [--compute-type auto]
        [--batch-size N]

The short file fills a batch (base decodes 16 pieces at a time, decision 0059: about 6 minutes), so that the two
peaks differ by the audio's length alone; a 3-minute file (8 pieces) holds half a batch and peaks lower for that.

Builds mp3 files of the given lengths from the human-referenced English clips (looped, with pauses),
runs `podscribe transcribe --model base` on each in its own process (the CLI a user runs, default
options), and prints the peak resident set size of that process (``ru_maxrss`` of the child) and its
wall time. podscribe streams audio from ffmpeg and keeps only the batch in memory, so the peaks should
be within a few percent of each other (the goal: within 10%).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, SPEECH, encode, english_clips, join_clips


def build(speech: Path, minutes: float, path: Path) -> None:
    """The clips looped, with pauses of 0.3-2.5 s, cut at ``minutes``, as a 64 kb/s mp3."""
    joined = join_clips(english_clips(speech), minutes * 60, seed=3, pause_s=(0.3, 2.5), loop=True)
    encode(path, joined.samples, "-b:a", "64k")


# Run the CLI in a fresh wrapper process: RUSAGE_CHILDREN is a maximum over all children ever waited for,
# so each run needs a parent of its own.
WRAP = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speech", type=Path, default=SPEECH)
    parser.add_argument("--minutes", default="10,60")
    parser.add_argument("--compute-type", default="auto")
    parser.add_argument("--batch-size", type=int, help="the CLI's --batch-size (default: its default, by the model)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="podscribe-memory-"))
    results = []
    try:
        for minutes in (float(m) for m in args.minutes.split(",")):
            path = folder / f"episode-{minutes:g}min.mp3"
            build(args.speech.resolve(), minutes, path)
            command = [sys.executable, "-m", "pipeline.cli", "transcribe", "--model", "base", "--language", "en"]
            command += ["--compute-type", args.compute_type, "--out", str(folder / f"job-{minutes:g}"), str(path)]
            command += ["--batch-size", str(args.batch_size)] if args.batch_size else []
            start = time.perf_counter()
            wrapped = [sys.executable, "-c", WRAP, *command]
            out = subprocess.run(wrapped, check=True, cwd=REPO, capture_output=True)
            wall = time.perf_counter() - start
            peak_mb = int(out.stdout.decode().split()[-1]) / 1024  # kilobytes on Linux
            results.append((minutes, peak_mb, wall))
            print(
                f"{minutes:g} min: peak RSS {peak_mb:.0f} MB, wall {wall:.0f} s ({minutes * 60 / wall:.1f}x real time)"
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if len(results) > 1:
        low, high = min(r[1] for r in results), max(r[1] for r in results)
        print(f"largest peak / smallest peak: {high / low:.3f}")


if __name__ == "__main__":
    main()
