"""A suspect file decoded alone, in a child process its worker watches: the only evidence that a file kills.

A process that dies while decoding a file (its claim left counted, workers.py) proves nothing about the file:
the whole run may have been stopped — SIGKILL, a reboot, SIGHUP, a scheduler's time limit. So such a file is
only a suspect: its worker decodes it after every other file, in a child process of its own, and watches.
The child dying while the worker lives, without saving a new batch, is a death of the file's own making
(``Claim.died_alone``); ``max_attempts`` of those in a row make the file a failed row, its checkpoints kept
(``--retry-failed`` resumes from them). The child ends with its parent (PR_SET_PDEATHSIG): a run killed
whole leaves no child decoding unseen, and no witness — nothing is counted against the file.

One child serves every suspect file of a worker, one at a time (its models are loaded once); a child that
died is started again for the next file. The child holds no claim: the worker does, and it outlives the
child. Stops reach the child only through the worker: it ignores Ctrl-C (the terminal sends it to the whole
process group) and finishes the batch in hand when the worker's stop is forwarded to it; the worker's second
signal ends it at once.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import os
import pickle
import signal
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..facts.errors import PodscribeError

if TYPE_CHECKING:
    from .config import JobOptions
    from .plan import Task
    from .summary import JobSummary

log = logging.getLogger("podscribe")

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """This process gets SIGKILL when its parent dies (Linux); if the parent is already gone, it ends now."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:
        os._exit(1)


@dataclass
class Died:
    """The child decoding a file alone ended without answering: killed, out of memory, a native crash."""

    exit_code: int | None

    def __str__(self) -> str:
        code = self.exit_code
        if code is not None and code < 0:
            with contextlib.suppress(ValueError):
                return f"killed by {signal.Signals(-code).name}"
        return f"exit code {code}"


class Watched:
    """The child process that decodes suspect files for one worker, started when first needed."""

    def __init__(self, options: JobOptions, config_hash: str, stop, make_worker: Callable):
        self.options, self.config_hash, self.stop = options, config_hash, stop
        self.make_worker = make_worker  # run.alone_worker, passed in: run imports this module, not the reverse
        self.context = multiprocessing.get_context("spawn")
        self.proc = None
        self.conn = None
        self.stop_sent = None  # a pipe, not an Event: a semaphore of a child killed outright is reported leaked

    def _start(self) -> None:
        parent, child = self.context.Pipe()
        stop_recv, self.stop_send = self.context.Pipe(duplex=False)
        self.stop_sent = False
        options = replace(self.options, progress=False, subtitles=[])
        self.proc = self.context.Process(
            target=_serve,
            args=(self.make_worker, options, self.config_hash, child, stop_recv, os.getpid()),
            daemon=True,
        )
        self.proc.start()
        child.close()
        stop_recv.close()
        self.conn = parent

    def decode(self, task: Task, probed, duration_s: float, seen: str | None) -> JobSummary | Died:
        """Decode one file in the child: its summary, or how the child died. A stop of the worker is forwarded
        (the child finishes its batch in hand, then this raises Interrupted); a second one ends the child."""
        from . import Interrupted

        if self.proc is None or not self.proc.is_alive():
            self._start()
        try:
            self.conn.send((task, probed, duration_s, seen))
            while not self.conn.poll(0.2):
                if self.stop.is_set() and not self.stop_sent:
                    self.stop_send.send(True)
                    self.stop_sent = True
                if not self.proc.is_alive() and not self.conn.poll(0):
                    self.proc.join()
                    return self._died()
            answer = self.conn.recv()
        except (EOFError, OSError):
            self.proc.join()
            return self._died()
        except BaseException:  # the worker's second signal: the child stops at once too
            self.close(now=True)
            raise
        kind, value = answer
        if kind == "done":
            return value
        if kind == "stopped":
            self.close()
            raise Interrupted()
        self.close()
        raise value

    def _died(self) -> Died:
        died = Died(self.proc.exitcode)
        self.proc, self.conn = None, None
        self.stop_send.close()
        return died

    def close(self, now: bool = False) -> None:
        if self.proc is None:
            return
        if now:
            self.proc.kill()
        else:
            with contextlib.suppress(OSError, ValueError):
                self.conn.send(None)
        self.proc.join(timeout=None if not now else 5)
        self.proc, self.conn = None, None
        self.stop_send.close()


def _serve(make_worker: Callable, options: JobOptions, config_hash: str, conn, stop_recv, parent_pid: int) -> None:
    """The child: load the models once, then decode each file the worker sends, alone, and answer."""
    die_with_parent(parent_pid)
    from .stop import StopPolicy

    stop = StopPolicy(tell=log.warning).install(child=True).event  # the worker forwards its stop (below)

    def forwarded() -> None:
        with contextlib.suppress(EOFError, OSError):
            if stop_recv.recv():
                stop.set()

    threading.Thread(target=forwarded, daemon=True).start()
    logging.basicConfig(level=logging.WARNING, format=f"worker {os.getpid()} (a suspect file alone): %(message)s")
    from ..facts.runtime import quiet_libraries
    from . import Interrupted
    from .summary import JobSummary

    quiet_libraries()
    worker = make_worker(options, config_hash, stop)
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        task, probed, duration_s, seen = message
        worker.summary = JobSummary(options.out_dir)
        worker.seen = {task.file_id: seen}
        try:
            worker.decode_unclaimed(task, probed, duration_s)
            answer = ("done", worker.summary)
        except (Interrupted, KeyboardInterrupt):
            answer = ("stopped", None)
        except PodscribeError as exc:
            answer = ("error", exc)
        except Exception as exc:  # a bug: said in the worker as it happened here
            answer = ("error", exc if _picklable(exc) else RuntimeError(traceback.format_exc()))
        conn.send(answer)
        if answer[0] != "done":
            return


def _picklable(exc: BaseException) -> bool:
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return False
    return True
