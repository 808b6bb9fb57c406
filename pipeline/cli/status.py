"""`podscribe status`: what a job dir has done, what is left and how long it will take.

Read-only and never a traceback: a damaged table or job.json is reported with what
to do about it, and the rest of the job is still counted.

With several workers the wall clock is not the sum of the files' decode times: the job's rate is the
audio done over the time in which at least one file was being decoded (the union of the files' decode
intervals), each worker's rate is its audio over its own decode time, and the ETA divides what is left
by the per-worker rate times the workers alive now.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ..facts.errors import DamagedState
from ..job.config import LABELS
from ..job.inputs import InputRef
from ..job.plan import plan
from ..job.progress import clock
from ..job.state import DONE_TABLES, needs_labels, read_state
from ..storage import workers
from ..storage.manifest import JobDir, damage_hint
from ..storage.probes import ProbeCache
from .job_report import partial_rate


@dataclass
class JobStatus:
    root: Path
    done: int = 0
    failed: int = 0
    pending: int = 0
    in_progress: int = 0  # pending files with persisted pieces
    with_warnings: int = 0
    flagged: dict[str, int] = field(default_factory=dict)  # segments to check, by flag
    redecodes: int = 0  # second chances tried (pieces.redecodes) in the files done
    recovered_tokens: int = 0  # text tokens they brought
    audio_done_s: float = 0.0
    audio_left_s: float = 0.0
    wall_s: float = 0.0  # sum of the done files' decode times
    busy_s: float = 0.0  # wall time in which at least one of them was being decoded
    per_worker: dict[str, list[float]] = field(default_factory=dict)  # worker -> [audio s, decode s]
    workers_active: int = 0  # workers alive on the job now
    files_active: int = 0  # files being decoded now (claims held)
    failures: list[tuple[str, str]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # inputs that cannot be read now
    unlabelled: list[tuple[str, bool]] = field(default_factory=list)  # done, no labels of the job's --diarize
    problems: list[str] = field(default_factory=list)  # damaged state, with what to do
    partial_rate: float = 0.0  # audio s per wall s of the files being decoded, from their checkpoints
    planning: list[dict] = field(default_factory=list)  # workers planning the job now (workers.Planning)
    unread: int = 0  # inputs of the job no run has read yet (pending, their length unknown)

    @property
    def throughput(self) -> float:
        """Audio seconds per wall second of one worker (over the files done)."""
        return self.audio_done_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def job_throughput(self) -> float:
        """Audio seconds per wall second of the whole job, all workers together."""
        return self.audio_done_s / self.busy_s if self.busy_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """Audio left over the rate of the files done, or, before any is done, of the batches saved so far."""
        rate = (self.throughput or self.partial_rate) * max(1, self.workers_active)
        return self.audio_left_s / rate if rate > 0 else None

    def render(self) -> str:
        workers_now = max(1, self.workers_active)
        eta = (
            f"{clock(self.eta_s)} with {workers_now} worker{'s' * (workers_now > 1)}"
            if self.eta_s is not None
            else "unknown (nothing done yet)"
        )
        rates = ", ".join(
            f"{name} {audio_s / wall_s:.1f}"
            for name, (audio_s, wall_s) in sorted(self.per_worker.items())
            if wall_s > 0
        )
        lines = [
            f"job: {self.root}",
            f"files: {self.done} done, {self.failed} failed, {self.pending} pending"
            + (f" ({self.in_progress} half done)" if self.in_progress else "")
            + (f"; {self.with_warnings} done with warnings" if self.with_warnings else ""),
            *(
                [
                    f"to check: {', '.join(f'{n} segments {flag}' for flag, n in sorted(self.flagged.items()))} "
                    "(segments.flags)"
                ]
                if self.flagged
                else []
            ),
            *(
                [
                    f"second chances: {self.redecodes} re-decodes brought {self.recovered_tokens} tokens "
                    "(pieces.redecodes)"
                ]
                if self.redecodes
                else []
            ),
            f"workers: {self.workers_active} at work, decoding {self.files_active} files",
        ]
        if self.planning:  # hours left and an ETA are not known until the inputs are read
            lines += [
                "planning: " + "; ".join(_planning(p) for p in self.planning),
                f"audio: {self.audio_done_s / 3600:.2f} h done; what is left, its hours and the ETA once the job is "
                f"planned{f' ({self.unread:,} inputs not read yet)' if self.unread else ''} (run status again)",
            ]
        else:
            lines += [
                f"audio: {self.audio_done_s / 3600:.2f} h done, {self.audio_left_s / 3600:.2f} h left",
                f"throughput: {self.job_throughput:.1f} audio h per wall h for the job ({self.throughput:.1f}x real "
                f"time per worker{': ' + rates if len(self.per_worker) > 1 else ''}); ETA {eta}",
            ]
        if self.failures:
            lines.append("failed:")
            lines += [f"  {_shown(path)}: {error}" for path, error in self.failures]
        if self.missing:
            lines.append("missing (cannot be read now; results from earlier runs are kept):")
            lines += [f"  {_shown(path)}" for path in self.missing]
        if self.unlabelled:
            lines.append("without the job's speaker labels (the next run with --diarize labels them):")
            lines += [
                f"  {_shown(path)}" + ("" if audio else " (its audio cannot be read now)")
                for path, audio in self.unlabelled
            ]
        if self.problems:
            lines.append("problems:")
            lines += [f"  {p}" for p in self.problems]
        return "\n".join(lines)


def _planning(record: dict) -> str:
    """One planning worker as status says it: who, and how far through reading the inputs."""
    worker, phase = record.get("worker") or "a worker", record.get("phase")
    done, total = record.get("done"), record.get("total")
    if not phase or not isinstance(done, int) or not isinstance(total, int):
        return f"{worker} is planning the job"
    return f"{worker} is reading the inputs ({phase}): {done:,} of {total:,}"


def busy_seconds(rows: list[dict]) -> float:
    """The length of the union of the rows' decode intervals [finished_at - wall_s, finished_at]."""
    spans = []
    for r in rows:
        try:
            end = datetime.fromisoformat(r["finished_at"]).timestamp()
        except (TypeError, ValueError):
            continue
        spans.append((end - (r["wall_s"] or 0.0), end))
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def _shown(path: str) -> str:
    """A path relative to the current folder where it lies below it (shorter to read), else as stored."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


def job_status(root: Path, verify: bool = False) -> JobStatus:
    """The job as its next run would plan it (``verify``: every done table's pages read again): the counts are
    the plan's (``job/plan.py``), rendered; nothing is written into the job dir."""
    job = JobDir(root, verify_all=verify)
    st = JobStatus(Path(root))
    try:
        record = job.read_job() or {}
    except DamagedState as exc:
        record = {}
        st.problems.append(
            f"{exc}: pending inputs cannot be listed; the next run rebuilds it from the results, or use --restart"
        )
    diarize = record.get("config", {}).get(LABELS)
    labels = JobDir.config_hash(diarize) if isinstance(diarize, dict) else None  # as a labelled row keeps it
    inputs = record.get("inputs", [])
    refs = [InputRef(Path(p)) for p in (inputs if isinstance(inputs, list) else []) if isinstance(p, str)]
    st.planning = workers.planning(root)
    # read-only here (status never writes into the job dir); while a worker hashes the inputs, what it has not
    # hashed yet is not read a second time
    state = read_state(job, refs, job.fingerprints(), hash_new=not st.planning)
    planned = plan(state, labels)
    known = ProbeCache(root)  # durations as the runs probed them: status never runs ffprobe
    rows = planned.rows
    pending: set[str] = set()
    for file_id, now in planned.states.items():
        r = rows.get(file_id)
        if now == "pending" and r is None:  # an input no run has finished
            pending.add(file_id)
            continue
        if now == "pending":  # done, but its segments or pieces cannot be read: decoded again by the next run
            for table, count in DONE_TABLES:
                if r[count] and not job.table_path(table, file_id).exists():
                    st.problems.append(f"the {table} table of {r['path']} is missing: rerun the job to decode it again")
            st.pending += 1
            st.audio_left_s += r["duration_s"] or 0.0
            continue
        if now in ("done", "relabel"):
            st.done += 1
            if now == "relabel" or (file_id not in planned.listed and needs_labels(r, labels)):  # as the run says
                st.unlabelled.append((r["path"], file_id in planned.listed))
            st.audio_done_s += r["duration_s"] or 0.0
            st.wall_s += r["wall_s"] or 0.0
            mine = st.per_worker.setdefault(r.get("worker") or "?", [0.0, 0.0])
            mine[0] += r["duration_s"] or 0.0
            mine[1] += r["wall_s"] or 0.0
            st.with_warnings += bool(r["warnings"])
            st.redecodes += r.get("n_redecodes") or 0
            st.recovered_tokens += r.get("recovered_tokens") or 0
        else:
            st.failed += 1
            st.failures.append((r["path"], r["error"]))
    st.missing = [path for path, _ in planned.missing]
    st.unread = planned.unread
    partial = job.root / "partial"
    half_done = {p.name for p in partial.iterdir() if p.is_dir()} if partial.is_dir() else set()
    pending |= {fid for fid in half_done if fid not in rows}  # still pending after a run with other inputs
    for file_id in pending:
        st.in_progress += file_id in half_done and job.has_partial(file_id)
        info = known.get(file_id)
        st.audio_left_s += (info.duration_s or 0.0) if info else 0.0
    st.pending += len(pending) + st.unread
    st.busy_s = busy_seconds([r for r in rows.values() if r["status"] == "done"])
    st.partial_rate = partial_rate(Path(root)) if not st.done else 0.0
    st.workers_active = len(workers.live_workers(root))
    st.files_active = len(workers.held_claims(root))
    done_ids = {fid for fid, r in rows.items() if planned.states[fid] in ("done", "relabel") and r.get("n_flagged")}
    if done_ids:
        for flags in job.read("segments", done_ids, columns=["flags"]).column("flags").to_pylist():  # that column only
            for flag in flags or []:
                st.flagged[flag] = st.flagged.get(flag, 0) + 1
    st.problems += [damage_hint(path, error) for path, error in state.damaged + job.take_damage()]
    return st
