"""What a run does, told as it happens, to whoever passed an ``Events`` in: nothing in production (this class does
nothing), the tests' ``tests/traced.py`` there.

The kill, resume and worker tests must know which process read, decoded, persisted and wrote what, and must kill
a process at a chosen piece as the OOM killer would; that knowledge is theirs, so the hooks are an object they pass
in (``JobOptions.events``, from the CLI's ``click`` context object), not variables the product reads. It travels
with the options to every process of the run (``--workers`` children, the watched child, Ray actors), so it must
pickle.
"""

from __future__ import annotations

from pathlib import Path


class Events:
    """The events of a run (``number``: a piece's index, or for ``claimed`` the deaths counted on the file):
    ``read`` (a piece cut), ``opened`` (a file's reading started ahead of its claim, on the thread that decodes;
    ``number`` 0), ``decoded``, ``persisted`` (its batch checkpointed, or the file's row written),
    ``claimed``, ``changed`` (its content changed under the claim), ``finished`` (a file's row written by its
    decode, done or failed; ``number``: its pieces), ``written`` (a file's outputs; ``number``: how many), ``checkpoint`` (a draft's
    training state saved; ``file_id`` empty)."""

    def happened(self, event: str, file_id: str, number: int) -> None:
        """One event, as it happens."""

    def decoding(self, path: Path, indexes: list[int]) -> None:
        """The pieces ``indexes`` of ``path`` start decoding: the point a test may end the process at."""


NOTHING = Events()


def events() -> Events:
    """The events object the command was given (click's context object: ``main.main(obj={"events": ...})``), else
    ``NOTHING``."""
    import click

    context = click.get_current_context(silent=True)
    obj = context.find_object(dict) if context is not None else None
    return (obj or {}).get("events", NOTHING)
