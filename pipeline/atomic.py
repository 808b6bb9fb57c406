"""Files written whole, records read leniently, locks the OS drops: the primitives every file of a job dir is
kept with.

A write goes to a temp file in the same folder, is fsynced, renamed over the old file, and the folder is fsynced:
a crash or a full disk leaves the old file or the new one, never half of one. JSON records that are caches
(fingerprints, probes, outputs written, rates) are read leniently: a damaged one reads as empty and is rebuilt.
Locks are flock's, held per open file and dropped by the OS when the holder dies.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from pathlib import Path

from .errors import StorageError

__all__ = ["atomic_write_bytes", "read_json_dict", "try_flock"]


@functools.cache
def _file_mode() -> int:
    """What open() would give a new file here: 0o666 less the process umask (mkstemp alone gives 0600).

    Read once: setting the umask to read it is not thread-safe."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """temp file in the same folder → fsync → rename → fsync the folder; mode from the umask.

    A failed write (disk full, read-only, permissions) leaves the old file as it was, no temp
    file behind, and raises StorageError naming the path.
    """
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), _file_mode())
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
        _fsync_dir(path.parent)
    except OSError as exc:
        raise StorageError(
            f"cannot write {path}: {exc.strerror or exc}; free space or fix permissions, "
            "then rerun the same command: it resumes where it stopped"
        ) from exc
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def read_json_dict(path: Path) -> dict:
    """The JSON object in ``path``, or ``{}`` where the file is missing, unreadable, damaged or holds something
    else: for the job dir's caches and records that are rebuilt rather than trusted (fingerprints, probes,
    outputs, rates)."""
    try:
        loaded = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _fsync_dir(folder: Path) -> None:
    if not hasattr(os, "O_DIRECTORY"):  # Windows cannot open a folder; the rename is what matters there
        return
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def try_flock(fd: int, shared: bool = False) -> bool:
    """Take the lock of an open file without waiting; False when another process holds it.

    flock: held per open file, dropped by the OS when the holder closes it or dies."""
    try:
        import fcntl
    except ImportError:  # Windows: msvcrt's lock is per process too (no shared mode: taken exclusive)
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
