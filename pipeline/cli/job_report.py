"""What `podscribe status` adds to the counts (status.py): is this folder a job at all, the jobs below it, a
rate while the first file is still half done, and one line (or JSON object) per episode.

Read-only, like status: nothing here writes into the job dir.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pyarrow.parquet as pq

from ..audio.media import SAMPLE_RATE
from ..facts.errors import DamagedState
from ..storage.manifest import JobDir, is_job, jobs_below, row_paths

__all__ = ["is_job", "jobs_below", "partial_rate", "file_report", "render_files", "status_json"]


def partial_rate(root: Path) -> float:
    """Audio seconds per wall second of the files being decoded, from their checkpoints: audio in the batches
    saved since the file was claimed, over the time since the claim (``claims/<id>.json`` is written when a
    worker claims a file). 0.0 when nothing can be said yet."""
    audio_s = wall_s = 0.0
    partial = root / "partial"
    for folder in sorted(partial.iterdir()) if partial.is_dir() else []:
        counter = root / "claims" / f"{folder.name}.json"
        try:
            claimed = counter.stat().st_mtime
        except OSError:
            continue
        batches = [(p, p.stat().st_mtime) for p in folder.glob("batch-*.parquet")]
        recent = [(p, t) for p, t in batches if t >= claimed]
        if not recent:
            continue
        for path, _ in recent:
            try:
                audio_s += sum(pq.read_table(path, columns=["n_samples"]).column("n_samples").to_pylist()) / SAMPLE_RATE
            except (OSError, ValueError):
                continue
        wall_s += max(t for _, t in recent) - claimed
    return audio_s / wall_s if wall_s > 0 else 0.0


FILE_FIELDS = ("path", "status", "title", "artist", "date", "duration_s", "language", "n_segments", "n_words",
               "n_speakers", "wall_s", "realtime_factor", "finished_at", "error", "warnings")  # fmt: skip


def file_report(root: Path) -> list[dict]:
    """One entry per input path of the job: its row's outcome, or pending (half done when it has checkpoints)."""
    job = JobDir(root)
    entries = []
    seen = set()
    for row in job.file_rows():
        for path in row_paths(row):
            seen.add(path)
            entries.append({**{k: row.get(k) for k in FILE_FIELDS}, "path": path, "file_id": row["file_id"]})
    try:
        inputs = (job.read_job() or {}).get("inputs", [])
    except DamagedState:
        inputs = []
    fingerprints = job.fingerprints()
    for path in inputs:
        if path in seen:
            continue
        ident = fingerprints.identify(Path(path))
        state = "half done" if ident.readable and job.has_partial(ident.file_id) else "pending"
        entry = dict.fromkeys(FILE_FIELDS)
        entries.append({**entry, "path": path, "status": state if ident.readable else "missing",
                        "error": ident.problem, "file_id": ident.file_id})  # fmt: skip
        seen.add(path)
    return sorted(entries, key=lambda e: e["path"])


def render_files(entries: list[dict]) -> str:
    lines = []
    for e in entries:
        duration = f"{e['duration_s']:.0f} s" if e["duration_s"] is not None else "?"
        extra = e.get("error") or e.get("warnings") or ""
        lines.append(
            f"{e['status']:9} {duration:>8}  {e.get('language') or '':3} {e.get('n_segments') or 0:5} segments  "
            f"{e['path']}" + (f"  ({extra})" if extra else "")
        )
    return "\n".join(lines)


def status_json(status, entries: list[dict] | None) -> str:
    doc = {
        **asdict(status),
        "root": str(status.root),
        "throughput": status.throughput,
        "job_throughput": status.job_throughput,
        "eta_s": status.eta_s,
    }
    if entries is not None:
        doc["files"] = entries
    return json.dumps(doc, indent=1, default=str)
