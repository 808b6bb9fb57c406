"""What a run of a job does next, decided from its state (``state.read_state``): the files to decode or label
(tasks), and the repairs the job dir needs first, which the caller applies under the job's preparation lock.
Planning itself writes nothing: ``podscribe status`` and ``--dry-run`` render the same plan a run would make,
so what they count is what a run does (``tests/test_plan_agreement.py``).

Repairs: a damaged table is moved to ``damaged/`` (its input is decoded again); a row whose path now holds
other content loses that path (a row left with no path is forgotten: its content is no input of the job any
more); a done row gains the paths of new copies of its content (their subtitles are written too).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..outputs.ownership import OutputDir
from ..storage import workers
from ..storage.identity import Fingerprints, content_since
from ..storage.manifest import JobDir, row_paths
from .inputs import InputRef
from .state import JobState, needs_labels

if TYPE_CHECKING:
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


@dataclass
class Repairs:
    """What the job dir needs before a run decodes: applied by the caller, under the preparation lock."""

    quarantine: list[tuple[Path, str]] = field(default_factory=list)  # damaged tables: moved to damaged/
    rows: list[dict] = field(default_factory=list)  # files rows whose paths changed (bookkeeping only)
    forget: list[str] = field(default_factory=list)  # rows no input path holds any more

    def __bool__(self) -> bool:
        return bool(self.quarantine or self.rows or self.forget)


@dataclass
class Plan:
    """A run's plan: every content's outcome, the tasks, the repairs. ``states`` covers every row left after the
    repairs and every content an input holds: done, failed, pending (decoded by this run: a task) or relabel."""

    tasks: list[Task]
    repairs: Repairs
    states: dict[str, str]  # content id -> done / failed / pending / relabel
    rows: dict[str, dict]  # the files rows as they are once the repairs are made
    listed: set[str] = field(default_factory=set)  # the contents an input of this run holds
    missing: list[tuple[str, str]] = field(default_factory=list)  # (path, problem): unreadable, results kept
    unlabelled: list[str] = field(default_factory=list)  # missing paths whose done content lacks the job's labels
    unread: int = 0  # inputs not read (``status`` while a worker hashes them)
    copies: int = 0
    by_others: int = 0  # done by another worker of this launch, not before it

    def count(self, state: str, listed_only: bool = True) -> int:
        return sum(s == state and (not listed_only or fid in self.listed) for fid, s in self.states.items())

    def into(self, summary: JobSummary) -> None:
        """The plan's counts, as a run reports them."""
        summary.already_done += self.count("done") - self.by_others
        summary.by_others += self.by_others
        summary.skipped_failed += self.count("failed")
        summary.copies += self.copies
        summary.missing += self.missing
        warning = "its audio cannot be read now: its transcript (kept) has no speaker labels; rerun when it is back"
        summary.warnings += [(path, warning) for path in self.unlabelled]


def plan(state: JobState, labels: str | None, retry_failed: bool = False, launched_at: str | None = None) -> Plan:
    """The plan for a run of the state's inputs: ``labels`` (the hash of the run's --diarize options, None: no
    labels), ``retry_failed``, ``launched_at`` (a launch of several workers: done since then is by the others)."""
    repairs = Repairs(quarantine=list(state.damaged))
    content_of = {i.path: i.ident.file_id for i in state.inputs if i.ident is not None and i.ident.readable}
    rows = dict(state.rows)
    changed: dict[str, dict] = {}  # rows whose paths change, by content id (written once each)
    for r in state.rows.values():  # a path whose content changed no longer belongs to its old row
        listed = row_paths(r)
        kept = [p for p in listed if content_of.get(p, r["file_id"]) == r["file_id"]]
        if kept == listed:
            continue
        if kept:
            rows[r["file_id"]] = changed[r["file_id"]] = {**r, "path": kept[0], "paths": kept}
        else:
            repairs.forget.append(r["file_id"])
            del rows[r["file_id"]]
    states = {fid: state.state(fid) for fid in rows}
    known_paths = {p: r["file_id"] for r in rows.values() for p in row_paths(r)}
    out = Plan([], repairs, states, rows)
    tasks: dict[str, Task] = {}
    gone: dict[str, str] = {}  # input path that cannot be read now -> the content it had
    for i in state.inputs:
        if i.ident is None:
            out.unread += 1
            continue
        if not i.ident.readable and known_paths.get(i.path, i.ident.file_id) != i.ident.file_id:
            out.missing.append((i.path, i.ident.problem))  # results from an earlier run stay
            gone[i.path] = known_paths[i.path]
            continue
        if i.ident.file_id in tasks:
            tasks[i.ident.file_id].refs.append(i.ref)
            out.copies += 1
        else:
            tasks[i.ident.file_id] = Task(i.ident.file_id, [i.ref], i.ident.problem, stat_key=i.stat_key)
    out.listed = set(tasks)
    for task in tasks.values():
        row, now = rows.get(task.file_id), state.state(task.file_id)
        if now == "done":
            listed = row_paths(row)
            added = [p for p in task.paths if p not in listed]
            if added or listed != row["paths"]:  # a new copy of finished content: its subtitles are written too
                row = rows[task.file_id] = changed[task.file_id] = {**row, "path": listed[0], "paths": listed + added}
            if needs_labels(row, labels):
                states[task.file_id] = "relabel"
                out.tasks.append(Task(task.file_id, task.refs, task.problem, relabel=True, stat_key=task.stat_key))
            elif launched_at and (row.get("finished_at") or "") >= launched_at:
                out.by_others += 1
        elif now == "failed" and not retry_failed:
            states[task.file_id] = "failed"
        else:
            states[task.file_id] = "pending"
            out.tasks.append(task)
    repairs.rows = list(changed.values())
    for path, file_id in gone.items():  # done, to be labelled, but no path of this run can be read
        row = rows.get(file_id)
        if file_id not in tasks and row is not None and states.get(file_id) == "done" and needs_labels(row, labels):
            out.unlabelled.append(path)
    return out


def apply(job: JobDir, repairs: Repairs, fps: Fingerprints | None = None) -> None:
    """The plan's repairs made (under the preparation lock), and what reading learned saved: the fingerprints
    record, the tables read whole (``verified.py``)."""
    quarantine(job, repairs.quarantine)
    for row in repairs.rows:
        job.update_file_row(row)
    for file_id in repairs.forget:
        job.forget(file_id)
    if fps is not None:
        fps.save()
    job.verified.save()


def quarantine(job: JobDir, damaged: list[tuple[Path, str]]) -> None:
    """Damaged tables moved to ``damaged/`` (kept, never deleted): their inputs are decoded again."""
    for path, error in damaged:
        if not path.exists():
            continue
        log.warning(
            "damaged table %s (%s): moved to %s; its input is decoded again",
            path,
            error.splitlines()[0] if error else "unreadable",
            job.quarantine(path).parent,
        )


def work_left(refs: list[InputRef], job: JobDir, options) -> bool:
    """Whether a run of ``refs`` would decode or label anything, read without writing (``--workers N`` starts N
    workers, each loading its model, only when there is): by ``plan``'s rule, True wherever it is in doubt."""
    from .config import speaker_config
    from .state import file_state

    if options.restart or options.retry_failed:
        return True
    rows = job.file_rows()
    if job.take_damage():
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
        now = file_state(job, row)
        if now == "pending" or (now == "done" and needs_labels(row, labels)):
            return True
    return bool(job.take_damage())


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
