"""How worker processes are started and placed: N processes on this machine, the ranks of an
`accelerate launch` (or torchrun), or Ray actors across machines.

An engine only starts workers: each one runs the same `job.run.run` (plan, claim a file, decode, write),
and the job directory is the only thing they share. No collectives, no gather: a worker that dies
loses nothing persisted, and the others (or a rerun) take its file again. Only their progress comes back
to the process that started them, as events (a pipe from each process, a Ray queue from the actors), drawn
there by one `progress.Board` whatever the engine.

`--restart` is done once, by the process that starts the workers, before any of them starts: a worker
restarted by its engine (Ray restarts dead actors) must never start the job over.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import multiprocessing
import multiprocessing.connection
import os
import queue
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from ..facts.errors import PodscribeError, UsageProblem
from ..facts.runtime import quiet_libraries
from ..storage.manifest import JobDir
from . import Interrupted, progress
from .config import JobOptions, job_models
from .finish import export_at_end, update_site
from .inputs import expand_inputs
from .isolate import die_with_parent
from .run import restart_job, run, stopped_yet
from .stop import StopPolicy
from .summary import JobSummary

log = logging.getLogger("podscribe")


def for_rank(options: JobOptions) -> JobOptions:
    """Under `accelerate launch` / torchrun (LOCAL_RANK is set): this rank's GPU, bars only on local rank 0.
    Every rank is a worker of the same job; nothing else is needed from the launcher."""
    local = os.environ.get("LOCAL_RANK")
    if local is None:
        return options
    rank = int(local)
    return replace(options, device=_device_of(options, rank), progress=options.progress and rank == 0)


# -- N processes on this machine ---------------------------------------------------------------


def _threads_each(options: JobOptions, n: int) -> int | None:
    """CPU threads per worker: the cores shared out (N workers each using every core thrash)."""
    if options.threads:
        return options.threads
    return max(1, (os.cpu_count() or 1) // n)


def _device_of(options: JobOptions, index: int) -> str:
    """Worker ``index``'s GPU where there are several (``--device auto`` or ``cuda``), else the device asked for."""
    if options.device not in ("auto", "cuda"):
        return options.device
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() > 1:
        return f"cuda:{index % torch.cuda.device_count()}"
    return options.device


def _child(inputs: list[str], options: JobOptions, results, stop, parent_pid: int, events=None, rank: int = 0) -> None:
    """A spawned worker. It ends with its parent (no orphan decoding unseen) and stops by the one stop policy
    (job/stop.py) as a child: ``stop`` is set by the parent's first Ctrl-C or SIGTERM (or by a SIGTERM sent to this
    child alone, which stops the launch's other children too)."""
    die_with_parent(parent_pid)
    StopPolicy(stop, tell=log.warning).install(child=True)
    logging.basicConfig(level=logging.WARNING, format=f"worker {os.getpid()}: %(message)s")
    quiet_libraries()
    if events is not None:  # its bars are drawn by the parent
        progress.forward(events.send, rank)
    try:
        results.put(run(inputs, options, stop=stop))
    except (Interrupted, KeyboardInterrupt):
        results.put(None)
    except PodscribeError as exc:  # the parent meets the same problem and says it: no traceback here
        log.warning("%s", exc)
        results.put(None)
        sys.exit(exc.exit_code)
    except ValueError as exc:  # options the loaded model refuses: the parent says so (exit 2)
        log.warning("%s", exc)
        results.put(None)
        sys.exit(2)


