"""A worker's run, composed: plan under the job's preparation lock (one worker at a time), then decode every
file no other worker holds without any job-wide lock, then write the job's outputs if no other worker is still
at work. A second run of the same job with the same configuration joins as another worker, on this machine or
another one that sees the job dir; one with another configuration is refused, the difference named.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..facts.errors import DamagedState
from ..outputs import agreed
from ..outputs.export import check_writable
from ..outputs.names import output_names
from ..storage import workers
from ..storage.manifest import JobDir, import_pandas_beside, row_paths
from . import plan, progress
from .config import (
    JobOptions,
    check_config,
    job_config,
    job_models,
    load_diarizer,
    output_hash,
    set_threads,
    speaker_config,
)
from .finish import export_at_end, update_site
from .inputs import InputRef, expand_inputs
from .plan import Task
from .schedule import Worker
from .state import read_state
from .summary import JobSummary

if TYPE_CHECKING:
    from ..models.load import Models

log = logging.getLogger("podscribe")


def run(
    inputs: list[str], options: JobOptions, models: Models | None = None, stop: threading.Event | None = None
) -> JobSummary:
    """Run the job as one worker: plan (under the preparation lock), then decode every file no other
    worker holds, then write the subtitles if no other worker is still at work."""
    from ..decode import Transcriber  # torch and transformers: when a job starts

    start = time.monotonic()
    stop = stop or threading.Event()
    refs = expand_inputs(inputs)
    job = JobDir(options.out_dir)
    set_threads(options)
    summary = JobSummary(Path(options.out_dir))
    registration = workers.Registration(job.root)
    stopped_yet(stop)  # Ctrl-C while the command started: no model loaded, no job dir made
    if models is None:  # before the lock: the workers of a launch load their models at the same time
        models = job_models(options)
    import_pandas_beside()  # what the first row would wait for
    diarizer = load_diarizer(options)
    transcriber = Transcriber(models, options.decode)  # options the model refuses: before the job dir is made
    if options.subtitles and options.writes_outputs:  # a read-only -o found now, not after the night's decoding
        check_writable(Path(options.output_dir) if options.output_dir else job.root / "subtitles")
    stopped_yet(stop)  # during the load: the job dir is not made
    if options.site:  # a --site that is a file, or another folder, is said now
        from ..browse.site.build import check_out

        check_out(Path(options.site).absolute())
    # Until every file is probed: a first run over 2,000 new files reads them for minutes before decoding.
    planning = workers.Planning(
        job.root, say=functools.partial(progress.say, enabled=options.progress, file=sys.stderr)
    )
    try:
        with job.locked():
            planning.__enter__()
            try:
                config = job_config(options, models)
                todo, seen, names, outputs = prepare(refs, job, config, options, summary, registration, planning)
                registration.__enter__()  # registered before the lock is let go: a joining worker sees this one
            except BaseException:  # a job dir this run made and wrote nothing into is removed (JobDir.locked)
                planning.__exit__()
                with contextlib.suppress(OSError):
                    (job.root / "workers").rmdir()
                raise
        only = {str(ref.path) for ref in refs} if options.outputs_named_only else None
        try:
            transcriber.stop = stop
            transcriber.notify = functools.partial(second_chance, shown=options.progress)
            worker = Worker(
                job=job,
                transcriber=transcriber,
                options=options,
                config_hash=output_hash(config),
                stop=stop,
                summary=summary,
                seen=seen,
                diarizer=diarizer,
                names=names,
                outputs=outputs,
                only=only,
                planning=planning,
                alone_worker=alone_worker,
            )
            worker.decode_all(todo)
        finally:
            registration.__exit__()
    finally:
        planning.__exit__()
    export_at_end(job, options, [str(ref.path) for ref in refs], only, summary)
    update_site(job, options, summary)  # failed rows and files done by others since this worker's last build
    summary.wall_s = time.monotonic() - start
    return summary


def stopped_yet(stop: threading.Event) -> None:
    """Interrupted if a stop came (before the job dir exists: a stop then leaves nothing behind)."""
    if stop.is_set():
        from . import Interrupted

        raise Interrupted()


def second_chance(line: str, shown: bool) -> None:
    """A piece at its second chance (beam search, then sampling) can take minutes: said, so the bar does not
    look hung."""
    log.info("%s", line)
    progress.say(line, shown)


def prepare(
    refs: list[InputRef],
    job: JobDir,
    config: dict,
    options: JobOptions,
    summary: JobSummary,
    registration: workers.Registration,
    planning: workers.Planning | None = None,
) -> tuple[list[Task], dict[str, str | None], dict[str, str], dict | None]:
    """Planning, under the preparation lock: --restart, the configuration check, job.json, what is left.

    A worker joining a job that other workers are at work on never starts it over (with accelerate every
    rank passes the same --restart: the first one restarts, the others join) and adds its inputs to the
    job's. Returns the files to decode, per file the ``finished_at`` of its row as planned (a row that changed
    since was written by another worker), the output file name of each input path, and the outputs each finished
    file gets (the job's recorded ones where there are: a joiner that asked for none writes theirs)."""
    others = workers.live_workers(job.root, besides=registration.path)
    if options.restart:
        summary.warnings += plan.restart(job, others)
    rows = job.file_rows()  # a damaged one is moved aside with the plan's other repairs
    check_config(job, config, rows, joining=bool(others))
    inputs = [str(r.path) for r in refs]
    mine = agreed.spec(options.subtitles, options.output_dir, options.cue_rules)
    wanted = mine if options.writes_outputs else None
    earlier = {}
    with contextlib.suppress(DamagedState):
        earlier = job.read_job() or {}
    if others:
        inputs = list(dict.fromkeys([*earlier.get("inputs", []), *inputs]))
        wanted = agreed.join(earlier.get("outputs"), wanted, job.root)
    job.write_job(config, inputs, wanted, speaker_names(options) or earlier.get("speaker_names"))
    fps = job.fingerprints()
    now = read_state(job, refs, fps, planning=planning, rows=rows)
    planned = plan.plan(now, speaker_config(options), options.retry_failed, options.launched_at)
    plan.apply(job, planned.repairs, fps)
    planned.into(summary)
    names = output_names([p for r in rows for p in row_paths(r)] + [str(ref.path) for ref in refs])
    return planned.tasks, {r["file_id"]: r.get("finished_at") for r in rows}, names, wanted or mine


def speaker_names(options: JobOptions) -> dict | None:
    """The run's speaker names (--speaker-names, a job file's list and table per show) as job.json keeps them, for
    ``export`` (None: none given; the job's earlier ones stay)."""
    rules = options.cue_rules
    if not (rules.speaker_names or rules.show_speaker_names):
        return None
    return {
        "names": list(rules.speaker_names),
        "by_show": [[key, list(names)] for key, names in rules.show_speaker_names],
    }


def restart_job(root: Path, restart: bool) -> None:
    """--restart for a launch of several workers: done once, before they start (the workers get no --restart)."""
    if restart:
        job = JobDir(root)
        with job.locked():
            plan.restart(job, workers.live_workers(job.root))


def alone_worker(options: JobOptions, config_hash: str, stop) -> Worker:
    """The worker inside the child that decodes suspect files alone (isolate.py): its own models, no claims."""
    from ..decode import Transcriber

    set_threads(options)
    models = job_models(options)
    transcriber = Transcriber(models, options.decode)
    job = JobDir(options.out_dir)
    return Worker(
        job=job,
        transcriber=transcriber,
        options=options,
        config_hash=config_hash,
        stop=stop,
        summary=JobSummary(job.root),
        seen={},
        diarizer=load_diarizer(options),
        alone=True,
    )
