"""The ``podscribe`` command as a process (the console script, ``python -m podscribe``, ``python -m pipeline.cli``):
the command group, then an exit without the interpreter's teardown.

After ``import torch`` a Python process spends 0.35-0.45 s of a 2-core CPU ending: the interpreter's last collections
walk every module's objects and torch's operator registrations are undone one by one (perf: ``gc_collect_main``,
``OperatorEntry::updateDispatchTableEntry_``). Nothing of a job depends on it: every write is atomic and finished
before the command returns (decision 0053). So ``leave`` does what the interpreter's end does that matters, in the
interpreter's order, and then ``os._exit``: threads joined (``threading._shutdown``, which first tells idle executors'
workers to stop), ``atexit`` handlers run (multiprocessing joins the workers it started, logging flushes and closes
its handlers), the standard streams flushed (an output that could not be written exits 120, as the interpreter's end
does), C's stdio flushed. An exception other than ``SystemExit`` (a bug) takes the interpreter's own way out, with its
traceback.

``main`` (the click group) stays what tests invoke in their own process.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from typing import NoReturn

from .group import main


def console(**click_args) -> NoReturn:
    """Run the command group as click's standalone mode does (``click_args``: ``prog_name``, ``obj``), then
    ``leave`` with its exit code."""
    try:
        main.main(**click_args)
    except SystemExit as stop:
        leave(stop.code)
    leave(0)


def leave(code: int | str | None) -> NoReturn:
    """End the process with ``code`` as ``sys.exit(code)`` would (None: 0; a message: printed, 1), skipping only the
    teardown of the modules. Where this Python's ``threading`` has no ``_shutdown`` (not CPython), or off the main
    thread, the interpreter's own exit."""
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is None or threading.current_thread() is not threading.main_thread():
        sys.exit(code)
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:
        print(code, file=sys.stderr)
        status = 1
    shutdown()
    atexit._run_exitfuncs()  # noqa: SLF001 (the interpreter's own call at its end, not public)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # the reader gone (``| head``), or the stream closed: nobody to tell
            pass
        except OSError as exc:  # a full disk, a file too large: output lost, which the interpreter's end exits 120 for
            with contextlib.suppress(OSError, ValueError):
                os.write(2, f"podscribe: the end of its output was not written: {exc}\n".encode())
            status = 120
    with contextlib.suppress(Exception):  # what native code wrote through C's stdio, as C's exit() flushes it
        import ctypes  # here, not at every command's start

        ctypes.CDLL(None).fflush(None)
    os._exit(status & 0xFF)
