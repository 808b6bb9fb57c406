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
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..outputs.ownership import OutputDir
from ..storage import workers
from ..storage.identity import Fingerprints, Identity, content_since, legacy_fingerprint, path_id
from ..storage.manifest import JobDir, row_paths
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
    stat_key: tuple | None = None  # size, mtime, inode, device of refs[0] when it was found to hold file_id

    @property
    def paths(self) -> list[str]:
        return [str(r.path) for r in self.refs]

    def changed(self) -> str | None:
        """The id of what the path it decodes holds now, if that is no longer ``file_id`` (None: unchanged)."""
        now, key = content_since(self.refs[0].path, self.stat_key, self.file_id)
        if now is None:
            self.stat_key = key  # a touched file holding the same bytes: hashed once, not at every checkpoint
        return now


class ContentChanged(Exception):
    """The file a worker decodes no longer holds the content it claimed (renamed over, rewritten): what was read
    of it may be either content, so nothing of it is kept under the old id; its new content is decoded under its
    own."""

    def __init__(self, task: Task, new_id: str):
        super().__init__(f"{task.refs[0].path} changed while it was decoded")
        self.task, self.new_id = task, new_id

    @property
    def warning(self) -> str:
        return "its content changed after it was planned (renamed over, rewritten): decoded again as its new content"

    def new_task(self) -> Task:
        """The same paths, as their new content."""
        try:
            st = os.stat(self.task.refs[0].path)
            key = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)
        except OSError:
            key = None
        return Task(self.new_id, self.task.refs, stat_key=key)


def check_unchanged(task: Task) -> None:
    """ContentChanged if the file ``task`` decodes no longer holds its content."""
    new_id = task.changed()
    if new_id is not None:
        raise ContentChanged(task, new_id)


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


def identify(refs: list[InputRef], rows: list[dict], fps: Fingerprints, planning=None) -> list[Identity]:
    """Each input's content id (or why it cannot be read now); ``planning`` (workers.Planning) told as it goes."""
    legacy = {p: r["file_id"] for r in rows if len(r["file_id"]) == 16 for p in row_paths(r)}
    known = {r["file_id"] for r in rows}
    out = []
    for done, ref in enumerate(refs):
        if planning is not None:
            planning.step("content ids", done, len(refs))
        ident = Identity(path_id(ref.path), ref.error) if ref.error else fps.identify(ref.path)
        old = legacy.get(str(ref.path))
        if ident.readable and ident.file_id not in known and old and legacy_fingerprint(ref.path) == old:
            ident = Identity(old)  # a job dir from before whole-file ids: keep its results
            fps.adopt(ref.path, old)
        out.append(ident)
    if planning is not None:
        planning.step("content ids", len(refs), len(refs))
    return out


def plan(
    refs: list[InputRef], job: JobDir, rows: list[dict], options: JobOptions, summary: JobSummary, planning=None
) -> list[Task]:
    """The files left to decode or relabel; the rest counted in ``summary`` (done, by others, failed, missing)."""
    fps = job.fingerprints()
    labels = speaker_config(options)
    idents = identify(refs, rows, fps, planning)
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
            tasks[ident.file_id] = Task(
                ident.file_id, [ref], ident.problem, stat_key=fps.stat_key(ref.path, ident.file_id)
            )
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
                todo.append(Task(task.file_id, task.refs, task.problem, relabel=True, stat_key=task.stat_key))
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
    job.verified.save()
    return todo


def work_left(refs: list[InputRef], job: JobDir, options: JobOptions) -> bool:
    """Whether a run of ``refs`` would decode or label anything, read without writing (``--workers N`` starts N
    workers, each loading its model, only when there is): by ``plan``'s rule, True wherever it is in doubt."""
    if options.restart or options.retry_failed:
        return True
    rows = job.file_rows()
    if job.damaged:
        return True
    fps, labels = job.fingerprints(), speaker_config(options)
    by_id = {r["file_id"]: r for r in rows}
    for ref in refs:  # one at a time: the first new content answers (no archive hashed twice)
        if ref.error:
            continue
        ident = fps.identify(ref.path)
        if not ident.readable:
            continue  # a missing path keeps its results; an unreadable one with none gets a failed row: one worker
        row = by_id.get(ident.file_id)
        if file_state(job, row) == "pending" or (file_state(job, row) == "done" and needs_labels(row, labels)):
            return True
    return bool(job.damaged)


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


def restart(job: JobDir, others: list[str]) -> list[tuple[str, str]]:
    """--restart: the job dir cleared, unless other workers are at work on it (then this one joins them). Its
    subtitles go only where nobody changed them: an edited one stays, and the job's new version goes beside it.
    Returns a warning per file kept."""
    if others:
        log.warning(
            "--restart: %d other worker(s) are at work on %s; joining them instead of starting over",
            len(others),
            job.root,
        )
        return []
    job.clear()
    workers.forget_counts(job.root)
    kept = OutputDir(job.root / "subtitles").remove_own()
    warning = "changed since podscribe wrote it: --restart kept it (the job's new version goes beside it)"
    for path in kept:
        log.warning("%s: %s", path, warning)
    return [(str(path), warning) for path in kept]
