"""Which tables of a job read back whole, remembered so that each table's pages are read once, not at every plan
and every `podscribe status`.

A done file's segments and pieces tables are read whole to know it is done (a page damaged on disk fails its CRC).
For an archive of thousands of hour-long episodes that made every plan and every `status` a read of the whole
archive. Tables are written once, atomically (a new write is a new inode), so a table is remembered by its size,
mtime, ctime and inode once it read whole, or once this process wrote it; after that its footer is enough (the
ctime is in the stamp because nobody can set it: a backup copied over a table with its times kept changes it).
Damage that keeps a file's stat (bytes rotting below the file system) is what `status --verify` reads every page
for; a table found damaged is forgotten at once, so the next run reads it whole and sets it aside.

``verified.json`` in the job dir: ``{"segments/<file_id>": [size, mtime_ns, ctime_ns, inode], ...}``. Processes
merge what they themselves verified into it without a lock: an entry lost to a race costs one more read of that
table, never a wrong answer.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from ..facts.errors import StorageError
from .atomic import atomic_write_bytes, read_json_dict

VERIFIED = "verified.json"


class Verified:
    def __init__(self, root: Path):
        self.path = Path(root) / VERIFIED
        self._stamps: dict | None = None  # as read, with what this process verified
        self._mine: dict[str, list[int]] = {}  # what this process verified since it last saved

    @staticmethod
    def stamp(path: Path) -> list[int]:
        st = os.stat(path)
        return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]

    def holds(self, key: str, stamp: list[int]) -> bool:
        if self._stamps is None:
            self._stamps = read_json_dict(self.path)
        return self._stamps.get(key) == stamp

    def remember(self, key: str, stamp: list[int]) -> None:
        if not self.holds(key, stamp):
            self._stamps[key] = self._mine[key] = stamp

    def forget(self, key: str) -> None:
        """A table found damaged: no longer taken as read, here and on disk (the next run reads it whole)."""
        self._mine.pop(key, None)
        if self._stamps is not None:
            self._stamps.pop(key, None)
        on_disk = read_json_dict(self.path)
        if on_disk.pop(key, None) is not None:
            self._write(on_disk)

    def save(self) -> None:
        """What this process verified, merged into what is on disk now (never an older copy of others' entries).
        A job dir that cannot be written (a read-only archive) is simply read in full each time."""
        if self._mine:
            self._write({**read_json_dict(self.path), **self._mine})
            self._mine = {}

    def _write(self, stamps: dict) -> None:
        with contextlib.suppress(OSError, StorageError):
            atomic_write_bytes(self.path, json.dumps(stamps, separators=(",", ":")).encode())
