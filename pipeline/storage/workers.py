"""Who works on what in a job directory: several workers, one commit log.

Any number of worker processes (one machine or many, on shared POSIX storage) may run one job:
- a worker registers itself in ``workers/<host>-<pid>.lock`` and holds an OS lock on it for as long
  as it lives (status counts the live ones; the OS drops the lock of a worker that died);
- a worker decodes a file only while it holds ``claims/<file_id>.lock`` (taken without waiting: a
  file held by another worker is skipped for now), and it reads the file's row again after claiming,
  because another worker may have finished it in between; it takes the lock of the next group of files
  before reading their audio ahead (``hold``: not counted until their decoding starts), so no two workers
  read one file;
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
import errno
import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..facts.errors import DamagedState, StorageError
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
    """An open descriptor holding ``path``'s exclusive lock, or None when another process holds it. Something
    else in a lock's place (a plain file where ``workers/`` or ``claims/`` should be, a folder named like a lock)
    is damaged state, said as such; a read-only or full disk is a storage error."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            wrong = path if path.is_dir() else next((p for p in path.parents if p.exists() and not p.is_dir()), path)
            raise DamagedState(
                f"{wrong} is in the way of the job's locks ({exc.strerror}): podscribe keeps a "
                f"{'lock file' if wrong == path else 'folder of locks'} there; move it away and rerun"
            ) from exc
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc
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
            if stale != self.path and stale.is_file() and not _held(stale):
                stale.unlink(missing_ok=True)  # a worker that died
        self.fd = _lock_file(self.path)
        os.pwrite(self.fd, json.dumps({"worker": worker_name()}).encode(), 0)
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            self.path.unlink(missing_ok=True)
            os.close(self.fd)
            self.fd = None


class Planning:
    """This process planning a job (hashing new inputs, probing them), said while it lasts: ``workers/<host>-
    <pid>.planning`` holds what it is at ({"worker", "phase", "done", "total"}) under a lock held for as long as
    it plans, so `status` says the job is being planned, not "0.00 h left, ETA unknown", and a planner that
    died (its lock dropped by the OS) is not taken for one at work. Lines go to ``say`` from a thread of its
    own (one slow file, hashed or probed, does not silence it): none for a plan quicker than ``SAY_AFTER_S``
    (a rerun over known inputs), then one every ``SAY_EVERY_S`` (a first run over 2,000 new files plans for
    minutes)."""

    SAY_AFTER_S = 2.0
    SAY_EVERY_S = 10.0
    TICK_S = 0.5

    def __init__(self, root: Path, say=None):
        self.path = Path(root) / "workers" / f"{socket.gethostname()}-{os.getpid()}.planning"
        self.say = say
        self.fd: int | None = None
        self.phase, self.done, self.total = "", 0, 0
        self.since = 0.0  # when this phase began (monotonic)
        self.said = None  # when the last line was said in this phase (None: none yet)
        self.ended = threading.Event()
        self.ticker: threading.Thread | None = None
        self.lock = threading.Lock()

    def __enter__(self) -> Planning:
        for stale in self.path.parent.glob("*.planning") if self.path.parent.is_dir() else ():
            if stale != self.path and stale.is_file() and not _held(stale):
                stale.unlink(missing_ok=True)  # a planner that died
        self.fd = _lock_file(self.path)
        self.since = time.monotonic()
        self._write()
        self.ticker = threading.Thread(target=self._tick, name="planning", daemon=True)
        self.ticker.start()
        return self

    def step(self, phase: str, done: int, total: int) -> None:
        """``done`` of ``total`` inputs through ``phase`` ("content ids", "ffprobe")."""
        with self.lock:
            if phase != self.phase:
                self._said_done()
                self.phase, self.since, self.said = phase, time.monotonic(), None
            self.done, self.total = done, total

    def _tick(self) -> None:
        while not self.ended.wait(self.TICK_S):
            with self.lock:
                self._write()
                now = time.monotonic()
                if self.say is None or not self.phase or now - self.since < self.SAY_AFTER_S:
                    continue
                if self.said is None:
                    self.say(f"reading {self.total:,} inputs ({self.phase}) before decoding: {self.done:,} done ...")
                    self.said = now
                elif now - self.said >= self.SAY_EVERY_S:
                    self.say(f"reading inputs ({self.phase}): {self.done:,} of {self.total:,} ...")
                    self.said = now

    def _said_done(self) -> None:
        if self.said is not None and self.say is not None:
            self.say(f"read {self.total:,} inputs ({self.phase}) in {time.monotonic() - self.since:.0f} s")
        self.said = None

    def _write(self) -> None:
        if self.fd is None:
            return
        record = {"worker": worker_name(), "phase": self.phase, "done": self.done, "total": self.total}
        data = json.dumps(record).encode()
        with contextlib.suppress(OSError):  # what status shows, best effort
            os.pwrite(self.fd, data, 0)
            os.ftruncate(self.fd, len(data))

    def __exit__(self, *exc) -> None:
        """Planning is over (every file probed, or the run ended): said, its record gone. Idempotent."""
        self.ended.set()
        if self.ticker is not None:
            self.ticker.join()
            self.ticker = None
        with self.lock:
            self._said_done()
            if self.fd is not None:
                self.path.unlink(missing_ok=True)
                os.close(self.fd)
                self.fd = None


def planning(root: Path) -> list[dict]:
    """What the workers planning the job now are at (Planning's records; a planner that died is not listed)."""
    folder = Path(root) / "workers"
    found = []
    for path in sorted(folder.glob("*.planning")) if folder.is_dir() else ():
        if not _held(path):
            continue
        try:
            record = json.loads(path.read_text() or "{}")
        except (OSError, ValueError):
            record = {}
        found.append(record if isinstance(record, dict) else {})
    return found


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


def hold(root: Path, file_id: str) -> int | None:
    """The file's claim lock taken without waiting and not counted yet (None when another worker holds it): a
    worker holds the next group of files before it reads their audio ahead (schedule.py), so two workers never
    both read one file, and a death while it only holds them counts against none of them. ``claim(...,
    held=fd)`` counts it when its decoding starts; ``os.close(fd)`` lets it go."""
    return _lock_file(Path(root) / "claims" / f"{file_id}.lock")


def claim(root: Path, file_id: str, persisted_batches: int, held: int | None = None) -> Claim | None:
    """Take a file without waiting; None when another worker holds it. The claim is counted on disk
    before any decoding, so a death during it is seen by the next claim. ``persisted_batches``: how
    many checkpoints the file has now; more than at the last witnessed death means the file moved on,
    and the witnessed count starts again. ``held``: the descriptor ``hold`` gave for it (already locked)."""
    root = Path(root)
    fd = held if held is not None else _lock_file(root / "claims" / f"{file_id}.lock")
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
