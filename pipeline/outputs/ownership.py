"""Output files beside the inputs (txt, srt, vtt, tsv, json): who owns them.

A person edits a transcript; no run may throw that work away. So every output file podscribe writes is recorded
in its folder (``.podscribe/``: name -> SHA-256 of the bytes written, and the input path it was written for), and
a file is only ever replaced when its content is still what podscribe last wrote there:

- absent, or podscribe's own and unchanged since: written (replaced);
- already holding exactly the new content: left as it is (counted as up to date, not as written);
- changed since podscribe wrote it (edited), or never written by podscribe (another tool's, or the record
  lost): kept. If podscribe has something new to say (the content differs from what it last wrote there),
  it goes to ``NAME.new.EXT`` (``NAME.new-2.EXT``, ... if that one was edited too), and the run says so;
- written for another input (another job writing into the same folder, ``b/ep.wav`` where ``a/ep.wav``'s
  ``ep.txt`` is): never taken over; this input's files get its collision name (``ep-<hash8>.txt``), said out loud.

Every path that removes or replaces an output goes through this rule: a file's outputs as it finishes, the job's
at its end, ``export``, an input whose name changed (``_drop_renamed``), ``--restart`` (``remove_own``: only
what podscribe wrote and nobody changed).

The record of what podscribe wrote in a folder: ``record.py``; output names: ``names.py``; the outputs a job's
workers agree on: ``agreed.py``.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..facts.errors import StorageError
from ..storage.atomic import atomic_write_many, temp_prefix, try_flock
from .names import hashed
from .record import RECORD_DIR, Record, file_digest
from .record import digest as content_digest

log = logging.getLogger("podscribe")

FLUSH_FILES, FLUSH_BYTES = 500, 32 << 20  # outputs written together (one sync of the file system): memory bound


@dataclass
class Written:
    """What writing the outputs did: every output file as it now stands (written now, or ``up_to_date``
    already), the files kept because a person changed them, each with where the new content went (None: nothing
    new), and the outputs that could not be written for their own name (``skipped``, described)."""

    paths: list[Path] = field(default_factory=list)
    kept: list[tuple[Path, Path | None]] = field(default_factory=list)
    up_to_date: set[Path] = field(default_factory=set)
    skipped: list[str] = field(default_factory=list)
    _seen: set = field(default_factory=set, repr=False, compare=False)

    def note(self, path: Path | None, kept: tuple[Path, Path | None] | None = None, up_to_date: bool = False) -> None:
        if path is not None and path not in self._seen:
            self._seen.add(path)
            self.paths.append(path)
        if up_to_date:
            self.up_to_date.add(path)
        if kept is not None and kept not in self._seen:
            self._seen.add(kept)
            self.kept.append(kept)

    def add(self, other: Written) -> None:
        for path in other.paths:
            self.note(path, up_to_date=path in other.up_to_date)
        for kept in other.kept:
            self.note(None, kept)
        self.skipped += other.skipped

    @property
    def fresh(self) -> int:
        """How many files were written now (the others were up to date)."""
        return len(self.paths) - len(self.up_to_date)


class OutputDir:
    """One folder of output files and its record of what podscribe wrote there."""

    def __init__(self, folder: Path, durable: bool = True):
        self.folder = Path(os.path.abspath(folder))  # one name per file, however the folder was given (-o subs/)
        self.durable = durable  # False: no syncs (a folder synced and moved into place whole afterwards: a site)

    @contextlib.contextmanager
    def _locked(self):
        lock = self.folder / RECORD_DIR / "lock"
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError:  # a folder we cannot lock in: atomic_write_bytes reports the real problem
            yield
            return
        try:
            while not try_flock(fd):
                time.sleep(0.02)
            yield
        finally:
            os.close(fd)  # drops the lock

    @contextlib.contextmanager
    def open(self):
        """The folder held for a series of writes (an export): locked, its record read, once; the files written in
        batches (``Writer.flush``), the last one as it closes."""
        with self._locked():
            writer = Writer(self.folder, Record(self.folder), self.durable)
            try:
                writer.remove_stale_temporaries()
                yield writer
                writer.flush()
            finally:
                writer.record.close()

    def write(
        self,
        files: dict[str, bytes],
        problems: list[str] | None = None,
        sources: dict[str, tuple[str, str]] | None = None,
    ) -> Written:
        """``Writer.write`` in a hold of its own."""
        with self.open() as writer:
            return writer.write(files, problems, sources)

    def remove_own(self) -> list[Path]:
        """``--restart``: the files podscribe wrote here that nobody changed since, removed; the ones a person
        changed are kept (returned), and stay recorded as changed, so what the job writes again goes beside them."""
        if not (self.folder / RECORD_DIR).is_dir():
            return []
        kept = []
        with self.open() as writer:
            for name in sorted(writer.record.digests):
                target = self.folder / name
                digest = file_digest(target)
                if digest is not None and not writer.record.owns(name, digest):
                    kept.append(target)
                    continue
                with contextlib.suppress(FileNotFoundError):
                    target.unlink()
                writer.record.change(name, None)
        return kept

    def remove_others(self, keep: set[str]) -> list[Path]:
        """Remove the files podscribe wrote here that are not in ``keep`` (names inside the folder) and still hold
        what it wrote; return those a person changed since (kept, and no longer recorded as podscribe's)."""
        kept = []
        with self.open() as writer:
            for name in sorted(set(writer.record.digests) - keep):
                target = self.folder / name
                digest = file_digest(target)
                if digest is not None and not writer.record.owns(name, digest):
                    kept.append(target)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        target.unlink()
                writer.record.change(name, None)
        return kept


@dataclass
class Writer:
    """The outputs of one folder written under its lock (``OutputDir.open``)."""

    folder: Path
    record: Record
    durable: bool = True  # False: the batches written without syncs (OutputDir's durable)
    _said: set = field(default_factory=set)  # paths whose other name was said already
    _pending: dict[Path, tuple[bytes, str]] = field(default_factory=dict)  # to write at the next flush
    _pending_bytes: int = 0

    def write(
        self,
        files: dict[str, bytes],
        problems: list[str] | None = None,
        sources: dict[str, tuple[str, str]] | None = None,
    ) -> Written:
        """Write ``{file name: content}`` into the folder by the rule above. A file that cannot be written for
        its own name (a folder of that name's .new too, a name the file system refuses) is skipped and described
        in ``problems`` (and ``skipped``); a full disk or a read-only folder stops the write (every output would
        fail).

        ``sources``: per file name, the input path it is written for and its extension. A name written for
        another input path is not taken over (the input's collision name instead). A file written earlier for
        that path and extension under another name (the input's name changed: another input with its stem joined
        the job) is gone afterwards, unless a person changed it (then it is kept, and listed in ``kept``)."""
        done = Written()
        written: list[tuple[str, tuple[str, str]]] = []
        for name, data in files.items():
            source = (sources or {}).get(name)
            if source is not None:
                name = self._name_for(name, source)
            try:
                target, kept, up_to_date = self._one(name, data, source)
            except (StorageError, OSError) as exc:
                cause = exc.__cause__ if isinstance(exc, StorageError) else exc
                if not this_name_only(cause):
                    if isinstance(exc, StorageError):
                        raise
                    raise StorageError(f"cannot read {self.folder / name}: {exc.strerror or exc}") from exc
                problem = f"{self.folder / name} cannot be written ({cause.strerror}): skipped; the others are written"
                log.warning("%s", problem)
                done.skipped.append(problem)
                if problems is not None:
                    problems.append(problem)
                continue
            done.note(target, kept, up_to_date)
            if source is not None:
                written.append((name, source))
        for name, (path, ext) in written:  # an output not written (its name refused) leaves older files be
            self._drop_renamed(name, path, ext, sorted(self.record.names_of.get((path, ext), ())), done)
        return done

    def _name_for(self, name: str, source: tuple[str, str]) -> str:
        """``name``, unless a file of that name here was written for another input: then this input's collision
        name (another job writing into this folder must not take over the first one's files)."""
        owner = self.record.source(name)
        if owner is None or owner[0] == source[0] or not (self.folder / name).exists():
            return name
        path, ext = source
        other = f"{hashed(name[: -len(ext) - 1], path)}.{ext}"
        if path not in self._said:
            self._said.add(path)
            log.warning(
                "%s here was written for %s (another job, or an input this job no longer has): the files of %s "
                "are named %s.*",
                self.folder / name,
                owner[0],
                path,
                other[: -len(ext) - 1],
            )
        return other

    def _drop_renamed(self, name: str, path: str, ext: str, names: list[str], done: Written) -> None:
        """The files written for ``path`` (extension ``ext``; ``names``: every name recorded for it) under a name
        it no longer has: removed where they still hold what podscribe wrote; kept where a person changed them."""
        stem = name[: -len(ext) - 1]
        current = {name, f"{stem}.new.{ext}"}
        for old in names:
            if self.record.source(old) != [path, ext] or old in current or old.startswith(f"{stem}.new-"):
                continue
            target = self.folder / old
            digest = self._on_disk(target)
            if digest is not None and not self.record.owns(old, digest):
                log.warning("%s was written for %s, now named %s, and changed since: kept", target, path, name)
                self.record.change(old, self.record.digests.get(old), None)  # no longer that input's name
                done.note(None, (target, self.folder / name))
                continue
            with contextlib.suppress(FileNotFoundError):
                target.unlink()  # first: a kill before the record says so leaves a name recorded for nothing
            self.record.change(old, None)
            if digest is not None:
                log.info("removed %s: %s is now named %s", target, path, name)

    def _one(self, name: str, data: bytes, source) -> tuple[Path, tuple[Path, Path | None] | None, bool]:
        """(the file as it now stands, (kept, new) when a person's file was kept, whether it was up to date)."""
        target = self.folder / name
        digest = content_digest(data)
        current = self._on_disk(target)
        owner = list(source) if source is not None else ...
        if current == digest:
            self.record.change(name, digest, owner)
            return target, None, True
        if current is None or self.record.owns(name, current):
            self._replace(target, data, digest, current, owner)
            return target, None, False
        # changed since podscribe wrote it, or not podscribe's: kept
        if self.record.owns(name, digest):  # nothing new to say: the person's version stands
            return target, (target, None), False
        stem, dot, ext = name.rpartition(".")
        for n in range(1, 1000):
            alt_name = f"{stem}.new{'' if n == 1 else f'-{n}'}{dot}{ext}"
            alt = self.folder / alt_name
            alt_current = self._on_disk(alt)
            if alt_current in (None, digest) or self.record.owns(alt_name, alt_current):
                if alt_current != digest:
                    self._replace(alt, data, digest, alt_current, owner)
                else:
                    self.record.change(alt_name, digest, owner)
                log.warning(
                    "%s was changed since podscribe wrote it (or is not podscribe's): kept; new: %s", target, alt
                )
                return alt, (target, alt), alt_current == digest
        raise RuntimeError(f"no free name for a new version of {target}")

    def _on_disk(self, path: Path) -> str | None:
        """The digest of what is at ``path`` (a write of it still pending is made first)."""
        if path in self._pending:
            self.flush()
        return file_digest(path)

    def _replace(self, target: Path, data: bytes, digest: str, current: str | None, owner) -> None:
        """The record first (both digests while the write is in flight), then the file, atomically, with the
        others of its batch."""
        self.record.change(self._name(target), digest if current is None else [current, digest], owner)
        self._pending[target] = (data, digest)
        self._pending_bytes += len(data)
        if len(self._pending) >= FLUSH_FILES or self._pending_bytes >= FLUSH_BYTES:
            self.flush()

    def _name(self, target: Path) -> str:
        """A file's name in the record: its path inside the folder (a site's ``e/NAME.html``)."""
        return target.relative_to(self.folder).as_posix()

    def flush(self) -> None:
        """The files decided so far written (one sync of the file system for all of them, after the journal
        lines that name them)."""
        if not self._pending:
            return
        atomic_write_many([(target, data) for target, (data, _) in self._pending.items()], self.durable)
        for target, (_, digest) in self._pending.items():
            self.record.settle(self._name(target), digest)
        self._pending.clear()
        self._pending_bytes = 0

    def remove_stale_temporaries(self) -> None:
        """The temporary files of writes a killed process left (``atomic_write_bytes``'s ``.NAME.*.tmp``): under
        the folder's lock no write is in flight, so each one of a name podscribe writes here is stale. Names may be
        paths inside the folder (a site's ``e/ep.html``): each folder they are in is looked at."""
        prefixes: dict[str, set[str]] = {}
        for name in self.record.digests:
            parent, _, base = name.rpartition("/")
            prefixes.setdefault(parent, set()).add(temp_prefix(base))
        for parent, known in prefixes.items():
            folder = self.folder / parent if parent else self.folder
            try:
                found = [e.name for e in os.scandir(folder) if e.name.startswith(".") and e.name.endswith(".tmp")]
            except OSError:
                continue
            for name in found:
                if name[: -len("XXXXXXXX.tmp")] in known:
                    with contextlib.suppress(OSError):
                        os.unlink(folder / name)


def this_name_only(cause: BaseException | None) -> bool:
    """A write that failed for its own name (too long, a folder of that name), not for the folder or disk."""
    return isinstance(cause, OSError) and cause.errno in (errno.ENAMETOOLONG, errno.EISDIR, errno.ENOTDIR)
