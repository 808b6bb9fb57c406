"""Manifest stage: Parquet tables of a job directory, written atomically as files finish.

Layout (documented for users in manifests/README.md)::

    <job dir>/job.json                  resolved configuration of the job
    <job dir>/files/<file_id>.parquet     one row: the input's latest outcome
    <job dir>/segments/<file_id>.parquet  the input's stitched segments
    <job dir>/pieces/<file_id>.parquet    per-piece decoding facts and stats
    <job dir>/partial/<file_id>/batch-<first piece>.parquet
                                          finished batches of a file not finished yet (resume)
    <job dir>/.lock                       held (flock) by the one runner working on the job

Every table has a fixed schema, so each folder reads as one dataset with
pyarrow.dataset, pandas or ``datasets.load_dataset("parquet", ...)``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
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
    ("decode_mode", pa.string()),
    ("main_calls", pa.int64()), ("draft_calls", pa.int64()), ("drafted", pa.int64()), ("accepted", pa.int64()),
    ("finished_at", pa.string()),
])

WORD = pa.struct([("word", pa.string()), ("start_s", pa.float64()), ("end_s", pa.float64()),
                  ("probability", pa.float32())])

SEGMENTS_SCHEMA = pa.schema([
    ("file_id", pa.string()), ("path", pa.string()), ("segment", pa.int32()),
    ("start_s", pa.float64()), ("end_s", pa.float64()), ("text", pa.string()), ("piece", pa.int32()),
    ("avg_logprob", pa.float32()), ("no_speech_prob", pa.float32()),
    ("words", pa.list_(WORD)),  # null when the job ran without word timestamps
])

PIECES_SCHEMA = pa.schema([
    ("file_id", pa.string()), ("piece", pa.int32()), ("start_s", pa.float64()), ("end_s", pa.float64()),
    ("start_sample", pa.int64()), ("end_sample", pa.int64()),
    ("language", pa.string()), ("skipped", pa.string()), ("no_speech_prob", pa.float32()),
    ("avg_logprob", pa.float32()), ("compression_ratio", pa.float32()), ("n_tokens", pa.int32()),
    ("main_calls", pa.int32()), ("draft_calls", pa.int32()), ("drafted", pa.int32()), ("accepted", pa.int32()),
    ("passes", pa.int32()),
])

# A decoded piece as persisted before its file is finished: the pieces columns plus what
# stitching needs again (piece-relative segments) and the token ids.
PARTIAL_SCHEMA = pa.schema([
    *PIECES_SCHEMA,
    ("n_samples", pa.int64()),
    ("tokens", pa.list_(pa.int32())),
    ("segments", pa.list_(pa.struct([("start_s", pa.float64()), ("end_s", pa.float64()), ("text", pa.string()),
                                     ("n_tokens", pa.int32()), ("words", pa.list_(WORD))]))),
])

TABLES = {"files": FILES_SCHEMA, "segments": SEGMENTS_SCHEMA, "pieces": PIECES_SCHEMA}


class JobLocked(RuntimeError):
    """Another runner holds the job directory."""


class ConfigChanged(RuntimeError):
    """The job directory was made with another configuration."""


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

    # -- one runner at a time -------------------------------------------------

    def lock(self) -> None:
        """Take the job's lock for the life of this process (flock: the OS drops it when we die)."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise JobLocked(f"another podscribe runner (pid {holder}) is working on {self.root}; "
                            "wait for it to finish or stop it first") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock_fd = fd

    # -- configuration ---------------------------------------------------------

    @staticmethod
    def config_hash(config: dict) -> str:
        return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]

    def read_job(self) -> dict | None:
        path = self.root / "job.json"
        return json.loads(path.read_text()) if path.is_file() else None

    def check_config(self, config: dict, speed_only: tuple[str, ...] = ()) -> None:
        """Refuse to go on with a job dir made under another configuration, naming what changed.

        Keys in ``speed_only`` (dotted paths) change how fast, never what: a change there is allowed."""
        old = self.read_job()
        if old is None or old.get("config_hash") == self.config_hash(config):
            return
        changes = [c for c in _diff(old.get("config", {}), config) if c.split(":")[0] not in speed_only]
        if not changes:
            return
        raise ConfigChanged(f"{self.root} was made with another configuration ({'; '.join(changes)}). "
                            "Use the same options to resume, another --out, or --restart to start over.")

    def write_job(self, config: dict, inputs: list[str]) -> None:
        record = {"config": config, "config_hash": self.config_hash(config), "inputs": inputs}
        atomic_write_bytes(self.root / "job.json", json.dumps(record, indent=2, sort_keys=True).encode())

    def clear(self) -> None:
        """--restart: forget every result (the lock and the folder stay)."""
        for name in ("files", "segments", "pieces", "partial", "subtitles"):
            shutil.rmtree(self.root / name, ignore_errors=True)
        (self.root / "job.json").unlink(missing_ok=True)

    # -- pieces of unfinished files ----------------------------------------------

    def write_partial(self, file_id: str, first_piece: int, rows: list[dict]) -> None:
        write_table(self.root / "partial" / file_id / f"batch-{first_piece:06d}.parquet", rows, PARTIAL_SCHEMA)

    def read_partial(self, file_id: str) -> dict[int, dict]:
        folder = self.root / "partial" / file_id
        rows = {}
        for path in sorted(folder.glob("batch-*.parquet")) if folder.is_dir() else []:
            for row in pq.read_table(path, schema=PARTIAL_SCHEMA).to_pylist():
                rows[row["piece"]] = row
        return rows

    def has_partial(self, file_id: str) -> bool:
        return any((self.root / "partial" / file_id).glob("batch-*.parquet"))

    def drop_partial(self, file_id: str) -> None:
        shutil.rmtree(self.root / "partial" / file_id, ignore_errors=True)

    def forget(self, file_id: str) -> None:
        """Remove every table of an input (its content changed: a new id replaces it)."""
        for table in TABLES:
            self.table_path(table, file_id).unlink(missing_ok=True)
        self.drop_partial(file_id)

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
        self.drop_partial(fid)

    def file_rows(self) -> list[dict]:
        return self.read("files").to_pylist()

    def read(self, table: str) -> pa.Table:
        folder = self.root / table
        files = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
        if not files:
            return TABLES[table].empty_table()
        return pa.concat_tables(pq.read_table(f, schema=TABLES[table]) for f in files)


def _diff(old: dict, new: dict, prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _diff(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return out
