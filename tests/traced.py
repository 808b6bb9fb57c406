"""The CLI with the tests' events object: ``python tests/traced.py ARGS`` is ``python -m pipeline.cli ARGS`` with a
``Trace`` (pipeline/facts/events.py) passed in through click's context object, built from two variables the tests
set (only this file reads them):

``PODSCRIBE_TRACE=<file>``: one line per event, ``<event> <file_id> <number> <pid>``, appended as it happens (read /
decoded / persisted / claimed / changed / written; ``checkpoint - <step>`` for a draft's training).
``PODSCRIBE_CRASH=<file name>:<piece>``: SIGKILL when that piece starts decoding, as the OOM killer would.

The object travels with the job's options into every process the run starts (``--workers`` children, the watched
child, Ray actors and the watched children of those), by pickle: each imports this module as ``traced``
(conftest.py puts tests/ on the PYTHONPATH every one of them inherits).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pipeline.facts.events import Events


@dataclass
class Trace(Events):
    path: str | None = None
    crash: str | None = None

    @classmethod
    def from_environment(cls, env: Mapping[str, str] = os.environ) -> Trace:
        return cls(env.get("PODSCRIBE_TRACE"), env.get("PODSCRIBE_CRASH"))

    def happened(self, event: str, file_id: str, number: int) -> None:
        if self.path:
            with open(self.path, "a") as f:
                f.write(f"{event} {file_id or '-'} {number} {os.getpid()}\n")

    def decoding(self, path: Path, indexes: list[int]) -> None:
        if self.crash:
            name, _, piece = self.crash.rpartition(":")
            if name == path.name and int(piece) in indexes:
                os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    from traced import Trace  # as ``traced.Trace``, not ``__main__.Trace``: a name every process of the run imports

    from pipeline.cli import main as cli

    cli.main(obj={"events": Trace.from_environment()}, prog_name="python -m pipeline.cli")


if __name__ == "__main__":
    main()
