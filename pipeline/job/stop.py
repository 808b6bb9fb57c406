"""One stop policy for every process of a run: the CLI's (and each accelerate rank's), each ``--workers`` child's
and the watched child's that decodes a suspect file alone.

A first signal finishes the batch in hand and saves it; a second one stops at once (that batch is decoded again on
resume). SIGTERM (systemd, docker, Kubernetes, cron wrappers) and SIGHUP (the terminal or ssh session went away)
allow the batch ``PODSCRIBE_STOP_GRACE_S`` seconds (default 8, inside docker's 10 s) before it is dropped: a caller
that sends SIGTERM then SIGKILL after a timeout gets the batch saved when it can be, and a clean exit either way.

A child process of the run (``child=True``) takes its stop from its parent, which forwards its own: Ctrl-C at a
terminal and a lost terminal reach the whole process group, and that signal arriving on top of the parent's
forwarded stop must not count as a second one (which drops the batch in hand). So a child ignores SIGINT and
SIGHUP, and SIGTERM sent to it alone is handled like the parent's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable

from ..facts import errors

GRACED = (signal.SIGTERM, *((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ()))
GROUP = (signal.SIGINT, *((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ()))  # what a terminal sends everyone


def say(line: str) -> None:
    """A line on stderr that a terminal gone away (SIGHUP: writing fails) does not turn into a traceback."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


class StopPolicy:
    """The signal handler of a run's process. ``event`` is what the run's loops look at between batches (a
    ``multiprocessing`` event where the stop is shared with other processes); it is set on the first signal."""

    def __init__(self, event=None, grace_s: float | None = None, tell: Callable[[str], None] = say):
        self.event = event if event is not None else threading.Event()
        self.signum: int | None = None
        self.grace_s = float(os.environ.get("PODSCRIBE_STOP_GRACE_S", "8")) if grace_s is None else grace_s
        self.tell = tell
        self._previous: dict = {}

    def __call__(self, signum, _frame) -> None:
        if self.signum is not None:  # a second signal (of any kind): stop now
            raise KeyboardInterrupt
        self.signum = signum
        self.event.set()
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        if signum in GRACED and self.grace_s > 0 and hasattr(signal, "setitimer"):
            signal.signal(signal.SIGALRM, self._too_late)
            signal.setitimer(signal.ITIMER_REAL, self.grace_s)
            self.tell(f"\n{name}: stopping after the batch in hand (at most {self.grace_s:g} s)")
        else:
            self.tell(f"\n{name}: stopping after the batch in hand (again to stop at once)")

    def _too_late(self, _signum, _frame) -> None:
        raise KeyboardInterrupt

    @property
    def exit_code(self) -> int:
        if self.signum == signal.SIGTERM:
            return errors.EXIT_SIGTERM
        return errors.EXIT_SIGHUP if self.signum == getattr(signal, "SIGHUP", None) else errors.EXIT_SIGINT

    def install(self, child: bool = False) -> StopPolicy:
        """This policy for this process's signals (``child``: a process the run started, which its parent stops)."""
        for sig in (signal.SIGINT, *GRACED):
            handler = signal.SIG_IGN if child and sig in GROUP else self
            self._previous.setdefault(sig, signal.signal(sig, handler))
        return self

    def restore(self) -> None:
        """The handlers before ``install``, and no grace timer left running (a run that ended within its grace)."""
        if hasattr(signal, "setitimer"):
            signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def __enter__(self) -> StopPolicy:
        return self.install()

    def __exit__(self, *_exc) -> None:
        self.restore()
