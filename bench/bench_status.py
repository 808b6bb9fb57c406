"""`podscribe status` on an archive of hour-long episodes: every table's pages read (as every status did before
the tables a job verified were remembered: ``--verify`` still does it) against footers only (#44).

    .venv/bin/python -m bench.bench_status [--files 2000] [--segments 600] [--job-dir DIR]

Builds (or reuses, with ``--job-dir``) a finished job of ``--files`` done files of ``--segments`` segments each
(~12 timed words a segment: 600 is an hour of talk) with their pieces tables, as bench_export builds them (no
decoding); then, in a fresh process each as a user runs it: `status --verify`, the tables remembered as a run's
plan remembers them (``storage/verified.py``), and `status`. Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.bench_export import build_job
from pipeline.storage.tables import PIECES_SCHEMA

REMEMBER = """
import sys
from pipeline.storage.manifest import JobDir
from pipeline.job.state import file_state
job = JobDir(sys.argv[1])
states = [file_state(job, row) for row in job.file_rows()]
job.verified.save()
print(states.count("done"))
"""


def with_pieces(root: Path) -> None:
    (root / "pieces").mkdir(exist_ok=True)
    for f in sorted((root / "files").glob("*.parquet")):
        row = pq.read_table(f).to_pylist()[0]
        pieces = []
        for i in range(row["n_pieces"]):
            piece = {name: None for name in PIECES_SCHEMA.names}
            piece.update(file_id=row["file_id"], path=row["path"], piece=i, start_s=30.0 * i, end_s=30.0 * i + 29.5)
            pieces.append(piece)
        pq.write_table(pa.Table.from_pylist(pieces, schema=PIECES_SCHEMA), root / "pieces" / f.name)


def timed(*args: str) -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, *args], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{args} failed ({result.returncode}): {result.stderr}")
    lines = result.stdout.strip().splitlines()
    return wall, next((line for line in lines if " done" in line), lines[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--segments", type=int, default=600)
    parser.add_argument("--job-dir", type=Path, help="build the job here once, reuse it after")
    args = parser.parse_args()
    job = args.job_dir or Path(tempfile.mkdtemp(prefix="podscribe-bench-status-")) / "job"
    if not (job / "files").is_dir():
        start = time.perf_counter()
        build_job(job, args.files, args.segments)
        with_pieces(job)
        print(f"built {args.files} files x {args.segments} segments in {time.perf_counter() - start:.0f} s")
    (job / "verified.json").unlink(missing_ok=True)
    size_mb = sum(p.stat().st_size for t in ("segments", "pieces") for p in (job / t).glob("*.parquet")) / 1e6
    print(f"{job}: segments and pieces tables {size_mb:.0f} MB")
    verify_s, line = timed("-m", "pipeline.cli", "status", str(job), "--verify")
    print(f"status --verify (every page, as every status read before): {verify_s:.2f} s   {line}")
    remember_s, done = timed("-c", REMEMBER, str(job))
    print(f"a plan's reading, remembering each table: {remember_s:.2f} s ({done} done)")
    status_s, line = timed("-m", "pipeline.cli", "status", str(job))
    print(f"status (footers of remembered tables): {status_s:.2f} s   {line}")


if __name__ == "__main__":
    main()
