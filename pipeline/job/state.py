"""A job's state: what each input is (its content), and the one rule for what is done, failed, pending or to be
relabelled — the worker plans by it and ``podscribe status`` counts by it.

A done row whose segments or pieces table is missing or cannot be read whole (a truncated write, bytes damaged in
the middle of it: a page that fails to decode or its CRC) is pending again: the worker moves the table to
``damaged/`` and decodes the input again; status counts it pending. A path whose content
changed no longer belongs to its old row; a path that cannot be read now keeps the results it had (reported
missing); copies of one content decode once and keep every path (decision 0001).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import workers
from ..identity import Fingerprints, Identity, legacy_fingerprint, path_id
from ..manifest import JobDir, row_paths
from .config import speaker_config
from .inputs import InputRef

if TYPE_CHECKING:
    from .config import JobOptions
    from .summary import JobSummary

log = logging.getLogger("podscribe")


@dataclass
class Task:
    """One content to decode and every input path that holds it (copies decode once)."""

    file_id: str
    refs: list[InputRef]
    problem: str | None = None  # why it cannot be read (its failed row says so)
    relabel: bool = False  # done, but its speaker labels are missing or were made with other --diarize options

    @property
    def paths(self) -> list[str]:
        return [str(r.path) for r in self.refs]


def damaged_done(job: JobDir, row: dict) -> bool:
    """A done file whose segments or pieces table is missing or cannot be read whole: done no more (an unreadable
    table lands in ``job.damaged``)."""
    if row["status"] != "done":
        return False
    return any(row[count] and not job.readable(table, row["file_id"]) for table, count in DONE_TABLES)


# The tables a done row has, each with the row's count of its rows (a file without speech has no segments table).
DONE_TABLES = (("segments", "n_segments"), ("pieces", "n_pieces"))


def file_state(job: JobDir, row: dict | None) -> str:
    """``done``, ``failed`` or ``pending`` (no row, or done with unreadable segments)."""
    if row is None or damaged_done(job, row):
        return "pending"
    return "done" if row["status"] == "done" else "failed"


def needs_labels(row: dict, labels: str | None) -> bool:
    """A done file whose labels are missing or were made with other options (``labels``: the hash of this run's
    diarization options; None: no --diarize)."""
    return labels is not None and bool(row["n_segments"]) and row.get("speaker_config") != labels


def readable_rows(job: JobDir) -> list[dict]:
    """The files rows; a damaged files table is moved aside (its input is decoded again)."""
    rows = job.file_rows()
    quarantine_damaged(job)
    return rows


def quarantine_damaged(job: JobDir) -> None:
    for path, error in job.damaged:
        log.warning(
            "damaged table %s (%s): moved to %s; its input is decoded again",
            path,
            error.splitlines()[0] if error else "unreadable",
            job.quarantine(path).parent,
        )
    job.damaged.clear()


def identify(refs: list[InputRef], rows: list[dict], fps: Fingerprints) -> list[Identity]:
    legacy = {p: r["file_id"] for r in rows if len(r["file_id"]) == 16 for p in row_paths(r)}
    known = {r["file_id"] for r in rows}
    out = []
    for ref in refs:
        ident = Identity(path_id(ref.path), ref.error) if ref.error else fps.identify(ref.path)
        old = legacy.get(str(ref.path))
        if ident.readable and ident.file_id not in known and old and legacy_fingerprint(ref.path) == old:
            ident = Identity(old)  # a job dir from before whole-file ids: keep its results
            fps.adopt(ref.path, old)
        out.append(ident)
    return out


def plan(refs: list[InputRef], job: JobDir, rows: list[dict], options: JobOptions, summary: JobSummary) -> list[Task]:
    """The files left to decode or relabel; the rest counted in ``summary`` (done, by others, failed, missing)."""
    fps = job.fingerprints()
    labels = speaker_config(options)
    idents = identify(refs, rows, fps)
    content_of = {str(ref.path): ident.file_id for ref, ident in zip(refs, idents) if ident.readable}
    by_id = {r["file_id"]: r for r in rows}
    for r in rows:  # a path whose content changed no longer belongs to its old row
        listed = row_paths(r)
        kept = [p for p in listed if content_of.get(p, r["file_id"]) == r["file_id"]]
        if kept == listed:
            continue
        if kept:
            by_id[r["file_id"]] = {**r, "path": kept[0], "paths": kept}
            job.update_file_row(by_id[r["file_id"]])
        else:
            job.forget(r["file_id"])
            del by_id[r["file_id"]]
    known_paths = {p: r["file_id"] for r in by_id.values() for p in row_paths(r)}
    tasks: dict[str, Task] = {}
    gone: dict[str, str] = {}  # input path that cannot be read now -> the content it had
    for ref, ident in zip(refs, idents):
        if not ident.readable and known_paths.get(str(ref.path), ident.file_id) != ident.file_id:
            summary.missing.append((str(ref.path), ident.problem))  # results from an earlier run stay
            gone[str(ref.path)] = known_paths[str(ref.path)]
            continue
        if ident.file_id in tasks:
            tasks[ident.file_id].refs.append(ref)
            summary.copies += 1
        else:
            tasks[ident.file_id] = Task(ident.file_id, [ref], ident.problem)
    todo = []
    for task in tasks.values():
        row = by_id.get(task.file_id)
        state = file_state(job, row)
        if row is not None and state == "pending":  # done, but its segments are unreadable: decoded again
            quarantine_damaged(job)
        if state == "done":
            listed = row_paths(row)
            added = [p for p in task.paths if p not in listed]
            if added or listed != row["paths"]:  # a new copy of finished content: its subtitles are written too
                row = {**row, "path": listed[0], "paths": listed + added}
                job.update_file_row(row)
            if needs_labels(row, labels):
                todo.append(Task(task.file_id, task.refs, task.problem, relabel=True))
            elif options.launched_at and (row.get("finished_at") or "") >= options.launched_at:
                summary.by_others += 1  # done by another worker of this launch, not before it
            else:
                summary.already_done += 1
        elif state == "failed" and not options.retry_failed:
            summary.skipped_failed += 1
        else:
            todo.append(task)
    unlabelled(job, gone, tasks, by_id, labels, summary)
    fps.save()
    return todo


def unlabelled(
    job: JobDir, gone: dict[str, str], tasks: dict, by_id: dict[str, dict], labels: str | None, summary: JobSummary
) -> None:
    """Done files that need speaker labels but whose audio cannot be read at any path this run was given: their
    transcripts stay, unlabelled, and the run says so (labelling needs the audio)."""
    for path, file_id in gone.items():
        row = by_id.get(file_id)
        if file_id in tasks or row is None or file_state(job, row) != "done" or not needs_labels(row, labels):
            continue
        warning = "its audio cannot be read now: its transcript (kept) has no speaker labels; rerun when it is back"
        summary.warnings.append((path, warning))


def restart(job: JobDir, others: list[str]) -> None:
    """--restart: the job dir cleared, unless other workers are at work on it (then this one joins them)."""
    if others:
        log.warning(
            "--restart: %d other worker(s) are at work on %s; joining them instead of starting over",
            len(others),
            job.root,
        )
        return
    job.clear()
    workers.forget_counts(job.root)
