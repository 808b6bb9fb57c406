"""What a worker does with a file it holds, and what it writes when a file or the job is finished: the file
decoded (``onefile``) or, if it is done, only relabelled; its outputs (txt, srt, ...) as soon as its row is done,
so a job stopped at 6 a.m. has every finished episode's files; a failed row for a file that kept killing the
process decoding it alone; the job's outputs once no worker is left at work.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from ..audio import media
from ..audio.media import AudioError
from ..facts.errors import DamagedState
from ..facts.rows import SegmentRow
from ..outputs import agreed
from ..outputs.cues import CueRules
from ..outputs.export import export_recorded, write_outputs
from ..storage import tables, workers
from ..storage.manifest import JobDir
from . import isolate, progress
from .config import JobOptions
from .onefile import FileContext, Predecoded, base_row, now, run_one, with_labels
from .plan import ContentChanged, Task, check_unchanged, quarantine
from .state import needs_labels
from .stream import Stream
from .summary import JobSummary

if TYPE_CHECKING:
    from ..decode import Transcriber
    from ..diarize.diarizer import Diarizer

log = logging.getLogger("podscribe")


@dataclass
class FileWork:
    """What a worker needs to decode, label and write out the files it holds, planned once."""

    job: JobDir
    transcriber: Transcriber
    options: JobOptions
    config_hash: str
    stop: threading.Event
    summary: JobSummary
    seen: dict[str, str | None]  # per file, the finished_at of its row as planned
    diarizer: Diarizer | None = None
    names: dict[str, str] = field(default_factory=dict)  # input path -> output file name (outputs/names.output_names)
    only: set[str] | None = None  # the input paths whose outputs this run writes (None: every one)
    outputs: dict | None = None  # the outputs each finished file gets, as job.json records them (outputs/agreed.py)
    last_batch: Callable[[], None] | None = None  # told as a file's last batch starts (schedule.py reads the next)

    def write_outputs(self, row: dict, segments: list[SegmentRow]) -> None:
        """A file's outputs (txt, srt, ...) as soon as its row is done or relabelled: a job stopped at 6 a.m.
        has every finished episode's files (and its site, the episode's page)."""
        self.write_subtitles(row, segments)
        update_site(self.job, self.options, self.summary)

    def write_subtitles(self, row: dict, segments: list[SegmentRow]) -> None:
        """The outputs the job records (``outputs``), under every engine: the same for each worker of the job."""
        if not self.outputs:
            return
        out_dir = agreed.folder(self.job.root, self.outputs)
        problems: list[str] = []
        # As the tables give them back (float32 word probabilities): the job's end and `export` write from the
        # tables, and the same bytes leave these files as they are (from memory, every JSON was written twice).
        segments = pa.Table.from_pylist(segments, schema=tables.SEGMENTS_SCHEMA).to_pylist()
        rules = CueRules(**self.outputs["cue_rules"])
        written = write_outputs(
            row, segments, self.outputs["subtitles"], out_dir, rules, self.names, self.only, problems
        )
        self.summary.wrote(written)
        self.summary.warnings += [(str(out_dir), problem) for problem in problems]
        self.options.events.happened("written", row["file_id"], len(written.paths))

    def context(self, task: Task, probed, bar=None, ready=None, stream=None) -> FileContext:
        return FileContext(
            task=task,
            transcriber=self.transcriber,
            cut=self.options.cut,
            job=self.job,
            stop=self.stop,
            probed=probed,
            bar=bar,
            checkpoint=self.options.checkpoint_pieces,
            config_hash=self.config_hash,
            diarizer=self.diarizer,
            ready=ready,
            stream=stream,
            last_batch=self.last_batch,
            events=self.options.events,
        )

    def decode_file(
        self,
        task: Task,
        row: dict | None,
        probed: media.AudioInfo | AudioError | None,
        duration_s: float,
        ready: Predecoded | None = None,
        stream: Stream | None = None,
    ) -> None:
        with progress.file_bar(task.refs[0].path.name, duration_s, self.options.progress) as file_bar:
            ctx = self.context(task, probed, file_bar, ready, stream)
            if task.relabel and row is not None and not needs_labels(row, self.diarizer.config):
                self.summary.by_others += 1  # another worker labelled it in the meantime
                finished = None
            elif task.relabel and row is not None:
                check_unchanged(task)  # labels from other audio than the transcript's
                finished = relabel_one(ctx, row, self.summary)
            else:
                finished = run_one(ctx, self.summary)
            if finished is not None and finished[0]["status"] == "done":
                self.write_outputs(*finished)

    def decode_unclaimed(self, task: Task, probed, duration_s: float) -> None:
        """In the child that decodes a suspect file alone: its worker holds the claim. A file whose content changed
        is left to the next run (its new content is another file, with a claim of its own)."""
        try:
            self.decode_file(task, self.job.file_row(task.file_id), probed, duration_s)
        except ContentChanged:
            self.job.drop_partial(task.file_id)
            warning = "its content changed while it was decoded: nothing kept; the next run decodes its new content"
            self.summary.warnings.append((str(task.refs[0].path), warning))
            log.warning("%s: %s", task.refs[0].path, warning)

    def content_changed(self, changed: ContentChanged) -> Task:
        """A file whose content changed under its claim: its checkpoints (maybe of the new audio) dropped, said;
        the task that decodes its new content."""
        self.job.drop_partial(changed.task.file_id)
        path = changed.task.refs[0].path
        self.summary.warnings.append((str(path), changed.warning))
        log.warning("%s: %s", path, changed.warning)
        self.options.events.happened("changed", changed.task.file_id, 0)
        return changed.new_task()

    def fail_poisoned(self, task: Task, probed, deaths: int, died: isolate.Died) -> None:
        ctx = self.context(task, probed)
        if task.relabel:  # labels are not worth a transcript
            warning = f"labelling its speakers alone killed the process {deaths} times ({died}): left unlabelled"
            self.summary.warnings.append((str(ctx.path), warning))
            self.summary.already_done += 1  # its transcript is
            log.warning("%s: %s", ctx.path, warning)
            return
        poisoned(ctx, deaths, died, self.summary)


def relabel_one(ctx: FileContext, row: dict, summary: JobSummary) -> tuple[dict, list[SegmentRow]] | None:
    """A finished file that needs speaker labels (``--diarize`` added or changed): its segments labelled, nothing
    decoded again. Segments first, the files row last, each written atomically."""
    segments = ctx.job.read("segments", {ctx.file_id}).to_pylist()
    damage = ctx.job.take_damage()
    if damage or not segments:  # damaged or gone since planning: the next run decodes the file again
        quarantine(ctx.job, damage)
        summary.warnings.append((str(ctx.path), "its segments table could not be read: not labelled"))
        summary.already_done += 1
        return
    # (A count that differs from the row's n_segments is a labelling cut short between its two writes: the
    # segments were already split, and labelling them again is the way on.)
    new_row, labelled = with_labels(ctx, row, segments)
    if new_row.get("speaker_config") != ctx.diarizer.config:
        summary.warnings.append((str(ctx.path), new_row["warnings"]))
        summary.already_done += 1  # its transcript is done; the next run with --diarize tries the labels again
        return
    ctx.job.write_labels(new_row, labelled)
    summary.relabelled += 1
    log.info("labelled %s: %d speakers", ctx.path, new_row["n_speakers"])
    return new_row, labelled


def poisoned(ctx: FileContext, deaths: int, died: isolate.Died, summary: JobSummary) -> None:
    """A file that killed the process decoding it alone ``deaths`` times in a row while its worker lived: a
    failed row (its checkpoints are kept, so --retry-failed resumes from them) instead of one more death."""
    row = {
        **base_row(ctx),
        **tables.file_failed(
            f"decoding this file alone killed the process {deaths} times in a row at the same place ({died}; out "
            "of memory, a crash in a native library?) while the job went on; rerun with --retry-failed to try again"
        ),
        "finished_at": now(),
        "decode_mode": ctx.transcriber.mode,
    }
    ctx.job.write_file(row, [], [], keep_partial=True)
    summary.failed += 1
    summary.failures.append((str(ctx.path), row["error"]))
    log.warning("%s: %s", ctx.path, row["error"])


def export_at_end(job: JobDir, options: JobOptions, named: list[str], only: set[str] | None, summary: JobSummary):
    """Every output the job's workers agreed on (outputs/agreed.py), once no worker is left at work: files done in earlier
    runs and by other workers too; what is already written stays as it is."""
    recorded = None  # a joiner may have added to it
    with contextlib.suppress(DamagedState):
        recorded = (job.read_job() or {}).get("outputs") if options.writes_outputs else None
    if not (recorded and options.export_at_end):
        return
    if workers.live_workers(job.root):
        summary.subtitles_left = True
        return
    problems: list[str] = []
    summary.wrote(export_recorded(job.root, recorded, problems, only=only, named=named))
    summary.warnings += [(str(agreed.folder(job.root, recorded)), problem) for problem in problems]


def update_site(job: JobDir, options: JobOptions, summary: JobSummary) -> None:
    """The job's site (``site`` in a job file, ``--site``) brought up to date: built as files finish and once at
    the end, each build changing only what changed (pipeline/browse/site). A site that cannot be built is a
    warning: the transcripts are what the job is for."""
    if not options.site:
        return
    from ..browse.site import SiteOptions, build_site
    from ..facts.errors import PodscribeError

    try:
        result = build_site([job.root], SiteOptions(Path(options.site), add_jobs=True))
    except Exception as exc:  # noqa: BLE001  (whatever stops a site, the job goes on: its transcripts are written)
        said = str(exc) if isinstance(exc, PodscribeError) else f"{type(exc).__name__}: {exc}"
        summary.warnings.append((str(options.site), f"the site was not updated: {said}"))
        log.warning("the site %s was not updated: %s", options.site, said, exc_info=log.isEnabledFor(logging.DEBUG))
        return
    summary.kept += [k for k in result.kept if k not in summary.kept]
    summary.site = result.out
