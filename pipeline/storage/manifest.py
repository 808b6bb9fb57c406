"""Manifest stage: Parquet tables of a job directory, written atomically as files finish.

Layout (documented for users in manifests/README.md)::

    <job dir>/job.json                  resolved configuration of the job
    <job dir>/README.md                 a dataset card: datasets.load_dataset(<job dir>[, "files"|"pieces"])
    <job dir>/files/<file_id>.parquet     one row: the input's latest outcome
    <job dir>/segments/<file_id>.parquet  the input's stitched segments
    <job dir>/pieces/<file_id>.parquet    per-piece decoding facts and stats
    <job dir>/partial/<file_id>/batch-<first piece>.parquet
                                          finished batches of a file not finished yet (resume)
    <job dir>/fingerprints.json           content id of each input path, by size/mtime/inode (a cache)
    <job dir>/verified.json               tables whose every page read back whole, by size/mtime/inode (verified.py)
    <job dir>/damaged/<table>/...         tables that could not be read, moved aside (never deleted)
    <job dir>/.lock                       held (flock) by the worker planning the job (one at a time)
    <job dir>/workers/<host>-<pid>.lock   held by each live worker (workers.py)
    <job dir>/claims/<file_id>.lock|.json held by the worker decoding the input; deaths counted

Every table has a fixed schema, so each folder reads as one dataset with
pyarrow.dataset, pandas or ``datasets.load_dataset("parquet", ...)``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..facts.errors import ConfigChanged, DamagedState, JobLocked, UsageProblem
from ..facts.rows import PieceRow, SegmentRow
from .atomic import atomic_write_bytes, try_flock
from .identity import Fingerprints
from .tables import FILES_SCHEMA, PARTIAL_SCHEMA, TABLES, no_rows
from .verified import VERIFIED, Verified

__all__ = ["ConfigChanged", "JobLocked", "JobDir", "write_table", "row_paths", "damage_hint", "is_job", "jobs_below"]

log = logging.getLogger("podscribe")

# What reading a damaged table raises: I/O and format errors, a page that fails its CRC, sizes read from garbage.
UNREADABLE = (OSError, ValueError, pa.ArrowException)


def _wrong_types(record: dict) -> str | None:
    """What in a parsed job.json is not of the type podscribe wrote (None: nothing)."""
    inputs = record.get("inputs", [])
    if not isinstance(inputs, list) or not all(isinstance(x, str) for x in inputs):
        return "inputs is not a list of paths"
    outputs = record.get("outputs") or {}
    if not isinstance(outputs, dict):
        return "outputs is not a table"
    if outputs and not (
        isinstance(outputs.get("subtitles"), list)
        and all(isinstance(x, str) for x in outputs["subtitles"])
        and isinstance(outputs.get("output_dir") or "", str)
        and isinstance(outputs.get("cue_rules"), dict)
    ):
        return "outputs is not a list of formats, a folder and cue rules"
    for section, value in record.get("config", {}).items():
        if section in ("models", "decode", "cut", "diarize") and not isinstance(value, dict):
            return f"config.{section} is a {type(value).__name__}, not a table"
    for key, value in record.get("config", {}).get("models", {}).items():
        if not isinstance(value, str | None):
            return f"config.models.{key} is a {type(value).__name__}, not a name"
    if not isinstance(record.get("config_hash", ""), str):
        return "config_hash is not a string"
    return None


def import_pandas_beside() -> None:
    """pyarrow imports pandas the first time it turns Python values into an array (``pa.array`` asks whether they
    are one of pandas' types): 0.15-0.2 s at a job's first row, on the way from the last token to the first file
    done. Imported here on a thread of its own, while the job plans and decodes; a row that comes first waits for
    it as for any import under way. Not a daemon: an exit waits for it rather than stop an import half done."""

    def load() -> None:
        with contextlib.suppress(ImportError):  # pyarrow works without pandas
            importlib.import_module("pandas")

    if "pandas" not in sys.modules:
        threading.Thread(target=load, name="podscribe-import").start()


def write_table(path: Path, rows: Sequence[Mapping[str, object]], schema: pa.Schema) -> None:
    """Every data page with its CRC: a page damaged on disk fails to read (``read_table``) instead of reading as
    other values (a footer that reads says nothing about the pages before it)."""
    table = pa.Table.from_pylist(rows, schema=schema)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, write_page_checksum=True)
    atomic_write_bytes(path, sink.getvalue().to_pybytes())


def read_table(path: Path, schema: pa.Schema, columns: list[str] | None = None) -> pa.Table:
    """A table read whole (or ``columns`` of it), each page checked against its CRC (tables written before the
    CRCs: read unchecked). The file read as it is where it has the schema (a third of the time of a read through
    pyarrow's datasets: a job of thousands of files reads them all), else conformed to it (a table written before
    a column was added: null there)."""
    want = schema if columns is None else pa.schema([schema.field(c) for c in columns])
    table = pq.ParquetFile(path, page_checksum_verification=True).read(columns=columns, use_threads=False)
    if table.schema.equals(want, check_metadata=False):
        return table
    return pq.read_table(path, schema=schema, columns=columns, page_checksum_verification=True)


def row_paths(row: dict) -> list[str]:
    """A files row's input paths, absolute (rows made before paths were stored absolute: from this folder)."""
    return [os.path.abspath(p) for p in (row.get("paths") or [row["path"]])]


def is_job(root: Path) -> bool:
    """A job dir: it has job.json or a files table (job.json may be lost; the rows still make it a job)."""
    return (root / "job.json").is_file() or (root / "files").is_dir()


def jobs_below(root: Path, depth: int = 2) -> list[Path]:
    """Job dirs inside ``root`` (whisper mode keeps them in ``<output dir>/podscribe-manifests/<config>``)."""
    found: list[Path] = []
    level = [root]
    for _ in range(depth):
        level = sorted(p for folder in level for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
        found += [p for p in level if is_job(p)]
    return found


# -- the job directory ---------------------------------------------------------------------


class JobDir:
    def __init__(self, root: Path, verify_all: bool = False):
        self.root = Path(root)
        self._damage: list[tuple[Path, str]] = []  # tables found unreadable since the last take_damage()
        self.verify_all = verify_all  # `status --verify`: every done table's pages read again, remembered or not
        self.verified = Verified(self.root)  # tables whose every page read back whole (verified.py)

    def table_path(self, table: str, file_id: str) -> Path:
        return self.root / table / f"{file_id}.parquet"

    def fingerprints(self) -> Fingerprints:
        return Fingerprints(self.root / "fingerprints.json")

    # -- one runner at a time -------------------------------------------------

    @contextlib.contextmanager
    def locked(self, wait_s: float | None = None):
        """Hold the job's preparation lock (flock: the OS drops it when the process dies) for a with-block.

        Planning (inputs, fingerprints, the configuration check, --restart) happens under it, one
        worker at a time; decoding does not (workers.py). A worker that finds it held waits up to
        ``wait_s`` (PODSCRIBE_LOCK_WAIT_S, default 600 s) for the holder to finish planning.
        A run that fails before writing anything leaves nothing behind: a job dir it created
        and that holds only the lock is removed again.
        """
        wait_s = float(os.environ.get("PODSCRIBE_LOCK_WAIT_S", "600")) if wait_s is None else wait_s
        created = not self.root.exists()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise UsageProblem(f"cannot use {self.root} as the job directory: {exc.strerror or exc}") from exc
        deadline = time.monotonic() + wait_s
        while not try_flock(fd):
            if time.monotonic() >= deadline:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
                os.close(fd)
                raise JobLocked(
                    f"another podscribe worker (pid {holder}) has been preparing {self.root} for "
                    f"{wait_s:.0f} s and does not finish; is it stopped (SIGSTOP, a hung mount)?"
                )
            time.sleep(0.1)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        except OSError as exc:
            os.close(fd)
            raise UsageProblem(f"cannot write into the job directory {self.root}: {exc.strerror or exc}") from exc
        failed = True
        try:
            yield self
            failed = False
        finally:
            if failed and created and {p.name for p in self.root.iterdir()} <= {".lock"}:
                (self.root / ".lock").unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    self.root.rmdir()
            os.close(fd)

    # -- configuration ---------------------------------------------------------

    @staticmethod
    def config_hash(config: dict) -> str:
        return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]

    def read_job(self) -> dict | None:
        """job.json, or None when there is none; DamagedState when it cannot be read as a job record."""
        path = self.root / "job.json"
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise DamagedState(f"{path} is damaged ({exc})") from exc
        if not isinstance(record, dict) or not isinstance(record.get("config", {}), dict):
            raise DamagedState(f"{path} is damaged (not a job record: {type(record).__name__})")
        wrong = _wrong_types(record)
        if wrong:
            raise DamagedState(
                f"{path} is damaged ({wrong}): restore it, remove it (it is rebuilt from the results when they "
                "match this run's options), or --restart to start over"
            )
        return record

    def check_config(
        self,
        config: dict,
        speed_only: tuple[str, ...] = (),
        old: dict | None = None,
        added: dict[str, object] | None = None,
    ) -> None:
        """Refuse to go on with a job dir made under another configuration, naming what changed.

        Keys in ``speed_only`` (dotted paths) change how fast, never what: a change there is allowed.
        ``added``: options newer than some job dirs, with the value that reproduces what older versions
        did; a job dir without the key counts as having that value (so it resumes with that setting)."""
        if old is None or old.get("config_hash") == self.config_hash(config):
            return
        before = json.loads(json.dumps(old.get("config", {})))
        for dotted, value in (added or {}).items():
            *parents, leaf = dotted.split(".")
            node = before
            for key in parents:
                node = node.setdefault(key, {}) if isinstance(node, dict) else {}
            if isinstance(node, dict):
                node.setdefault(leaf, value)
        changes = tuple(c for c in _diff(before, config) if c[0] not in speed_only)
        if not changes:
            return
        said = "; ".join(f"{path}: {a!r} -> {b!r}" for path, a, b in changes)
        raise ConfigChanged(
            f"{self.root} was made with another configuration ({said}). "
            "Use the same options to resume, another --out, or --restart to start over.",
            changes,
        )

    def write_job(
        self, config: dict, inputs: list[str], outputs: dict | None = None, speaker_names: dict | None = None
    ) -> None:
        record = {"config": config, "config_hash": self.config_hash(config), "inputs": inputs}
        if outputs:
            record["outputs"] = outputs  # the subtitles the last worker writes (outputs/agreed.py)
        if speaker_names:
            record["speaker_names"] = speaker_names  # what `export` names the speakers by when not told
        atomic_write_bytes(self.root / "job.json", json.dumps(record, indent=2, sort_keys=True).encode())
        if not (self.root / "README.md").exists():
            atomic_write_bytes(self.root / "README.md", DATASET_CARD.encode())

    def clear(self) -> None:
        """--restart: forget every result (the lock, the folder and quarantined tables stay; the subtitles are
        outputs, which only ``outputs.OutputDir.remove_own`` removes: never a person's edit)."""
        for name in ("files", "segments", "pieces", "partial"):
            shutil.rmtree(self.root / name, ignore_errors=True)
        (self.root / "job.json").unlink(missing_ok=True)
        (self.root / VERIFIED).unlink(missing_ok=True)
        self.verified = Verified(self.root)

    # -- pieces of unfinished files ----------------------------------------------

    def write_partial(self, file_id: str, first_piece: int, rows: list[dict]) -> None:
        write_table(self.root / "partial" / file_id / f"batch-{first_piece:06d}.parquet", rows, PARTIAL_SCHEMA)

    def read_partial(self, file_id: str) -> dict[int, dict]:
        """Persisted pieces of an unfinished file. A checkpoint that cannot be read is dropped with a
        warning: its pieces are simply decoded again."""
        folder = self.root / "partial" / file_id
        rows = {}
        for path in sorted(folder.glob("batch-*.parquet")) if folder.is_dir() else []:
            try:
                batch = read_table(path, PARTIAL_SCHEMA).to_pylist()
            except UNREADABLE as exc:
                log.warning("dropping damaged checkpoint %s (%s); its pieces are decoded again", path, exc)
                path.unlink(missing_ok=True)
                continue
            for row in batch:
                rows[row["piece"]] = row
        return rows

    def has_partial(self, file_id: str) -> bool:
        return self.persisted_batches(file_id) > 0

    def persisted_batches(self, file_id: str) -> int:
        """How many checkpoints an unfinished file has (progress, for counting deaths)."""
        return sum(1 for _ in (self.root / "partial" / file_id).glob("batch-*.parquet"))

    def drop_partial(self, file_id: str) -> None:
        shutil.rmtree(self.root / "partial" / file_id, ignore_errors=True)

    def forget(self, file_id: str) -> None:
        """Remove every table of an input (its content changed: a new id replaces it)."""
        for table in TABLES:
            self.table_path(table, file_id).unlink(missing_ok=True)
        self.drop_partial(file_id)

    def write_file(
        self, row: dict, segments: list[SegmentRow], pieces: list[PieceRow], keep_partial: bool = False
    ) -> None:
        """Segments and pieces first, the files row last: a files row means its segments are complete.

        Empty tables are not written (``datasets`` refuses a Parquet file of zero rows):
        a file without speech has a files row with ``n_segments == 0`` and no segments file.
        ``keep_partial``: a failed row that keeps the file's checkpoints (a retry resumes from them).
        """
        fid = row["file_id"]
        for table, rows in (("segments", segments), ("pieces", pieces)):
            if rows:
                write_table(self.table_path(table, fid), rows, TABLES[table])
                self._written(table, fid)
            else:
                self.table_path(table, fid).unlink(missing_ok=True)
        write_table(self.table_path("files", fid), [row], FILES_SCHEMA)
        self.verified.save()
        if not keep_partial:
            self.drop_partial(fid)

    def write_labels(self, row: dict, segments: list[SegmentRow]) -> None:
        """A done file's segments with speaker labels, then its files row (the commit): the transcript's text and
        times are the same, only split where the speaker changes; its pieces table is not touched."""
        write_table(self.table_path("segments", row["file_id"]), segments, TABLES["segments"])
        self._written("segments", row["file_id"])
        write_table(self.table_path("files", row["file_id"]), [row], FILES_SCHEMA)
        self.verified.save()

    def update_file_row(self, row: dict) -> None:
        """Rewrite a files row's bookkeeping (its paths); its transcript is not touched."""
        write_table(self.table_path("files", row["file_id"]), [row], FILES_SCHEMA)

    # -- reading ----------------------------------------------------------------------

    def file_rows(self, columns: list[str] | None = None) -> list[dict]:
        return self.read("files", columns=columns).to_pylist()

    def file_row(self, file_id: str) -> dict | None:
        """One input's files row as it is on disk now (None: none, or unreadable)."""
        try:
            rows = read_table(self.table_path("files", file_id), FILES_SCHEMA).to_pylist()
        except UNREADABLE:
            return None
        return rows[0] if rows else None

    def read(self, table: str, file_ids: set[str] | None = None, columns: list[str] | None = None) -> pa.Table:
        """All rows of a table (or of some inputs; ``columns``: only those). A file that cannot be read is left out
        and listed in ``self.damaged``: one damaged file never hides the rest of the job. The files are read a few
        at a time (pyarrow decodes without the GIL): a job of thousands of inputs has thousands of them."""
        folder = self.root / table
        files = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
        if file_ids is not None:
            files = [f for f in files if f.stem in file_ids]

        def one(f: Path) -> pa.Table | str:
            try:
                return read_table(f, TABLES[table], columns)
            except UNREADABLE as exc:
                return str(exc)

        if len(files) > 8:
            with ThreadPoolExecutor(max_workers=4) as pool:
                found = list(pool.map(one, files))
        else:
            found = [one(f) for f in files]
        tables = []
        for f, result in zip(files, found):
            if isinstance(result, str):
                self._damage.append((f, result))
                self.verified.forget(f"{table}/{f.stem}")  # the next run reads it whole and sets it aside
            else:
                tables.append(result)
        if tables:
            return pa.concat_tables(tables)
        schema = TABLES[table]
        return no_rows(schema if columns is None else pa.schema([schema.field(c) for c in columns]))

    def take_damage(self) -> list[tuple[Path, str]]:
        """The tables found unreadable (path, error) by the reads since the last call: the reader that asked
        decides what to do with them (planning moves them aside, ``status`` and ``export`` report them)."""
        damage, self._damage = self._damage, []
        return damage

    def readable(self, table: str, file_id: str) -> bool:
        """The table file exists and reads whole: its footer (a truncated write) and every page (bytes damaged in
        the middle: a page that does not decode, or one that fails its CRC). Unreadable ones are listed in ``take_damage()``.

        Pages are read once per table: a table that read whole is remembered by its size, times and inode
        (``verified.py``; tables are written once, atomically, so a new write is a new inode), and is then checked
        by its footer alone. Planning and `status` of an archive of thousands of episodes read no table data that way;
        `status --verify` (``verify_all``) reads every page again, for damage that kept the file's stat; a table
        found damaged is forgotten (the one write a `status` makes), so the next run reads it whole again."""
        path = self.table_path(table, file_id)
        key = f"{table}/{file_id}"
        try:
            stamp = Verified.stamp(path)
            if not self.verify_all and self.verified.holds(key, stamp):
                pq.ParquetFile(path)  # the footer, what a file cut short or replaced in place fails
                return True
            pq.ParquetFile(path, page_checksum_verification=True).read()
        except FileNotFoundError:
            return False
        except UNREADABLE as exc:
            if path.exists():
                self._damage.append((path, str(exc)))
                self.verified.forget(key)  # found by `status --verify` or a reader: the next run reads it whole
            return False
        self.verified.remember(key, stamp)
        return True

    def _written(self, table: str, file_id: str) -> None:
        """A table this process just wrote whole (from memory, synced, renamed into place): remembered as read."""
        with contextlib.suppress(OSError):
            self.verified.remember(f"{table}/{file_id}", Verified.stamp(self.table_path(table, file_id)))

    def quarantine(self, path: Path) -> Path:
        """Move a damaged table out of the way (kept, never deleted) into ``damaged/``."""
        target = self.root / "damaged" / path.parent.name / f"{path.name}.{datetime.now():%Y%m%dT%H%M%S}"
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
        return target


# A dataset card: `datasets.load_dataset(JOB)` reads the segments table, `load_dataset(JOB, "files")` the files
# rows (each table by its own glob: the job dir's lock and JSON files are not read as Parquet). The "parquet"
# builder with data_dir=JOB reads every file of the folder as one table, which three tables cannot be: give it
# data_dir=JOB/segments.
DATASET_CARD = """---
configs:
- config_name: segments
  data_files: "segments/*.parquet"
  default: true
- config_name: files
  data_files: "files/*.parquet"
- config_name: pieces
  data_files: "pieces/*.parquet"
---
# A podscribe job

Parquet tables: `segments/` (the transcripts), `files/` (one row per input), `pieces/` (decoding facts).
`datasets.load_dataset("<this folder>")` reads the segments, `load_dataset("<this folder>", "files")` the files
rows; pyarrow, pandas and DuckDB read each folder (`segments/*.parquet`) as one table.
"""


def damage_hint(path: Path, error: str) -> str:
    return (
        f"damaged table {path} ({error.splitlines()[0] if error else 'unreadable'}): rerun the job to move it "
        "to damaged/ and decode that input again, or --restart"
    )


def _diff(old: dict, new: dict, prefix: str = "") -> list[tuple[str, object, object]]:
    """(dotted path, old value, new value) of every leaf that differs."""
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _diff(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append((f"{prefix}{key}", a, b))
    return out
