"""The inputs a command names: files as given, folders searched recursively for audio and video, glob patterns
expanded; each path absolute (job.json and the tables must mean the same file from any folder), once."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path

from ..audio.media import AUDIO_EXTENSIONS


@dataclass
class InputRef:
    path: Path  # absolute (job.json and the tables must mean the same file from any folder)
    error: str | None = None  # known-bad before any decoding (no match, empty directory)


def absolute(path: Path) -> Path:
    """``path`` absolute and without ``..``, as the files rows keep it (``manifest.row_paths``): ``../in/ep.wav``
    given as such matched no row, and whisper mode wrote none of its outputs. Where a symbolic link before the
    ``..`` makes the short form another file, the resolved path."""
    path = path.absolute()
    if ".." not in path.parts:
        return path
    short = Path(os.path.normpath(path))
    try:
        return short if os.path.samefile(short, path) else path.resolve()
    except OSError:  # either one missing: the short form (what a row of it would say)
        return short if not path.exists() else path.resolve()


def expand_inputs(inputs: list[str]) -> list[InputRef]:
    """Files as given; folders searched recursively for audio/video; glob patterns expanded."""
    refs: list[InputRef] = []
    for raw in inputs:
        path = absolute(Path(raw).expanduser())
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in AUDIO_EXTENSIONS)
            refs += [InputRef(p) for p in found] or [InputRef(path, f"directory has no audio files ({path})")]
        elif not path.exists() and any(c in raw for c in "*?["):
            found = sorted(absolute(Path(p)) for p in glob.glob(raw, recursive=True) if Path(p).is_file())
            refs += [InputRef(p) for p in found] or [InputRef(path, f"no file matches {raw!r}")]
        else:
            refs.append(InputRef(path))
    seen, unique = set(), []
    for ref in refs:
        key = ref.path.resolve() if ref.path.exists() else ref.path
        if key not in seen:
            seen.add(key)
            unique.append(_named_in_utf8(ref))
    return unique


def _named_in_utf8(ref: InputRef) -> InputRef:
    """``ref``, or a clear failure where its name is not UTF-8 (an old archive's Latin-1 ``caf\xe9.mp3``): the tables
    and job.json keep paths as UTF-8 text, which cannot hold it (the file was decoded, then its row could not be
    written: a traceback on every run). The failure is recorded under the name as printable text."""
    try:
        str(ref.path).encode("utf-8")
    except UnicodeEncodeError:
        shown = Path(os.fsencode(ref.path).decode("utf-8", "backslashreplace"))
        return InputRef(
            shown,
            f"its name is not UTF-8 ({shown.name}): podscribe's tables cannot keep it; rename it to UTF-8 "
            "(e.g. convmv -f latin1 -t utf-8 --notest), then run again",
        )
    return ref
