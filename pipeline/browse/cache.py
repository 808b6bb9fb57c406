"""A job's searchable text in one table, kept beside podscribe's other caches so that a search of a 1,000-episode
archive reads two files, not two thousand.

Reading a thousand small Parquet tables costs more than searching them (measured in decision 0038: ~1.3 ms of
CPU per table in pyarrow, 1.2 s for the files rows of a 1,000-hour archive and as much again for its segments).
So each job's files rows and, per segment, its number, times, speaker and folded text (``text.fold``: what a
search matches) are kept in one file, ``<cache>/search/<digest of the job's path>.arrow`` ($PODSCRIBE_CACHE or
~/.cache/podscribe, as for models), with the size, mtime and inode of every table they were read from (in the
file's metadata: one rename replaces it all). It is an uncompressed Arrow file, mapped into memory when read: a
search of 1,000 hours reads it in milliseconds, where the same columns as Parquet take 0.3-0.8 s to decode. Each read
looks at those (one stat per table) and reads again only the tables that changed, appeared or went: the job dir
stays the one source of truth, and a cache that cannot be written (or read) only makes the search slower.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..facts.errors import StorageError
from ..storage.atomic import atomic_write_bytes
from ..storage.manifest import UNREADABLE, read_table
from ..storage.tables import FILES_SCHEMA, SEGMENTS_SCHEMA, no_rows

VERSION = 1  # of the cached tables' layout (another one is read again from the job)
META = b"podscribe.search"  # the cache's state, in its Parquet metadata: the job, each table's stat, the files rows
SEARCHED = pa.schema(
    [
        ("file_id", pa.string()),
        ("segment", pa.int32()),
        ("start_s", pa.float64()),
        ("end_s", pa.float64()),
        ("speaker", pa.string()),
        ("folded", pa.string()),
    ]
)


def strings(values) -> pa.Array:
    """A string array from Python strings, built from its buffers: ``pa.array`` on a Python list imports pandas
    to ask whether the list is one of its types (0.5 s of a search's start-up)."""
    data = [v.encode() for v in values]
    offsets = np.zeros(len(data) + 1, dtype=np.int32)
    offsets[1:] = np.cumsum([len(d) for d in data])
    return pa.Array.from_buffers(pa.string(), len(data), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])


def cache_root() -> Path:
    """podscribe's cache folder (models/registry.py's default: $PODSCRIBE_CACHE, else ~/.cache/podscribe)."""
    env = os.environ.get("PODSCRIBE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "podscribe"


def folded(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``text.fold`` over a column: lower case, and for the rows that are not ASCII also NFKD with marks dropped."""
    texts = pa.chunked_array([texts]) if isinstance(texts, pa.Array) else texts
    texts = texts.combine_chunks() if texts.num_chunks else strings([])
    lowered = pc.utf8_lower(texts)
    other = pc.invert(pc.string_is_ascii(texts))
    if not pc.any(other).as_py():
        return lowered
    rest = pc.utf8_normalize(pc.filter(texts, other), form="NFKD")
    rest = pc.utf8_lower(pc.replace_substring_regex(rest, pattern=r"\p{M}+", replacement=""))
    return pc.replace_with_mask(lowered, other, rest)


@dataclass
class JobTables:
    """A job's files rows and its segments' searchable columns (``SEARCHED``), and the tables that could not be
    read (path, error)."""

    rows: list[dict]
    segments: pa.Table
    damaged: list[tuple[Path, str]] = field(default_factory=list)


def _stat(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def _tables(folder: Path) -> dict[str, list[int]]:
    """file_id -> the stat of its table, for every table in ``folder``."""
    out = {}
    with contextlib.suppress(OSError):
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.endswith(".parquet") and not entry.name.startswith("."):
                    st = entry.stat()
                    out[entry.name[: -len(".parquet")]] = [st.st_size, st.st_mtime_ns, st.st_ino]
    return out


def job_tables(root: Path, use_cache: bool = True, text: bool = True) -> JobTables:
    """The job's tables, from the cache where they have not changed since it was written. ``text=False``: the files
    rows only (the site's builds: the cache is read, never rewritten, and no segments table is read)."""
    root = Path(os.path.abspath(root))
    path = cache_root() / "search" / f"{hashlib.sha256(str(root).encode()).hexdigest()[:20]}.arrow"
    files_now, segments_now = _tables(root / "files"), _tables(root / "segments")
    known, cached_rows, cached_segments = {}, {}, None
    if use_cache:
        with contextlib.suppress(*UNREADABLE, KeyError, TypeError):
            cached_segments = pa.ipc.open_file(pa.memory_map(str(path))).read_all()  # mapped: no copy, no decoding
            state = json.loads(cached_segments.schema.metadata[META])
            if cached_segments.schema.remove_metadata() != SEARCHED:
                raise TypeError("another layout")
            if state["version"] == VERSION and state["job"] == str(root):
                known, cached_rows = state["tables"], {r["file_id"]: r for r in state["rows"]}
    result = JobTables([], no_rows(SEARCHED))
    fresh, kept_ids, tables = [], [], {}
    for file_id, stat in files_now.items():
        seg_stat = segments_now.get(file_id)
        was = known.get(file_id)
        if was == [stat, seg_stat] and file_id in cached_rows:
            result.rows.append(cached_rows[file_id])
            kept_ids.append(file_id)
            tables[file_id] = was
            continue
        files_path = root / "files" / f"{file_id}.parquet"
        try:
            row = read_table(files_path, FILES_SCHEMA).to_pylist()[0]
        except (*UNREADABLE, IndexError) as exc:
            result.damaged.append((files_path, str(exc)))
            continue
        result.rows.append(row)
        if text and row["status"] == "done" and row["n_segments"] and seg_stat:
            seg_path = root / "segments" / f"{file_id}.parquet"
            try:
                fresh.append(_searched(read_table(seg_path, SEGMENTS_SCHEMA)))
            except UNREADABLE as exc:
                result.damaged.append((seg_path, str(exc)))
                continue  # not cached: read (and found damaged) again next time
        tables[file_id] = [stat, seg_stat]
    parts = []
    if cached_segments is not None and kept_ids and len(kept_ids) == len(known):
        parts.append(cached_segments)  # all of it: mapped, not copied
    elif cached_segments is not None and kept_ids:
        parts.append(cached_segments.filter(pc.is_in(cached_segments.column("file_id"), strings(kept_ids))))
    if not text:
        return result
    result.segments = pa.concat_tables(parts + fresh) if parts or fresh else no_rows(SEARCHED)
    if use_cache and tables != known:  # a row rewritten in place (a failed file failing again) too
        _save(path, root, tables, result)
    return result


def _searched(table: pa.Table) -> pa.Table:
    columns = {name: table.column(name) for name in ("file_id", "segment", "start_s", "end_s", "speaker")}
    return pa.table({**columns, "folded": folded(table.column("text"))}, schema=SEARCHED)


def _save(path: Path, root: Path, tables: dict, found: JobTables) -> None:
    """Write the cache, one file (its state in the file's metadata: a reader sees one version whole). Best effort:
    a cache that cannot be written is only a slower next search."""
    rows = [r for r in found.rows if r["file_id"] in tables]
    state = {"version": VERSION, "job": str(root), "tables": tables, "rows": rows}
    table = found.segments.replace_schema_metadata({META: json.dumps(state, default=str)})
    with contextlib.suppress(StorageError, OSError, pa.ArrowException):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        atomic_write_bytes(path, sink.getvalue().to_pybytes(), durable=False)
