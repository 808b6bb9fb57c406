"""`podscribe export` on an archive-sized job: its tables built synthetically (no decoding), then exported.

    .venv/bin/python -m bench.bench_export [--files 2000] [--segments 4] [--formats srt,vtt,txt,tsv,json]

Builds a job dir of ``--files`` done files (``--segments`` segments of ~12 timed words each, the shape of a short
clip of a night's job) with Parquet tables as a job writes them, then times three exports into one folder, in a
fresh process each (as a user runs them): into an empty folder, again (every file already up to date), and after
a quarter of the files' outputs were removed and a tenth edited by hand (what an export after a partial run
meets). Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.storage.tables import FILES_SCHEMA, SEGMENTS_SCHEMA

WORDS = "so the thing about gardening in winter is that nothing seems to happen and yet everything does".split()


def build_job(root: Path, files: int, segments: int, seed: int = 0) -> Path:
    """A finished job of ``files`` inputs (none of which exists on disk: export reads only the tables)."""
    rng = random.Random(seed)
    for table in ("files", "segments"):
        (root / table).mkdir(parents=True)
    (root / "job.json").write_text('{"config": {}, "inputs": []}')
    for i in range(files):
        file_id = f"{i:032x}"
        path = f"/archive/show-{i % 40:02d}/episode-{i:05d}.mp3"
        rows, t = [], 0.0
        for s in range(segments):
            words = []
            for _ in range(12):
                d = rng.uniform(0.15, 0.5)
                words.append(
                    {"word": " " + rng.choice(WORDS), "start_s": round(t, 3), "end_s": round(t + d, 3),
                     "probability": rng.random(), "speaker": None}
                )  # fmt: skip
                t += d + rng.uniform(0.0, 0.3)
            rows.append(
                {"file_id": file_id, "path": path, "segment": s, "start_s": words[0]["start_s"],
                 "end_s": words[-1]["end_s"], "text": "".join(w["word"] for w in words), "piece": s // 2,
                 "avg_logprob": -0.2, "no_speech_prob": 0.01, "words": words, "language": "en", "flags": [],
                 "speaker": None}
            )  # fmt: skip
            t += rng.uniform(0.5, 2.0)
        row = {name: None for name in FILES_SCHEMA.names}
        row.update(
            file_id=file_id, path=path, paths=[path], status="done", duration_s=round(t, 3), language="en",
            n_pieces=segments // 2 + 1, n_segments=segments, n_words=12 * segments, finished_at="2026-12-01T00:00:00",
        )  # fmt: skip
        pq.write_table(pa.Table.from_pylist(rows, schema=SEGMENTS_SCHEMA), root / "segments" / f"{file_id}.parquet")
        pq.write_table(pa.Table.from_pylist([row], schema=FILES_SCHEMA), root / "files" / f"{file_id}.parquet")
    return root


def export(job: Path, formats: str, out: Path) -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "export", str(job), "-f", formats, "-o", str(out)],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"export failed ({result.returncode}): {result.stderr}")
    return wall, result.stdout.strip().splitlines()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--segments", type=int, default=4)
    parser.add_argument("--formats", default="srt,vtt,txt,tsv,json")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="podscribe-export-"))
    try:
        start = time.perf_counter()
        job = build_job(folder / "job", args.files, args.segments)
        print(f"built {args.files} files x {args.segments} segments in {time.perf_counter() - start:.1f} s")
        out = folder / "subs"
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pipeline.cli", "--help"], capture_output=True, check=True)
        print(f"a command that does nothing: {time.perf_counter() - start:.1f} s (start-up, in each time below)")
        wall, said = export(job, args.formats, out)
        print(f"into an empty folder: {wall:.1f} s ({said})")
        wall, said = export(job, args.formats, out)
        print(f"again, everything up to date: {wall:.1f} s ({said})")
        outputs = sorted(p for p in out.iterdir() if p.is_file())
        rng = random.Random(1)
        for path in rng.sample(outputs, len(outputs) // 4):
            path.unlink()
        left = [p for p in outputs if p.exists()]
        for path in rng.sample(left, len(outputs) // 10):
            path.write_text(path.read_text() + "\nchecked by a person\n")
        wall, said = export(job, args.formats, out)
        print(f"after a quarter removed and a tenth edited: {wall:.1f} s ({said})")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
