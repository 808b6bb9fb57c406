"""The CLI with the tests' events object: ``python tests/traced.py ARGS`` is ``python -m pipeline.cli ARGS`` with a
``Trace`` (pipeline/facts/events.py) passed in through click's context object, built from two variables the tests
set (only this file reads them):

``PODSCRIBE_TRACE=<file>``: one line per event, ``<event> <file_id> <number> <pid>``, appended as it happens (read /
opened / decoded / persisted / claimed / changed / finished / written; ``checkpoint - <step>`` for a draft's
training).
``PODSCRIBE_CRASH=<file name>:<piece>``: SIGKILL when that piece starts decoding, as the OOM killer would.
``PODSCRIBE_CRASH_AFTER=<event>``: with ``PODSCRIBE_TRACE``, SIGKILL right after a process the run started (a
``--workers`` child, a Ray actor, a watched child; never the process the command ran in) tells ``<event>``: once a
run, in the first such process to create ``<trace>.killed`` (which names its pid).

The object travels with the job's options into every process the run starts (``--workers`` children, the watched
child, Ray actors and the watched children of those), by pickle: each imports this module as ``traced``
(conftest.py puts tests/ on the PYTHONPATH every one of them inherits).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.facts.events import Events


@dataclass
class Trace(Events):
    path: str | None = None
    crash: str | None = None
    crash_after: str | None = None
    origin_pid: int = field(default_factory=os.getpid)  # the command's own process (pickled into the workers)

    @classmethod
    def from_environment(cls, env: Mapping[str, str] = os.environ) -> Trace:
        return cls(env.get("PODSCRIBE_TRACE"), env.get("PODSCRIBE_CRASH"), env.get("PODSCRIBE_CRASH_AFTER"))

    def happened(self, event: str, file_id: str, number: int) -> None:
        if self.path:
            with open(self.path, "a") as f:
                f.write(f"{event} {file_id or '-'} {number} {os.getpid()}\n")
        if event == self.crash_after and os.getpid() != self.origin_pid and self.path:
            try:
                fd = os.open(f"{self.path}.killed", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                return
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)

    def decoding(self, path: Path, indexes: list[int]) -> None:
        if self.crash:
            name, _, piece = self.crash.rpartition(":")
            if name == path.name and int(piece) in indexes:
                os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    from traced import Trace  # as ``traced.Trace``, not ``__main__.Trace``: a name every process of the run imports

    from pipeline.cli import console

    console(obj={"events": Trace.from_environment()}, prog_name="python -m pipeline.cli")


if __name__ == "__main__":
    main()
