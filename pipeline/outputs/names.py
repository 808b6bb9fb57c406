"""The names of a job's output files: an input's stem; stems that occur more than once among a job's inputs get
``-<8 hex of the path's hash>`` (the same name on every run, said out loud), so no input's files overwrite
another's; a stem too long for a file name with its longest ending (``.new-999.podcast.json`` within 255 bytes) is
cut, with the hash.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

MAX_NAME_BYTES = 255  # a file name, on every file system podscribe's job dirs live on
MAX_STEM_BYTES = MAX_NAME_BYTES - len(".new-999.podcast.json")


def output_names(paths: Iterable[str]) -> dict[str, str]:
    """Each input path's output name (without extension): its stem, or ``stem-<hash8>`` when several inputs
    share the stem or the stem is too long for a file name (then cut to fit)."""
    unique = sorted(set(map(str, paths)))
    stems: dict[str, int] = {}
    for path in unique:
        stems[Path(path).stem] = stems.get(Path(path).stem, 0) + 1
    names = {}
    for path in unique:
        stem = Path(path).stem
        names[path] = stem if stems[stem] == 1 and not too_long(stem) else hashed(stem, path)
    return names


def too_long(stem: str) -> bool:
    """A stem whose files' names would pass the file system's 255 bytes (with ``.new-999.podcast.json``)."""
    return len(os.fsencode(stem)) > MAX_STEM_BYTES


def hashed(stem: str, path: str) -> str:
    """``stem-<hash8 of path>``, the stem cut (at a character) so that the whole fits ``MAX_STEM_BYTES``."""
    suffix = f"-{path_hash(path)}"
    while len(os.fsencode(stem + suffix)) > MAX_STEM_BYTES:
        stem = stem[:-1]
    return stem + suffix


def path_hash(path: str) -> str:
    return hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:8]
