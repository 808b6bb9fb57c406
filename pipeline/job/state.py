"""A job's state, read without writing: each files row and the one rule for what is done, failed or pending;
each input path and the content it holds now; the tables found damaged. Planning (``plan.py``), ``podscribe
status`` and ``--dry-run`` all start from this one value.

A done row whose segments or pieces table is missing or cannot be read whole (a truncated write, bytes damaged in
the middle of it: a page that fails to decode or its CRC) is pending again: the next run moves the table to
``damaged/`` and decodes the input again; status counts it pending. A path whose content
changed no longer belongs to its old row; a path that cannot be read now keeps the results it had (reported
missing); copies of one content decode once and keep every path (decision 0001).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from ..storage.identity import Fingerprints, Identity, legacy_fingerprint, path_id
from ..storage.manifest import JobDir, row_paths
from .inputs import InputRef

log = logging.getLogger("podscribe")

# The tables a done row has, each with the row's count of its rows (a file without speech has no segments table).
DONE_TABLES = (("segments", "n_segments"), ("pieces", "n_pieces"))


def damaged_done(job: JobDir, row: dict) -> bool:
    """A done file whose segments or pieces table is missing or cannot be read whole: done no more (an unreadable
    table is in the damage ``job.take_damage()`` returns next)."""
    if row["status"] != "done":
        return False
    return any(row[count] and not job.readable(table, row["file_id"]) for table, count in DONE_TABLES)


def file_state(job: JobDir, row: dict | None) -> str:
    """``done``, ``failed`` or ``pending`` (no row, or done with unreadable segments)."""
    if row is None or damaged_done(job, row):
        return "pending"
    return "done" if row["status"] == "done" else "failed"


def needs_labels(row: dict, labels: str | None) -> bool:
    """A done file whose labels are missing or were made with other options (``labels``: the hash of this run's
    diarization options; None: no --diarize)."""
    return labels is not None and bool(row["n_segments"]) and row.get("speaker_config") != labels


@dataclass
class InputState:
    """One input path as read now: the content it holds (or why it cannot be read), None where it was not read
    (``status`` while a worker hashes it: not read a second time)."""

    ref: InputRef
    ident: Identity | None
    stat_key: tuple | None = None  # size, mtime, inode, device it had when found to hold ident.file_id

    @property
    def path(self) -> str:
        return str(self.ref.path)


@dataclass
class JobState:
    """A job dir and inputs as they are: read, never written (``read_state``)."""

    rows: dict[str, dict]  # the readable files rows, by content id
    states: dict[str, str]  # content id -> done / failed / pending, for every row (``file_state``)
    inputs: list[InputState]
    damaged: list[tuple[Path, str]] = field(default_factory=list)  # tables that could not be read

    def state(self, file_id: str) -> str:
        return self.states.get(file_id, "pending")


def read_state(
    job: JobDir,
    refs: list[InputRef],
    fps: Fingerprints,
    hash_new: bool = True,
    planning=None,
    rows: list[dict] | None = None,
) -> JobState:
    """The job's rows and their states, and what each of ``refs`` holds now (``hash_new`` False: a path the
    fingerprints record does not know is left unread); ``planning`` (workers.Planning) told as inputs are read;
    ``rows``: the files rows, where the caller read them already (a run checks its configuration against them
    before it hashes an archive). Nothing is written: damaged tables are listed in the value, for the caller to
    move aside."""
    rows = {r["file_id"]: r for r in (job.file_rows() if rows is None else rows)}
    states = {fid: file_state(job, row) for fid, row in rows.items()}
    inputs = identify(refs, list(rows.values()), fps, hash_new, planning)
    return JobState(rows, states, inputs, job.take_damage())


def identify(
    refs: list[InputRef], rows: list[dict], fps: Fingerprints, hash_new: bool = True, planning=None
) -> list[InputState]:
    """Each input's content id (or why it cannot be read now)."""
    legacy = {p: r["file_id"] for r in rows if len(r["file_id"]) == 16 for p in row_paths(r)}
    known = {r["file_id"] for r in rows}
    out = []
    for done, ref in enumerate(refs):
        if planning is not None:
            planning.step("content ids", done, len(refs))
        if ref.error:
            out.append(InputState(ref, Identity(path_id(ref.path), ref.error)))
            continue
        ident = fps.identify(ref.path) if hash_new else fps.known(ref.path)
        if ident is None:
            out.append(InputState(ref, None))
            continue
        old = legacy.get(str(ref.path))
        if ident.readable and ident.file_id not in known and old and legacy_fingerprint(ref.path) == old:
            fps.adopt(ref.path, old)  # a job dir from before whole-file ids: keep its results
            ident = Identity(old)
        out.append(InputState(ref, ident, fps.stat_key(ref.path, ident.file_id) if ident.readable else None))
    if planning is not None:
        planning.step("content ids", len(refs), len(refs))
    return out
