"""Test hooks read from the environment: the crash tests follow a job's own events and plant deaths with them.

``PODSCRIBE_TRACE=<file>``: one line per event, ``<event> <file_id> <number> <pid>``, appended as it happens
(read / decoded / persisted / claimed / written). ``PODSCRIBE_CRASH=<file name>:<piece>``: SIGKILL when that
piece starts decoding, as the OOM killer would.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path


def trace(event: str, file_id: str, number: int) -> None:
    """Test hook: PODSCRIBE_TRACE=<file> appends one line per read / decoded / persisted piece (``number``: the
    piece's index) and per claimed file (``number``: the worker deaths counted on it before this claim)."""
    path = os.environ.get("PODSCRIBE_TRACE")
    if path:
        with open(path, "a") as f:
            f.write(f"{event} {file_id} {number} {os.getpid()}\n")


def crash_test(path: Path, indexes: list[int]) -> None:
    """Test hook: PODSCRIBE_CRASH=<file name>:<piece> kills the process (SIGKILL, as the OOM killer would) when it
    starts decoding that piece of that file: a file that really kills its worker."""
    planted = os.environ.get("PODSCRIBE_CRASH")
    if planted:
        name, _, piece = planted.rpartition(":")
        if name == path.name and int(piece) in indexes:
            os.kill(os.getpid(), signal.SIGKILL)
