"""Files written whole, records read leniently, locks the OS drops: the primitives every file of a job dir is
kept with.

A write goes to a temp file in the same folder, is fsynced, renamed over the old file, and the folder is fsynced:
a crash or a full disk leaves the old file or the new one, never half of one (many files at once: the file system
synced once for all of them, ``atomic_write_many``). JSON records that are caches
(fingerprints, probes, outputs written, rates) are read leniently: a damaged one reads as empty and is rebuilt.
Locks are flock's, held per open file and dropped by the OS when the holder dies.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..facts.errors import StorageError

__all__ = ["atomic_write_bytes", "atomic_write_many", "read_json_dict", "temp_prefix", "try_flock"]


@functools.cache
def _file_mode() -> int:
    """What open() would give a new file here: 0o666 less the process umask (mkstemp alone gives 0600).

    Read once: setting the umask to read it is not thread-safe."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def temp_prefix(name: str) -> str:
    """The start of the temporary name a write of ``name`` uses (``.NAME.`` + 8 random characters + ``.tmp``): a
    name near the file system's 255 bytes gets a fixed-length one instead (``.NAME.`` made its temporary name 14
    bytes too long, and the output could not be written at all)."""
    prefix = f".{name}."
    if len(os.fsencode(prefix)) + len("XXXXXXXX.tmp") <= 255:
        return prefix
    return f".{hashlib.sha256(os.fsencode(name)).hexdigest()[:16]}."


def atomic_write_bytes(path: Path, data: bytes, durable: bool = True) -> None:
    """temp file in the same folder → fsync → rename → fsync the folder; mode from the umask.

    A failed write (disk full, read-only, permissions) leaves the old file as it was, no temp
    file behind, and raises StorageError naming the path. ``durable=False`` leaves out the fsyncs (the
    file is still whole or absent to readers): for a folder that is synced and renamed into place as a
    whole afterwards (a new site, pipeline/browse/site), where thousands of fsyncs would be most of the time.
    """
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temp_prefix(path.name), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), _file_mode())
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
        if durable:
            _fsync_dir(path.parent)
    except OSError as exc:
        raise _cannot_write(path, exc) from exc
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def atomic_write_many(files: list[tuple[Path, bytes]], durable: bool = True) -> None:
    """Many files written whole at once: each to a temp file beside it, the file system synced once (not each
    file: an export of 10,000 outputs spent its time in 20,000 fsyncs), then each renamed into place and the
    file system synced again (the renames). A crash leaves, for each file, the old one or the new one, never half
    of one; a failure raises StorageError naming the path and leaves no temp file (files renamed before it stay
    new). ``durable=False``: no syncs (``atomic_write_bytes``'s)."""
    temps: list[tuple[str | None, Path]] = []
    path = None

    def temporary(item: tuple[Path, bytes]) -> tuple[str, Path] | OSError:
        path, data = Path(item[0]), item[1]
        try:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temp_prefix(path.name), suffix=".tmp")
        except OSError as exc:
            exc.filename = exc.filename or str(path)
            return exc
        try:
            with os.fdopen(fd, "wb") as f:
                os.fchmod(f.fileno(), _file_mode())
                f.write(data)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            return exc
        return tmp, path

    try:
        for folder in {Path(p).parent for p, _ in files}:
            path = folder
            folder.mkdir(parents=True, exist_ok=True)
        # A few at a time: creating a file is a wait on the file system (the GIL is let go), most of the cost here.
        with ThreadPoolExecutor(max_workers=8) as pool:
            made = list(pool.map(temporary, files))
        temps = [x for x in made if not isinstance(x, OSError)]
        failed = next(((item[0], x) for item, x in zip(files, made) if isinstance(x, OSError)), None)
        if failed is not None:
            path = failed[0]
            raise failed[1]
        if not temps:
            return
        if durable:
            _sync_file_system(temps[0][1].parent)
        for done, (tmp, path) in enumerate(list(temps)):
            os.replace(tmp, path)
            temps[done] = (None, path)
        temps = []
        for folder in {Path(p).parent for p, _ in files} if durable else ():
            _fsync_dir(folder)
    except OSError as exc:
        raise _cannot_write(path, exc) from exc
    finally:
        for tmp, _ in temps:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)


def _sync_file_system(folder: Path) -> None:
    """Everything written on ``folder``'s file system on disk: Linux's syncfs (that file system only), else sync."""
    try:
        import ctypes

        syncfs = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):  # not Linux
        os.sync()
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        if syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(folder))
    finally:
        os.close(fd)


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


def _cannot_write(path, exc: OSError) -> StorageError:
    """What a write that failed says, wherever it failed (one file or many)."""
    return StorageError(
        f"cannot write {path}: {exc.strerror or exc}; free space or fix permissions, "
        "then rerun the same command: it resumes where it stopped"
    )
