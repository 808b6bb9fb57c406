"""What podscribe wrote in a folder of outputs (``.podscribe/``), the record ``ownership.py``'s rule reads.

The record is read and changed under an OS lock (``.podscribe/lock``, flock), so the workers of a job, each
writing a file's outputs as the file finishes, never lose each other's entries. It is two snapshots
(``written.json``, ``sources.json``) and a journal of the changes since them (``journal.jsonl``), one line per
file written or removed, appended and fsynced *before* the file is replaced: a process killed at any moment
leaves a record that knows what is on disk (a write cut short is recorded with both digests, the old and the
new). The journal is folded into the snapshots every ``COMPACT_LINES`` lines, so a file written costs a line, not
the whole record again (an export of 2,000 files encoded and fsynced it 20,000 times). A temporary file a killed
write left behind is removed the next time the folder is written (under the lock, no write is in flight).
Everything lives in one hidden folder: ``ls``, ``datasets`` and globs over the outputs do not see it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..facts.errors import StorageError
from ..storage.atomic import atomic_write_bytes, read_json_dict

RECORD_DIR = ".podscribe"
RECORD = "written.json"  # name -> digest (or the digests a write cut short may have left: [old, new])
SOURCES = "sources.json"  # name -> [the input path it was written for, its extension]
JOURNAL = "journal.jsonl"  # changes since the snapshots: {"n": name, "d": digest(s) or null, "s": source or null}
COMPACT_LINES = 1000


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def accepted(value) -> set[str]:
    """The digests a record entry accepts as podscribe's own: one, or those a write cut short may have left."""
    if isinstance(value, str):
        return {value}
    return {v for v in value if isinstance(v, str)} if isinstance(value, list) else set()


class Record:
    """What podscribe wrote in one folder, read under its lock: per name the digests podscribe may have left there
    and the input each was written for; each change appended to the journal before the file changes."""

    def __init__(self, folder: Path):
        self.dir = folder / RECORD_DIR
        self.digests = read_json_dict(self.dir / RECORD)
        self.sources = read_json_dict(self.dir / SOURCES)
        self.names_of: dict[tuple, set[str]] = {}  # (input path, extension) -> the names written for it
        for name in self.sources:
            self._index(name, None, self.source(name))
        self.lines = 0
        self._journal: int | None = None
        with contextlib.suppress(OSError):
            for line in (self.dir / JOURNAL).read_bytes().splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:  # a line a kill cut short: its file was not replaced yet
                    continue
                if isinstance(entry, dict) and isinstance(entry.get("n"), str):
                    self._apply(entry)
                    self.lines += 1

    def owns(self, name: str, digest: str | None) -> bool:
        return digest is not None and digest in accepted(self.digests.get(name))

    def source(self, name: str) -> list | None:
        value = self.sources.get(name)
        return value if isinstance(value, list) and len(value) == 2 else None

    def _apply(self, entry: dict) -> None:
        name, digests = entry["n"], entry.get("d")
        before = self.source(name)
        if digests is None:
            self.digests.pop(name, None)
            self.sources.pop(name, None)
        else:
            self.digests[name] = digests
            if "s" in entry:
                if entry["s"] is None:
                    self.sources.pop(name, None)
                else:
                    self.sources[name] = entry["s"]
        self._index(name, before, self.source(name))

    def _index(self, name: str, before: list | None, after: list | None) -> None:
        if before == after and name in self.names_of.get(tuple(after or ()), ()):
            return
        if before is not None:
            self.names_of.get(tuple(before), set()).discard(name)
        if after is not None:
            self.names_of.setdefault(tuple(after), set()).add(name)

    def change(self, name: str, digests: str | list | None, source: list | None | object = ...) -> None:
        """Record ``name`` as holding one of ``digests`` (None: gone), written for ``source`` (``...``: as
        before): appended to the journal, which is on disk before any file it names is replaced (the writes'
        ``atomic_write_many`` syncs the file system first), so a kill after it finds the record knowing."""
        entry = {"n": name, "d": digests, **({} if source is ... else {"s": source})}
        if (digests == self.digests.get(name) or digests is None and name not in self.digests) and (
            source is ... or source == self.sources.get(name)
        ):
            return
        try:
            if self._journal is None:
                self.dir.mkdir(parents=True, exist_ok=True)
                self._journal = os.open(self.dir / JOURNAL, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
                size = os.fstat(self._journal).st_size
                if size and os.pread(self._journal, 1, size - 1) != b"\n":  # a line a kill cut short: ended, so
                    os.write(self._journal, b"\n")  # the next entry is not glued to it (both would be unreadable)
            line = json.dumps(entry, separators=(",", ":")).encode() + b"\n"
            if os.write(self._journal, line) != len(line):  # a full disk may take part of it without an error
                raise OSError(errno.ENOSPC, "the disk took only part of an entry")
        except OSError as exc:
            raise StorageError(
                f"cannot write {self.dir / JOURNAL}: {exc.strerror or exc}; free space or fix permissions, "
                "then rerun the same command"
            ) from exc
        self._apply(entry)
        self.lines += 1

    def settle(self, name: str, digest: str) -> None:
        """The write of ``name`` is done: only ``digest`` is podscribe's there now (folded in at compaction)."""
        self.digests[name] = digest

    def close(self) -> None:
        """The journal folded into the snapshots once it is long (snapshots first: a kill between the two
        replays the journal over them, which changes nothing)."""
        try:
            if self.lines >= COMPACT_LINES:
                atomic_write_bytes(self.dir / RECORD, json.dumps(self.digests, indent=0, sort_keys=True).encode())
                atomic_write_bytes(self.dir / SOURCES, json.dumps(self.sources, indent=0, sort_keys=True).encode())
                if self._journal is not None:
                    os.ftruncate(self._journal, 0)
                else:
                    (self.dir / JOURNAL).unlink(missing_ok=True)
                self.lines = 0
        finally:
            if self._journal is not None:
                os.close(self._journal)
                self._journal = None


def has_record(folder: Path) -> bool:
    """Whether podscribe wrote outputs into ``folder`` (its record or journal is there)."""
    return any((Path(folder) / RECORD_DIR / name).is_file() for name in (RECORD, JOURNAL))


@dataclass
class Recorded:
    """What podscribe wrote in a folder, as its record and journal stand (read once, read only)."""

    digests: dict[str, set[str]]  # file name -> the digests podscribe may have left there (none of them: a person's)
    names_of: dict[tuple[str, str], set[str]]  # (input path, extension) -> the names written for it

    def names(self, path: str, ext: str) -> set[str]:
        """The names written for ``path``'s ``ext`` file, without the ``.new`` files beside a person's version."""
        return {n for n in self.names_of.get((path, ext), ()) if ".new." not in n and ".new-" not in n}


def recorded(folder: Path) -> Recorded:
    record = Record(Path(folder))
    return Recorded(
        {name: accepted(value) for name, value in record.digests.items()},
        {key: set(names) for key, names in record.names_of.items() if names},
    )


def own_digests(folder: Path) -> dict[str, set[str]]:
    """Per file name in ``folder``, the digests podscribe may have left there (its record and journal, read as they
    stand): a file holding none of them is a person's (the site offers it as edited)."""
    return recorded(folder).digests


def file_digest(path: Path) -> str | None:
    """The SHA-256 of what is at ``path`` now (None: nothing; a folder is a digest no write gives)."""
    try:
        return digest(path.read_bytes())
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        return "a folder"
