"""Which file a worker decodes next, and under what claim (workers.py): longest first, so one long episode does
not run alone at the end of the night; suspects (a process died on them) last, each decoded alone in a watched
child (isolate.py); files of one piece several to a batch (a piece's tokens do not depend on the rows beside it,
decision 0010); the next group's audio opened while this one decodes (``stream.Lookahead``). Files held by other
workers are tried again after a pass (their worker may have died), until a pass finds nothing to take.
"""

from __future__ import annotations

import logging
import os
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..audio import media
from ..audio.media import AudioError
from ..storage import probes, workers
from . import Interrupted, isolate, progress
from .finish import FileWork
from .onefile import BatchPiece, LanguageLock, Predecoded, decode_batch
from .plan import ContentChanged, Task
from .stream import Lookahead, Stream, read

log = logging.getLogger("podscribe")


@dataclass
class Worker(FileWork):
    """One worker's loop over the job's files: what it claims, in which order, in which batches."""

    alone: bool = False  # a child process decoding suspect files alone for its worker (isolate.py)
    watched: isolate.Watched | None = None  # that child, seen from its worker
    alone_worker: Callable | None = None  # builds the worker inside that child (run.alone_worker)
    planning: workers.Planning | None = None  # planning said (run.py): ended once every file is probed
    changed: list[Task] = field(default_factory=list)  # files whose content changed: their new content, to decode

    def decode_all(self, todo: list[Task]) -> None:
        """Longest first, suspects last (a process died on them: isolate.py); each file only under its claim.
        Files held by other workers are tried again after a pass (their worker may have died), until a pass
        finds nothing to take."""
        job, summary = self.job, self.summary
        probed = probe_all(todo, job.root, self.planning)
        if self.planning is not None:
            self.planning.__exit__()
        durations = {
            k: info.duration_s or 0.0 if isinstance(info, media.AudioInfo) else 0.0 for k, info in probed.items()
        }
        suspects = {t.file_id for t in todo if workers.suspect(job.root, t.file_id)}
        pending = sorted(todo, key=lambda task: (task.file_id in suspects, -durations[task.file_id]))
        with progress.job_bar(sum(durations.values()), self.options.progress) as job_bar:
            looked_again = False
            lookahead = Lookahead(self.job, self.transcriber, self.options.cut, probed, self.options.events)
            ahead: dict[str, int | None] = {}  # the next group, held (claims/*.lock, not counted) before it is read
            try:
                while pending:
                    busy = []
                    at = 0
                    while at < len(pending):
                        if self.stop.is_set():  # a stop between files (short files end inside one batch)
                            raise Interrupted()
                        group = self._group(pending, at, probed)
                        at += len(group)
                        holds = {task.file_id: ahead.pop(task.file_id, None) for task in group}
                        self._let_go(ahead)  # held ahead but not in this group after all (a content changed)
                        claims = []
                        for task in group:
                            fd = holds[task.file_id]
                            held = workers.claim(job.root, task.file_id, job.persisted_batches(task.file_id), fd)
                            if held is None:
                                busy.append(task)
                                continue
                            if self._finished_by_others(task, held) or self._changed_since_planned(task, held):
                                continue
                            self.options.events.happened("claimed", task.file_id, held.deaths)
                            claims.append((task, held))
                        streams = lookahead.take([task for task, _ in claims])

                        def read_next(at=at, pending=pending) -> None:
                            """The next group held (no other worker reads it) and its audio opened."""
                            nonlocal ahead
                            if at < len(pending) and not ahead:
                                following = self._group(pending, at, probed)
                                ahead = self._hold(following)
                                lookahead.open([task for task in following if ahead[task.file_id] is not None])

                        # The next group is read while this one decodes: after a batch of short files at once (they
                        # would wait on ffmpeg between batches); after a long file only when its last batch starts
                        # (its first batch would wait on ffmpeg and the VAD for batch-size pieces), not before:
                        # holding the next file for the minutes a long one decodes would keep it from a worker
                        # left idle at the job's tail.
                        short = all(self._one_piece(task, probed) for task in group)
                        if short:
                            read_next()
                        self.last_batch = None if short else read_next
                        try:
                            self._decode_claims(claims, probed, durations, job_bar, streams)
                        finally:
                            self.last_batch = None
                        pending += self._new_contents(probed, durations)
                    if len(busy) < len(pending):
                        looked_again = False
                    elif looked_again:  # held twice in a row: their workers are at them
                        summary.elsewhere = len(busy)
                        return
                    else:  # once more after a moment: `podscribe status` may have been testing a lock just then
                        looked_again = True
                        time.sleep(0.5)
                    pending = busy
            finally:
                lookahead.close()
                self._let_go(ahead)
                if self.watched is not None:
                    self.watched.close()

    def _hold(self, group: list[Task]) -> dict[str, int | None]:
        """Each file's claim lock taken (None where another worker holds it), for reading it ahead: no other
        worker reads it meanwhile. One finished by another worker since the plan is let go again (not read)."""
        holds = {}
        for task in group:
            fd = workers.hold(self.job.root, task.file_id)
            row = self.job.file_row(task.file_id) if fd is not None else None
            if row is not None and row.get("finished_at") != self.seen.get(task.file_id):
                os.close(fd)  # its claim finds it done, and counts it as done by others
                fd = None
            holds[task.file_id] = fd
        return holds

    @staticmethod
    def _let_go(holds: dict[str, int | None]) -> None:
        """Drop the locks of files held ahead and not claimed (another worker may take them now)."""
        for fd in holds.values():
            if fd is not None:
                os.close(fd)
        holds.clear()

    def _finished_by_others(self, task: Task, held: workers.Claim) -> bool:
        """Whether another worker wrote the file's row after this one planned (checked as soon as it is claimed:
        a file held by another worker when this one first passed is usually done when it passes again, and a
        batch across files must not decode it). (A row as planned is not a reason to skip: a done row whose
        segments table was damaged is planned to be redone.)"""
        row = self.job.file_row(task.file_id)
        if row is None or row.get("finished_at") == self.seen.get(task.file_id):
            return False
        self.summary.by_others += 1
        held.finish()
        held.release()
        return True

    def _changed_since_planned(self, task: Task, held: workers.Claim) -> bool:
        """Whether the file's content changed between planning and this claim (renamed over, rewritten): then its
        new content is decoded instead, under its own id and claim."""
        new_id = task.changed()
        if new_id is None:
            return False
        held.finish()
        held.release()
        self.changed.append(self.content_changed(ContentChanged(task, new_id)))
        return True

    def _new_contents(self, probed: dict, durations: dict) -> list[Task]:
        """The tasks of files whose content changed under this worker, probed: decoded in this pass."""
        found, self.changed = self.changed, []
        if found:
            probed.update(probe_all(found, self.job.root))
            for task in found:
                info = probed[task.file_id]
                durations[task.file_id] = info.duration_s or 0.0 if isinstance(info, media.AudioInfo) else 0.0
        return found

    def _group(self, pending: list[Task], at: int, probed: dict) -> list[Task]:
        """The task at ``at``; if it is a file of one piece, the one-piece files right after it too, up to the
        batch size (one batch for several files)."""
        group = [pending[at]]
        per_file_language = LanguageLock(self.transcriber, {}).active  # --language-mode file: detected per file
        if self._one_piece(pending[at], probed) and not per_file_language:
            for task in pending[at + 1 : at + self.transcriber.options.batch_size]:
                if not self._one_piece(task, probed):
                    break
                group.append(task)
        return group

    def _one_piece(self, task: Task, probed: dict) -> bool:
        info = probed[task.file_id]
        return (
            not task.relabel
            and isinstance(info, media.AudioInfo)
            and 0 < (info.duration_s or 0.0) <= self.options.cut.max_s
        )

    def _decode_claims(self, claims: list, probed: dict, durations: dict, job_bar, streams: dict) -> None:
        """Decode claimed files: several one-piece files in one batch first (``_decode_together``), then each
        file under its claim as ever. Claims not yet finished when something stops the loop are given back.
        ``streams``: the files' audio as it was opened ahead (``Lookahead``); each is closed once used."""
        pending, current = list(claims), None
        try:
            ready = self._decode_together(claims, probed, streams) if len(claims) > 1 else {}
            while pending:
                task, current = pending.pop(0)
                self.decode_claimed(
                    task,
                    current,
                    probed[task.file_id],
                    durations[task.file_id],
                    ready.get(task.file_id),
                    streams.get(task.file_id),
                )
                current.release()
                current = None
                job_bar.advance(durations[task.file_id])
        except BaseException:
            if current is not None:  # decode_claimed gave it back, or its death counts (as ever)
                current.release()
            for _, held in pending:  # not started: no death
                held.give_back()
                held.release()
            raise
        finally:
            for stream in streams.values():
                stream.items.close()

    def _decode_together(self, claims: list, probed: dict, streams: dict) -> dict[str, Predecoded]:
        """Cross-file batches: the one piece of each claimed file, decoded in one batch. A file a worker already
        died on is left to decode alone (a file that kills workers must not take others with it); a file that
        does not cut into exactly one piece, or cannot be read, is left to its own run, which records why."""
        start = time.monotonic()
        entries = []
        for task, held in claims:
            if held.deaths:
                continue
            # taken out of ``streams``: a file left to its own run (no batch formed, a failed batch) reads afresh
            stream = streams.pop(task.file_id, None) or read(
                task.file_id,
                task.refs[0].path,
                self.options.cut,
                probed[task.file_id].duration_s,
                self.transcriber,
                {},
                self.options.events,
            )
            try:
                cut = list(stream.items)
            except (AudioError, RuntimeError, ValueError, MemoryError):  # its own run records why
                continue
            finally:
                stream.items.close()
            if len(cut) == 1 and cut[0][1] is None:
                piece, _, heard = cut[0]
                entries.append((task.file_id, piece, stream.notes, heard))
        if len(entries) < 2:
            return {}
        paths = {task.file_id: task.refs[0].path for task, _ in claims}
        batch = [BatchPiece(file_id, paths[file_id], piece) for file_id, piece, _, _ in entries]
        try:
            results = decode_batch(self.transcriber, batch, None, [heard for *_, heard in entries], self.options.events)
        except (RuntimeError, ValueError, MemoryError):  # each file then decodes alone, and fails alone
            log.warning("a batch across files failed; decoding them one by one:\n%s", traceback.format_exc())
            return {}
        share = (time.monotonic() - start) / len(entries)
        return {
            file_id: Predecoded([(piece, result)], notes, share)
            for (file_id, piece, notes, _), result in zip(entries, results)
        }

    def decode_claimed(
        self,
        task: Task,
        held: workers.Claim,
        probed: media.AudioInfo | AudioError | None,
        duration_s: float,
        ready: Predecoded | None = None,
        stream: Stream | None = None,
    ) -> None:
        # Another worker wrote its row after this one planned. (A row as planned is not a reason to skip: a
        # done row whose segments table was damaged is planned to be redone.)
        row = self.job.file_row(task.file_id)
        if row is not None and row.get("finished_at") != self.seen.get(task.file_id):
            self.summary.by_others += 1
            held.finish()
            return
        if held.deaths and not self.alone:  # a process died on it: decoded alone, watched (isolate.py)
            if stream is not None:
                stream.items.close()
            self._decode_watched(task, held, probed, duration_s)
            return
        try:
            self.decode_file(task, row, probed, duration_s, ready, stream)
        except ContentChanged as changed:
            held.finish()
            self.changed.append(self.content_changed(changed))
            return
        except BaseException:
            held.give_back()  # the worker lives: a clean stop or a full disk is no death
            raise
        held.finish()

    def _decode_watched(self, task: Task, held: workers.Claim, probed, duration_s: float) -> None:
        """A suspect file, decoded in the child that serves this worker until it is done, or until the child
        died ``max_attempts`` times in a row at the same place while this worker lived: then it fails."""
        if self.watched is None:
            self.watched = isolate.Watched(self.options, self.config_hash, self.stop, self.alone_worker)
        while True:
            try:
                outcome = self.watched.decode(task, probed, duration_s, self.seen.get(task.file_id))
            except BaseException:
                held.give_back()
                raise
            if not isinstance(outcome, isolate.Died):
                self.summary.merge(outcome, same_plan=False)
                held.finish()
                if outcome.done or outcome.relabelled:
                    self._write_finished(task)
                return
            witnessed = held.died_alone(self.job.persisted_batches(task.file_id))
            log.warning(
                "%s: the process decoding it alone died (%s), %d time(s) in a row at the same place",
                task.refs[0].path,
                outcome,
                witnessed,
            )
            if witnessed >= self.options.max_attempts:
                self.fail_poisoned(task, probed, witnessed, outcome)
                held.finish()
                return

    def _write_finished(self, task: Task) -> None:
        """The outputs of a file the child finished, written here under the job's output names (the child writes
        none): as soon as the file is done, as for every other file, not only when the job ends."""
        row = self.job.file_row(task.file_id)
        if self.outputs and row is not None and row["status"] == "done":
            self.write_outputs(row, self.job.read("segments", {task.file_id}).to_pylist())


