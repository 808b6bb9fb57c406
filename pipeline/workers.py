"""Who works on what in a job directory: several workers, one commit log.

Any number of worker processes (one machine or many, on shared POSIX storage) may run one job:
- a worker registers itself in ``workers/<host>-<pid>.lock`` and holds an OS lock on it for as long
  as it lives (status counts the live ones; the OS drops the lock of a worker that died);
- a worker decodes a file only while it holds ``claims/<file_id>.lock`` (taken without waiting: a
  file held by another worker is skipped for now), and it reads the file's row again after claiming,
  because another worker may have finished it in between;
- each claim is counted in ``claims/<file_id>.json``. A claim that ends in any way the process lives
  through (done, failed, Ctrl-C, a full disk) takes its count back; a process that dies (SIGKILL, the
  OOM killer, a segfault in a native library, a reboot, SIGHUP) leaves it.

A death left on a claim is no evidence against the file: the whole run may have died (a laptop lid, a
scheduler's time limit), not one worker among others. It only makes the file a suspect: it is decoded
last, alone, in a child process its worker watches (isolate.py). Only a death the worker *sees* — that
child dying while the worker lives, without saving a new batch — counts against the file
(``witnessed``), and ``max_attempts`` of those in a row make it a failed row, its checkpoints kept.

flock is what makes this work: local disks, NFSv4 and CephFS have it; object stores do not.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from .atomic import atomic_write_bytes, try_flock

MAX_ATTEMPTS = 3  # watched deaths of a file decoded alone, in a row without a new batch, that fail it


def worker_name() -> str:
    """How rows and status name this process: host and pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _held(path: Path) -> bool:
    """Whether a live process holds the lock of ``path`` (taken and dropped at once when free)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        return not try_flock(fd, shared=True)
    finally:
        os.close(fd)  # closing drops a lock taken here


def _lock_file(path: Path) -> int | None:
    """An open descriptor holding ``path``'s exclusive lock, or None when another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    if try_flock(fd):
        return fd
    os.close(fd)
    return None


class Registration:
    """This process as a worker of a job: a held lock file in ``workers/``, gone when it ends."""

    def __init__(self, root: Path):
        self.folder = Path(root) / "workers"
        self.path = self.folder / f"{socket.gethostname()}-{os.getpid()}.lock"
        self.fd: int | None = None

    def __enter__(self) -> Registration:
        for stale in self.folder.glob("*.lock") if self.folder.is_dir() else ():
            if stale != self.path and not _held(stale):
                stale.unlink(missing_ok=True)  # a worker that died
        self.fd = _lock_file(self.path)
        os.pwrite(self.fd, json.dumps({"worker": worker_name()}).encode(), 0)
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            self.path.unlink(missing_ok=True)
            os.close(self.fd)
            self.fd = None


def live_workers(root: Path, besides: Path | None = None) -> list[str]:
    """Names of the workers alive on this job now (``besides``: a registration to leave out)."""
    folder = Path(root) / "workers"
    names = []
    for path in sorted(folder.glob("*.lock")) if folder.is_dir() else ():
        if path != besides and _held(path):
            names.append(path.stem)
    return names


def held_claims(root: Path) -> list[str]:
    """File ids being decoded now by some worker."""
    folder = Path(root) / "claims"
    return [p.stem for p in sorted(folder.glob("*.lock")) if _held(p)] if folder.is_dir() else []


@dataclass
class Claim:
    """A file held by this worker, with how many processes died on it before (in a row, without progress):
    ``deaths`` in all (any death: suspect), ``witnessed`` of them seen by a worker that lived (evidence)."""

    root: Path
    file_id: str
    fd: int
    deaths: int
    record: dict
    witnessed: int = 0

    @property
    def counter(self) -> Path:
        return self.root / "claims" / f"{self.file_id}.json"

    def finish(self) -> None:
        """The file has its row (done or failed): its count is over."""
        self.counter.unlink(missing_ok=True)

    def give_back(self) -> None:
        """Ended without dying (a clean stop, a full disk): this claim does not count as a death."""
        self._write(self.deaths)

    def died_alone(self, persisted_batches: int) -> int:
        """The child decoding this file alone died while this worker lived: one witnessed death, or the first of
        a new series when it saved a batch first. Returns the witnessed deaths in a row at the same place."""
        same = persisted_batches == self.record["persisted"]
        self.witnessed = self.witnessed + 1 if same else 1
        self.deaths += 1
        self.record = {**self.record, "persisted": persisted_batches}
        self._write(self.deaths + 1)  # the claim goes on (another try): counted as ever
        return self.witnessed

    def _write(self, attempts: int) -> None:
        record = {**self.record, "attempts": attempts, "witnessed": self.witnessed}
        try:
            atomic_write_bytes(self.counter, json.dumps(record).encode())
        except BaseException:
            if attempts <= self.deaths:  # taking a count back failed (a full disk): no count beats a false one
                with contextlib.suppress(OSError):
                    self.counter.unlink()
            raise

    def release(self) -> None:
        os.close(self.fd)


def claim(root: Path, file_id: str, persisted_batches: int) -> Claim | None:
    """Take a file without waiting; None when another worker holds it. The claim is counted on disk
    before any decoding, so a death during it is seen by the next claim. ``persisted_batches``: how
    many checkpoints the file has now; more than at the last witnessed death means the file moved on,
    and the witnessed count starts again."""
    root = Path(root)
    fd = _lock_file(root / "claims" / f"{file_id}.lock")
    if fd is None:
        return None
    counter = root / "claims" / f"{file_id}.json"
    try:
        before = json.loads(counter.read_text())
        if not isinstance(before, dict):
            before = {}
    except (OSError, ValueError):
        before = {}
    deaths = _count(before, "attempts")  # any death makes a suspect, before or after a saved batch
    witnessed = _count(before, "witnessed") if before.get("persisted") == persisted_batches else 0
    record = {"persisted": persisted_batches, "worker": worker_name()}
    try:
        atomic_write_bytes(counter, json.dumps({**record, "attempts": deaths + 1, "witnessed": witnessed}).encode())
    except BaseException:
        os.close(fd)
        raise
    return Claim(root, file_id, fd, deaths, record, witnessed)


def _count(record: dict, key: str) -> int:
    value = record.get(key, 0)
    return value if isinstance(value, int) and value >= 0 else 0


def suspect(root: Path, file_id: str) -> bool:
    """Whether a process died on this file (or holds it now), read without claiming it."""
    try:
        before = json.loads((Path(root) / "claims" / f"{file_id}.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(before, dict) and _count(before, "attempts") > 0


def forget_counts(root: Path, file_ids: set[str] | None = None) -> None:
    """Clear death counts (--restart: all; --retry-failed: the failed files retried)."""
    folder = Path(root) / "claims"
    for path in folder.glob("*.json") if folder.is_dir() else ():
        if file_ids is None or path.stem in file_ids:
            with contextlib.suppress(OSError):
                path.unlink()
