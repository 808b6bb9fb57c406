"""Names for a diarized job's speakers in its files: one list for every input, or one list per show.

Diarization numbers speakers by first appearance (``Speaker 1``, ``Speaker 2``, ...) and the manifests keep
those labels; names are put in only when the files are written. An archive of several shows has other hosts
in each, so a job file may give a table instead of a list: a key is a folder name, the tail of a path
(``shows/garden-hour``) or a glob pattern (``garden-*``, ``*/2024/*.mp3``), matched from the right against
each input's path and every folder it is in; the first key that matches (in the file's order) wins, and
``"*"`` as the last key names the rest. Shapes are checked when the job file is read: a wrong one is a usage
error before any job is created.
"""

from __future__ import annotations

from pathlib import PurePath

Names = tuple[str, ...]
ByShow = tuple[tuple[str, Names], ...]  # (folder or pattern, names), in the job file's order

EXAMPLE = 'speaker_names = ["Lena", "Walter"], or a table: [speaker_names] "garden-hour" = ["Lena", "Walter"]'


class ShapeError(ValueError):
    """A speaker_names value of the wrong shape (the message says which part)."""


def _names(value, where: str) -> Names:
    """The names by position: an empty one (``"Lena,,Walter"``, ``["Lena", "", "Walter"]``) names nobody, and that
    speaker keeps its number; the names after it stay with their speakers (a name dropped shifted them)."""
    if isinstance(value, str):  # the command line's "Lena, Walter"
        value = value.split(",")
    if not isinstance(value, (list, tuple)) or not all(isinstance(n, str) for n in value):
        raise ShapeError(f"{where} must be a list of names (strings), not {value!r}")
    names = tuple(n.strip() for n in value)
    while names and not names[-1]:  # a trailing comma names nobody
        names = names[:-1]
    return names


def parse(value, where: str = "speaker_names") -> tuple[Names, ByShow]:
    """``(names for every input, names per show)`` from a list, a comma string or a table of lists."""
    if value is None:
        return (), ()
    if isinstance(value, dict):
        by_show = []
        for key, names in value.items():
            if not key.strip():
                raise ShapeError(f"{where} has an empty show key; {EXAMPLE}")
            try:
                PurePath("x").match(key.strip())
            except ValueError as exc:  # "." and the like: no path matches it ("empty pattern")
                raise ShapeError(f'{where}."{key}" is not a folder name, path tail or pattern ({exc})') from exc
            if isinstance(names, str):
                raise ShapeError(f'{where}."{key}" must be a list of names, e.g. ["Lena", "Walter"], not {names!r}')
            by_show.append((key.strip(), _names(names, f'{where}."{key}"')))
        return (), tuple(by_show)
    if isinstance(value, (list, tuple, str)):
        return (_names(value, where) if value else ()), ()
    raise ShapeError(f"{where} must be a list of names or a table of lists per show; {EXAMPLE}")


def recorded(job_record: dict) -> tuple[Names, ByShow] | None:
    """The names a job recorded in its job.json (``speaker_names``: its run's list and its table per show, as
    ``JobDir.write_job`` keeps them); None where it recorded none, or not in that shape."""
    value = job_record.get("speaker_names")
    if not isinstance(value, dict):
        return None
    try:
        names = tuple(map(str, value.get("names") or ()))
        by_show = tuple((str(key), tuple(map(str, show))) for key, show in value.get("by_show") or ())
    except (TypeError, ValueError):  # not pairs of a key and a list
        return None
    return names, by_show


def matches(key: str, path: str) -> bool:
    """Whether ``key`` (folder name, path tail or glob) names ``path`` or a folder it is in."""
    pure = PurePath(path)
    return any(p.match(key) for p in (pure, *pure.parents) if p.name)


def names_for(path: str, names: Names, by_show) -> Names:
    """The names for one input path: its show's (the first key that matches), else ``names``."""
    for key, show_names in by_show or ():
        if matches(key, path):
            return tuple(show_names)
    return tuple(names or ())


def named(label: str | None, names: Names) -> str | None:
    """``Speaker N`` called ``names[N - 1]``; any other label (or one past the names, or an empty name: that
    speaker keeps its number) as it is."""
    number = label.rsplit(" ", 1)[-1] if label and label.startswith("Speaker ") else ""
    given = number.isdigit() and 0 < int(number) <= len(names) and names[int(number) - 1]
    return names[int(number) - 1] if given else label
