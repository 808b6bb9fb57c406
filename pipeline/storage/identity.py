"""What identifies an input: its content (SHA-256 of every byte), never its name or its place (decision 0001).

Hashing a 10,000-episode archive again on every run would read every byte of it, so ``Fingerprints`` keeps each
path's id under its size, mtime and inode (git's index does the same) in ``<job dir>/fingerprints.json``. A path
that cannot be read now (missing, a FIFO, a device, no permission) gets an id from its path and the reason, so it
still has a row; ``legacy_fingerprint`` is the id podscribe < 0.2 gave, to adopt old job dirs' rows.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .atomic import atomic_write_bytes, read_json_dict

__all__ = ["Identity", "identify", "content_since", "path_id", "Fingerprints", "legacy_fingerprint"]

FILE_ID_HEX = 32  # 128 bits of a SHA-256 of the whole content
_HASH_BLOCK = 1 << 20


@dataclass(frozen=True)
class Identity:
    """An input path's content id, or why the path cannot be read now (then the id is the path's)."""

    file_id: str
    problem: str | None = None

    @property
    def readable(self) -> bool:
        return self.problem is None


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def path_id(path: Path) -> str:
    return "x" + hashlib.sha256(b"unreadable:" + os.fsencode(path)).hexdigest()[: FILE_ID_HEX - 1]


def _unreadable(path: Path, problem: str) -> Identity:
    return Identity(path_id(path), problem)


def identify(path: Path) -> tuple[Identity, tuple | None]:
    """The content id of ``path`` (SHA-256 of every byte) and the stat key it was read under.

    Never blocks on a FIFO or device: a path that is not a regular file is not read (it is
    opened non-blocking and checked with fstat first). Missing and unreadable paths get an id
    from their path and a problem; they still have a row.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        return _unreadable(path, f"file not found: {path}"), None
    except OSError as exc:
        return _unreadable(path, f"cannot open {path}: {exc.strerror or exc}"), None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return _unreadable(path, f"{_kind(st.st_mode)}, not an audio file: {path}"), None
        h = hashlib.sha256()
        with os.fdopen(os.dup(fd), "rb") as f:
            for block in iter(lambda: f.read(_HASH_BLOCK), b""):
                h.update(block)
        return Identity(h.hexdigest()[:FILE_ID_HEX]), _stat_key(st)
    except OSError as exc:
        return _unreadable(path, f"cannot read {path}: {exc.strerror or exc}"), None
    finally:
        os.close(fd)


def _stat_key(st: os.stat_result) -> tuple:
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)


def content_since(path: Path, stat_key: tuple | None, file_id: str) -> tuple[str | None, tuple | None]:
    """``(None, key)`` while ``path`` still holds ``file_id`` (its stat unchanged since ``stat_key``, or its bytes
    hashed again the same: ``key`` is the stat it holds them under now, so a touched file is hashed once, not at
    every checkpoint); else ``(the id of what it holds now, None)``. A path gone or unreadable now says nothing
    (``(None, stat_key)``): what was read of it is what it held."""
    if stat_key is None:
        return None, None
    try:
        st = os.stat(path)
    except OSError:
        return None, stat_key
    if _stat_key(st) == tuple(stat_key):
        return None, stat_key
    ident, key = identify(path)
    if not ident.readable:
        return None, stat_key
    return (None, key) if ident.file_id == file_id else (ident.file_id, None)


def legacy_fingerprint(path: Path, block: int = 1 << 16) -> str | None:
    """The id podscribe < 0.2 gave a file (size + first and last 64 KiB): to adopt old job dirs' rows."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        h = hashlib.sha1()
        size = os.stat(path).st_size
        with open(path, "rb") as f:
            h.update(str(size).encode())
            h.update(f.read(block))
            if size > block:
                f.seek(max(block, size - block))
                h.update(f.read(block))
        return h.hexdigest()[:16]
    except OSError:
        return None


def _entry(value) -> bool:
    """A record entry as ``remember`` writes it: size, mtime, inode, device, content id. Anything else (a damaged
    or hand-edited record) is left out: that path is hashed again."""
    return (
        isinstance(value, list)
        and len(value) == 5
        and all(isinstance(x, int) and not isinstance(x, bool) for x in value[:4])
        and isinstance(value[4], str)
    )


class Fingerprints:
    """Content ids of a job's inputs, hashed again only when size, mtime or inode changed (git's index
    does the same): a rerun of a 10,000-episode job does not read 10,000 files again.

    Kept in ``<job dir>/fingerprints.json``; a damaged one is ignored (everything is hashed again).
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self.entries: dict[str, list] = {k: v for k, v in read_json_dict(self.path).items() if _entry(v)}
        self.changed = False

    def identify(self, path: Path) -> Identity:
        key = str(path)
        try:
            st = os.stat(path)
            cached = self.entries.get(key)
            if stat.S_ISREG(st.st_mode) and cached and tuple(cached[:4]) == _stat_key(st):
                return Identity(cached[4])
        except OSError:
            pass
        ident, stat_key = identify(path)
        if stat_key is not None:
            self.remember(key, stat_key, ident.file_id)
        return ident

    def known(self, path: Path) -> Identity | None:
        """The id kept for ``path`` where its size, mtime and inode still match; None where only reading every
        byte would tell (`status` while a worker is hashing them: it does not read them all a second time)."""
        cached = self.entries.get(str(path))
        try:
            st = os.stat(path)
        except OSError:
            return None
        if stat.S_ISREG(st.st_mode) and cached and tuple(cached[:4]) == _stat_key(st):
            return Identity(cached[4])
        return None

    def stat_key(self, path: Path, file_id: str) -> tuple | None:
        """The size, mtime, inode and device ``path`` had when it was found to hold ``file_id`` (None: not
        known): what a worker compares with the path as it is later, to see the content change under it."""
        entry = self.entries.get(str(path))
        return tuple(entry[:4]) if entry and entry[4] == file_id else None

    def remember(self, key: str, stat_key: tuple, file_id: str) -> None:
        self.entries[key] = [*stat_key, file_id]
        self.changed = True

    def adopt(self, path: Path, file_id: str) -> None:
        """Map ``path`` to an id of an older scheme that its row already has."""
        try:
            self.remember(str(path), _stat_key(os.stat(path)), file_id)
        except OSError:
            pass

    def save(self) -> None:
        if self.changed:
            atomic_write_bytes(self.path, json.dumps(self.entries, sort_keys=True).encode())
            self.changed = False