def probe_all(
    tasks: list[Task], root: Path, planning: workers.Planning | None = None
) -> dict[str, media.AudioInfo | AudioError | None]:
    """Every file probed (None for one that only needs labels) before the first is decoded: files go longest
    first. A content probed before (by any run or worker of the job) is not probed again (probes.py). An
    ffprobe run is mostly process start-up, so a few run at once (measured: decision 0021). ``planning``
    is told as they come back."""
    cache = probes.ProbeCache(root)
    known = {task.file_id: cache.get(task.file_id) for task in tasks if not task.problem}
    left = [task for task in tasks if not task.relabel and known.get(task.file_id) is None]
    found = {}
    if planning is not None:
        planning.step("ffprobe", 0, len(left))
    with ThreadPoolExecutor(max_workers=4) as pool:
        for task, info in zip(left, pool.map(probe, left)):
            found[task.file_id] = info
            if planning is not None:
                planning.step("ffprobe", len(found), len(left))
    for file_id, info in found.items():
        if isinstance(info, media.AudioInfo):
            cache.put(file_id, info)
    cache.save()
    return {
        task.file_id: None if task.relabel else found.get(task.file_id) or known.get(task.file_id) for task in tasks
    }


def probe(task: Task) -> media.AudioInfo | AudioError:
    """Probed once per file: for the progress total, then for decoding (an error becomes its failed row)."""
    if task.problem:
        return AudioError(task.problem)
    try:
        return media.probe(task.refs[0].path)
    except AudioError as exc:
        return exc
