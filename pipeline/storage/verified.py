"""Which tables of a job read back whole, remembered so that each table's pages are read once, not at every plan
and every `podscribe status`.

A done file's segments and pieces tables are read whole to know it is done (a page damaged on disk fails its CRC).
For an archive of thousands of hour-long episodes that made every plan and every `status` a read of the whole
archive. Tables are written once, atomically (a new write is a new inode), so a table is remembered by its size,
mtime and inode once it read whole, or once this process wrote it; after that its footer is enough. Damage that
keeps a file's stat (bytes rotting in place) is what `status --verify` reads every page for.

``verified.json`` in the job dir: ``{"segments/<file_id>": [size, mtime_ns, inode], ...}``. Workers merge into it
without a lock: an entry lost to a race costs one more read of that table, never a wrong answer.
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
        self._stamps: dict | None = None
        self._new = False

    @staticmethod
    def stamp(path: Path) -> list[int]:
        st = os.stat(path)
        return [st.st_size, st.st_mtime_ns, st.st_ino]

    def holds(self, key: str, stamp: list[int]) -> bool:
        if self._stamps is None:
            self._stamps = read_json_dict(self.path)
        return self._stamps.get(key) == stamp

    def remember(self, key: str, stamp: list[int]) -> None:
        if not self.holds(key, stamp):
            self._stamps[key] = stamp
            self._new = True

    def save(self) -> None:
        """What this process verified or wrote, merged with what others kept meanwhile. A job dir that cannot be
        written (a read-only archive) is simply read in full each time."""
        if not self._new:
            return
        merged = {**read_json_dict(self.path), **self._stamps}
        with contextlib.suppress(OSError, StorageError):
            atomic_write_bytes(self.path, json.dumps(merged, separators=(",", ":")).encode())
        self._new = False