def run_processes(inputs: list[str], options: JobOptions, n: int, stop: threading.Event) -> JobSummary:
    """`--workers N`: this process and N-1 spawned ones run the worker loop on the same job dir. A worker
    that dies is not waited for: its file is taken again by a last pass of this process."""
    if n <= 1 or not _work_left(inputs, options):  # a finished job: one worker checks it and writes its outputs
        return run(inputs, options, stop=stop)
    start = time.monotonic()
    stopped_yet(stop)
    restart_job(Path(options.out_dir), options.restart)
    options = replace(options, launched_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    threads = _threads_each(options, n)
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    children_stop = spawn.Event()
    children, readers = [], []  # a pipe of progress events each: a child killed mid-write harms only its own
    for i in range(1, n):
        reader, events = spawn.Pipe(duplex=False) if options.progress else (None, None)
        child_options = replace(
            options,
            restart=False,
            progress=options.progress,
            export_at_end=False,
            writes_outputs=False,
            threads=threads,
            device=_device_of(options, i),
        )
        proc = spawn.Process(
            target=_child, args=(inputs, child_options, results, children_stop, os.getpid(), events, i), daemon=False
        )
        proc.start()
        children.append(proc)
        if reader is not None:
            events.close()  # the child's end: read to its end when the child has ended
            readers.append(reader)

    def forward() -> None:  # a stop of this process (Ctrl-C, SIGTERM from systemd or docker) is theirs too
        stop.wait()
        children_stop.set()

    threading.Thread(target=forward, daemon=True).start()
    drawn = _Drawn(options.progress, functools.partial(_from_pipes, readers))
    own = replace(options, restart=False, threads=threads, device=_device_of(options, 0))
    try:
        try:
            models = job_models(own)  # loaded once for both of this process's passes
            summary = run(inputs, replace(own, export_at_end=False), models, stop=stop)
        except KeyboardInterrupt:  # a second signal: stop at once, the children too
            for proc in children:
                if proc.is_alive():
                    proc.kill()
            raise
        finally:
            put = _collect(results, children)  # before join: a child waits until what it put is read
            for proc in children:
                proc.join()
        firsts = [summary, *(other for other in put if other is not None)]
        died = [proc for proc in children if proc.exitcode not in (0, None)]
        if stop.is_set():
            raise Interrupted()
        for proc in died:
            log.warning("worker %d died (exit code %s); its file is taken again", proc.pid, proc.exitcode)
        last = run(inputs, own, models, stop=stop)  # what dead workers left, and the outputs once all are done
    except BaseException:
        drawn.close(wait=False)
        raise
    drawn.close(complete=_all_done(inputs, own))
    summary = JobSummary.of_launch(options.out_dir, firsts, last)
    summary.wall_s = time.monotonic() - start
    return summary


def _work_left(inputs: list[str], options: JobOptions) -> bool:
    from ..storage.manifest import JobDir
    from .plan import work_left

    job = JobDir(options.out_dir)
    return not (job.root / "job.json").is_file() or work_left(expand_inputs(inputs), job, options)


def _all_done(inputs: list[str], options: JobOptions) -> Callable[[], bool]:
    """The question ``_Drawn.close`` asks once every worker has ended, only where the job bar ended short (the plan
    may hash inputs whose stat changed, e.g. on another node's mount): whether the job dir holds nothing left. A
    failed row counts as dealt with (under ``--retry-failed`` this run's workers took it again already). A question
    for the bars only: whatever goes wrong reading the job dir, the answer is no, never the run's failure."""

    def ask() -> bool:
        try:
            return not _work_left(inputs, replace(options, restart=False, retry_failed=False))
        except Exception as exc:  # the bars' question, never the run's failure
            log.debug("job bar not completed: %s", exc)
            return False

    return ask


class _Drawn:
    """Every worker's progress drawn in this process by one ``progress.Board``: this process's own bars, forwarded
    to it, and the other workers' events, which a thread reads from ``events()`` (it ends when they have)."""

    def __init__(self, enabled: bool, events: Callable[[], Iterator[tuple]]):
        self.board = progress.Board(enabled)
        self.thread: threading.Thread | None = None
        if enabled:
            progress.forward(self.board.handle, 0)
            self.thread = threading.Thread(target=self._draw, args=(events,), daemon=True)
            self.thread.start()

    def _draw(self, events) -> None:
        with contextlib.suppress(Exception):  # a stopped run: the engine may be gone before the reader
            for event in events():
                self.board.handle(event)

    def close(self, wait: bool = True, complete: Callable[[], bool] | None = None) -> None:
        """``wait``: for the last events of workers that have ended (not on a stop or an error). ``complete``: asked,
        once their last events are drawn, only where the job bar is short of its total: whether the job dir says
        nothing of the run is left (``Board.complete``)."""
        if self.thread is not None and wait:
            self.thread.join()
            if complete is not None and self.board.short() and complete():
                self.board.complete()
        progress.forward(None)
        self.board.close()


def _from_pipes(readers: list) -> Iterator[tuple]:
    """The events of the children, until each child's pipe ends (a message cut by a kill ends it too)."""
    readers = list(readers)
    while readers:
        for conn in multiprocessing.connection.wait(readers):
            try:
                event = conn.recv()
            except Exception:  # EOF: the child ended; a pickle cut short: it was killed mid-write
                readers.remove(conn)
                conn.close()
                continue
            yield event


def _from_ray_queue(events, ended: threading.Event) -> Iterator[tuple]:
    """The actors' events, until ``ended`` (every actor has returned: their puts are all in the queue)."""
    from ray.util.queue import Empty

    while True:
        try:
            yield events.get(timeout=0.25)
        except Empty:
            if ended.is_set():
                yield from events.get_nowait_batch(events.qsize())  # put between that look and ``ended``
                return


def _collect(results, children) -> list:
    """Every summary the children put, read until all of them have ended."""
    found = []
    while True:
        try:
            found.append(results.get(timeout=0.5))
            continue
        except queue.Empty:
            pass
        if not any(proc.is_alive() for proc in children):
            break
    while True:
        try:
            found.append(results.get_nowait())
        except queue.Empty:
            return found


# -- Ray ---------------------------------------------------------------------------------------


def _shared_folders(options: JobOptions) -> list[tuple[str, Path]]:
    """What every Ray actor writes to: the job dir, and the outputs' folder where it is another (``-o``)."""
    folders = [("job dir", Path(options.out_dir))]
    if options.subtitles and options.output_dir:
        folders.append(("output folder (-o)", Path(options.output_dir)))
    return folders


class RayWorker:
    """One Ray actor: the models are loaded once inside it (its arguments are paths and options, never
    models), then it runs the worker loop on the job dir, which must be on storage it can see."""

    def __init__(self, inputs: list[str], options: JobOptions, marker: str, events=None, rank: int = 0):
        self.inputs, self.options, self.marker = inputs, options, marker
        self.events, self.rank = events, rank  # a Ray queue the driver draws its progress from

    def run(self) -> JobSummary:
        for what, folder in _shared_folders(self.options):
            if not (folder / self.marker).exists():
                raise UsageProblem(
                    f"the {what} {folder} is not reachable from the Ray worker on {socket.gethostname()}: put it on "
                    "storage every node mounts at the same path (NFSv4, CephFS; POSIX rename and flock are needed, "
                    "an object store will not do)"
                )
        quiet_libraries()
        if self.events is not None:
            progress.forward(self.events.put, self.rank)
        return run(self.inputs, replace(self.options, progress=self.events is not None), stop=threading.Event())


def run_ray(
    inputs: list[str], options: JobOptions, n: int | None, address: str | None, cpus_per_worker: float = 1.0
) -> JobSummary:
    """`--engine ray`: one actor per GPU of the cluster (or N actors of ``cpus_per_worker`` CPUs), each a
    worker of the job. A dead actor is restarted and its loop run again at most ``max_attempts`` times (Ray's
    defaults retry forever: one bad file must not become an endless loop); a file that keeps killing actors
    ends as a failed row through the job dir's own death count."""
    try:
        import ray
        from ray.exceptions import RayActorError, RayTaskError
        from ray.util.queue import Queue
    except ImportError as exc:
        raise UsageProblem("--engine ray needs Ray: pip install 'podscribe[ray]'") from exc
    start = time.monotonic()
    out_dir = Path(options.out_dir).absolute()
    inputs = [str(Path(x).expanduser().absolute()) for x in inputs]  # actors run in other folders
    restart_job(out_dir, options.restart)
    if options.output_dir:
        options = replace(options, output_dir=Path(options.output_dir).expanduser().absolute())
    marker = f".reach-{uuid.uuid4().hex[:12]}"
    shared = [folder for _what, folder in _shared_folders(replace(options, out_dir=out_dir))]
    for folder in shared:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / marker).write_text(socket.gethostname())
    local = address is None
    ray.init(
        address=address,
        include_dashboard=False,
        log_to_driver=True,
        **({"object_store_memory": 100 * 2**20} if local else {}),
    )
    try:
        gpus = int(ray.cluster_resources().get("GPU", 0))
        cpus = ray.cluster_resources().get("CPU", 1)
        fits = gpus or max(1, int(cpus // cpus_per_worker))
        if n and n > fits:
            log.warning(
                "--workers %d: the cluster has room for %d now; the others wait for resources (an "
                "autoscaler may add them)",
                n,
                fits,
            )
        n = n or fits
        actor = ray.remote(RayWorker).options(
            num_gpus=1 if gpus else 0,
            num_cpus=0 if gpus else cpus_per_worker,
            max_restarts=options.max_attempts,
            max_task_retries=options.max_attempts,
        )
        threads = None if gpus else max(1, int(cpus_per_worker))
        # Each actor is a worker of the job like a --workers child: it writes a file's outputs as it finishes
        # (and the job's site), records the outputs it was asked for in job.json, and leaves the job's end to the
        # driver. Ray gives each actor its GPU.
        worker_options = replace(
            options,
            out_dir=out_dir,
            restart=False,
            progress=False,
            export_at_end=False,
            threads=options.threads or threads,
        )
        events = Queue(actor_options={"num_cpus": 0}) if options.progress else None
        actors = [actor.remote(inputs, worker_options, marker, events, i + 1) for i in range(n)]
        ended = threading.Event()
        drawn = _Drawn(options.progress, functools.partial(_from_ray_queue, events, ended))
        finished, failures = [], []
        try:
            for ref in [a.run.remote() for a in actors]:
                try:
                    finished.append(ray.get(ref))
                except RayTaskError as exc:
                    if isinstance(exc.cause, PodscribeError):
                        raise exc.cause from None
                    failures.append(str(exc))  # a bug in the actor: its traceback (the first line names only the actor)
                except RayActorError as exc:
                    failures.append(f"a Ray worker died {options.max_attempts + 1} times: {str(exc).splitlines()[0]}")
        except BaseException:
            drawn.close(wait=False)
            raise
        ended.set()
        drawn.close(complete=None if failures else _all_done(inputs, worker_options))
        for failure in failures:
            log.warning("%s", failure)
        summary = JobSummary.of_launch(out_dir, finished)
    finally:
        ray.shutdown()
        for folder in shared:
            (folder / marker).unlink(missing_ok=True)
    if failures:
        summary.failures.append((str(out_dir), "some Ray workers gave up; rerun the same command to finish"))
    else:  # the job's end, as a last worker writes it: every output recorded in job.json, once no worker is at work
        named = [str(ref.path) for ref in expand_inputs(inputs)]
        only = set(named) if options.outputs_named_only else None
        job = JobDir(out_dir)
        export_at_end(job, options, named, only, summary)
        update_site(job, options, summary)
    summary.wall_s = time.monotonic() - start
    return summary
