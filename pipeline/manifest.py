"""Manifest stage: Parquet tables of a job directory, written atomically as files finish.

Layout (documented for users in manifests/README.md)::

    <job dir>/job.json                  resolved configuration of the job
    <job dir>/files/<file_id>.parquet     one row: the input's latest outcome
    <job dir>/segments/<file_id>.parquet  the input's stitched segments
    <job dir>/pieces/<file_id>.parquet    per-piece decoding facts and stats

Every table has a fixed schema, so each folder reads as one dataset with
pyarrow.dataset, pandas or ``datasets.load_dataset("parquet", ...)``.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

FILES_SCHEMA = pa.schema([
    ("file_id", pa.string()), ("path", pa.string()), ("size_bytes", pa.int64()), ("mtime", pa.float64()),
    ("status", pa.string()), ("error", pa.string()), ("warnings", pa.string()),
    ("duration_s", pa.float64()), ("language", pa.string()),
    ("n_pieces", pa.int32()), ("n_segments", pa.int32()), ("n_words", pa.int32()),
    ("wall_s", pa.float64()), ("realtime_factor", pa.float64()),
    ("model", pa.string()), ("model_sha256", pa.string()), ("assistant", pa.string()), ("runtime", pa.string()),
    ("main_calls", pa.int64()), ("draft_calls", pa.int64()), ("accepted", pa.int64()),
    ("finished_at", pa.string()),
])

SEGMENTS_SCHEMA = pa.schema([
    ("file_id", pa.string()), ("path", pa.string()), ("segment", pa.int32()),
    ("start_s", pa.float64()), ("end_s", pa.float64()), ("text", pa.string()), ("piece", pa.int32()),
    ("avg_logprob", pa.float32()), ("no_speech_prob", pa.float32()),
])

PIECES_SCHEMA = pa.schema([
    ("file_id", pa.string()), ("piece", pa.int32()), ("start_s", pa.float64()), ("end_s", pa.float64()),
    ("start_sample", pa.int64()), ("end_sample", pa.int64()),
    ("language", pa.string()), ("skipped", pa.string()), ("no_speech_prob", pa.float32()),
    ("avg_logprob", pa.float32()), ("compression_ratio", pa.float32()), ("n_tokens", pa.int32()),
    ("main_calls", pa.int32()), ("draft_calls", pa.int32()), ("accepted", pa.int32()),
])

TABLES = {"files": FILES_SCHEMA, "segments": SEGMENTS_SCHEMA, "pieces": PIECES_SCHEMA}


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """temp file in the same folder → fsync → rename → fsync the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_table(path: Path, rows: list[dict], schema: pa.Schema) -> None:
    table = pa.Table.from_pylist(rows, schema=schema)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    atomic_write_bytes(path, sink.getvalue().to_pybytes())


def fingerprint(path: Path, block: int = 1 << 16) -> str:
    """Content identity of an input: size plus a hash of its first and last 64 KiB.

    A renamed file keeps its id; a changed file gets a new one. Paths that
    cannot be read get an id from their path, so they still have a row.
    """
    h = hashlib.sha1()
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            h.update(str(size).encode())
            h.update(f.read(block))
            if size > block:
                f.seek(max(block, size - block))
                h.update(f.read(block))
        return h.hexdigest()[:16]
    except OSError:
        h.update(b"unreadable:" + str(path).encode("utf-8", "surrogateescape"))
        return "x" + h.hexdigest()[:15]


class JobDir:
    def __init__(self, root: Path):
        self.root = Path(root)

    def table_path(self, table: str, file_id: str) -> Path:
        return self.root / table / f"{file_id}.parquet"

    def write_job(self, config: dict) -> None:
        atomic_write_bytes(self.root / "job.json", json.dumps(config, indent=2, sort_keys=True).encode())

    def write_file(self, row: dict, segments: list[dict], pieces: list[dict]) -> None:
        """Segments and pieces first, the files row last: a files row means its segments are complete.

        Empty tables are not written (``datasets`` refuses a Parquet file of zero rows):
        a file without speech has a files row with ``n_segments == 0`` and no segments file.
        """
        fid = row["file_id"]
        for table, rows in (("segments", segments), ("pieces", pieces)):
            if rows:
                write_table(self.table_path(table, fid), rows, TABLES[table])
            else:
                self.table_path(table, fid).unlink(missing_ok=True)
        write_table(self.table_path("files", fid), [row], FILES_SCHEMA)

    def file_status(self, file_id: str) -> str | None:
        path = self.table_path("files", file_id)
        if not path.is_file():
            return None
        return pq.read_table(path, columns=["status"]).column("status")[0].as_py()

    def read(self, table: str) -> pa.Table:
        folder = self.root / table
        files = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
        if not files:
            return TABLES[table].empty_table()
        return pa.concat_tables(pq.read_table(f, schema=TABLES[table]) for f in files)
