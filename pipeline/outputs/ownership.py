"""Output files beside the inputs (txt, srt, vtt, tsv, json): their names, and who owns them.

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

The record is read and changed under an OS lock (``.podscribe/lock``, flock), so the workers of a job, each
writing a file's outputs as the file finishes, never lose each other's entries. It is two snapshots
(``written.json``, ``sources.json``) and a journal of the changes since them (``journal.jsonl``), one line per
file written or removed, appended and fsynced *before* the file is replaced: a process killed at any moment
leaves a record that knows what is on disk (a write cut short is recorded with both digests, the old and the
new). The journal is folded into the snapshots every ``COMPACT_LINES`` lines, so a file written costs a line, not
the whole record again (an export of 2,000 files encoded and fsynced it 20,000 times). A temporary file a killed
write left behind is removed the next time the folder is written (under the lock, no write is in flight).
Everything lives in one hidden folder: ``ls``, ``datasets`` and globs over the outputs do not see it.

The workers of one job agree on which outputs it writes: ``--subtitles``, ``-o`` and the cue options are
recorded in job.json (``outputs``) while workers are at work; a joining worker must ask for the same ones
(refused with the configuration-mismatch exit code otherwise) or for none (it adopts theirs), and whoever
finishes last writes what is recorded (``spec``, ``join``, ``export.export_recorded``).

Names: an input's stem; stems that occur more than once among a job's inputs get ``-<8 hex of the path's
hash>`` (the same name on every run, said out loud), so no input's files overwrite another's; a stem too long
for a file name with its longest ending (``.new-999.podcast.json`` within 255 bytes) is cut, with the hash.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..facts.errors import ConfigChanged, StorageError
from ..storage.atomic import atomic_write_bytes, atomic_write_many, read_json_dict, temp_prefix, try_flock

log = logging.getLogger("podscribe")

RECORD_DIR = ".podscribe"
RECORD = "written.json"  # name -> digest (or the digests a write cut short may have left: [old, new])
SOURCES = "sources.json"  # name -> [the input path it was written for, its extension]
JOURNAL = "journal.jsonl"  # changes since the snapshots: {"n": name, "d": digest(s) or null, "s": source or null}
COMPACT_LINES = 1000
FLUSH_FILES, FLUSH_BYTES = 500, 32 << 20  # outputs written together (one sync of the file system): memory bound
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
        names[path] = stem if stems[stem] == 1 and not too_long(stem) else _hashed(stem, path)
    return names


def too_long(stem: str) -> bool:
    """A stem whose files' names would pass the file system's 255 bytes (with ``.new-999.podcast.json``)."""
    return len(os.fsencode(stem)) > MAX_STEM_BYTES


def _hashed(stem: str, path: str) -> str:
    """``stem-<hash8 of path>``, the stem cut (at a character) so that the whole fits ``MAX_STEM_BYTES``."""
    suffix = f"-{_path_hash(path)}"
    while len(os.fsencode(stem + suffix)) > MAX_STEM_BYTES:
        stem = stem[:-1]
    return stem + suffix


def _path_hash(path: str) -> str:
    return hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:8]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _accepted(value) -> set[str]:
    """The digests a record entry accepts as podscribe's own: one, or those a write cut short may have left."""
    if isinstance(value, str):
        return {value}
    return {v for v in value if isinstance(v, str)} if isinstance(value, list) else set()


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


class _Record:
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
        return digest is not None and digest in _accepted(self.digests.get(name))

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
            writer = Writer(self.folder, _Record(self.folder), self.durable)
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
                digest = _file_digest(target)
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
                digest = _file_digest(target)
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
    record: _Record
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
                if not _this_name_only(cause):
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
        other = f"{_hashed(name[: -len(ext) - 1], path)}.{ext}"
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
        digest = _digest(data)
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
        return _file_digest(path)

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
    record = _Record(Path(folder))
    return Recorded(
        {name: _accepted(value) for name, value in record.digests.items()},
        {key: set(names) for key, names in record.names_of.items() if names},
    )


def own_digests(folder: Path) -> dict[str, set[str]]:
    """Per file name in ``folder``, the digests podscribe may have left there (its record and journal, read as they
    stand): a file holding none of them is a person's (the site offers it as edited)."""
    return recorded(folder).digests


def _file_digest(path: Path) -> str | None:
    """The SHA-256 of what is at ``path`` now (None: nothing; a folder is a digest no write gives)."""
    try:
        return _digest(path.read_bytes())
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        return "a folder"


def _this_name_only(cause: BaseException | None) -> bool:
    """A write that failed for its own name (too long, a folder of that name), not for the folder or disk."""
    return isinstance(cause, OSError) and cause.errno in (errno.ENAMETOOLONG, errno.EISDIR, errno.ENOTDIR)


# -- the outputs the workers of a job agree on (job.json "outputs") ------------------------------------------------


def spec(subtitles: list[str], output_dir: Path | None, rules) -> dict | None:
    """The output options of one run (None: it asks for no subtitles)."""
    if not subtitles:
        return None
    return json.loads(  # as job.json gives it back (tuples as lists), so that equal options compare equal
        json.dumps(
            {
                "subtitles": sorted(subtitles),
                "output_dir": str(Path(output_dir).absolute()) if output_dir else None,
                "cue_rules": asdict(rules),
            }
        )
    )


def join(recorded: dict | None, mine: dict | None, root: Path) -> dict | None:
    """The outputs of a job that a worker joins: theirs and this one's must agree (or one side asks for none)."""
    if recorded is None or mine is None or recorded == mine:
        return recorded or mine
    differ = [key for key in ("subtitles", "output_dir", "cue_rules") if recorded.get(key) != mine.get(key)]
    names = {"subtitles": "--subtitles", "output_dir": "-o/--output-dir", "cue_rules": "the cue options"}
    raise ConfigChanged(
        f"the workers at work on {root} write {', '.join(recorded['subtitles'])} into "
        f"{recorded['output_dir'] or root / 'subtitles'}; this run asks for other outputs "
        f"({', '.join(names[k] for k in differ)}). Join them with the same options (or none), or run again "
        "when they have finished."
    )


def folder(root: Path, recorded: dict) -> Path:
    return Path(recorded["output_dir"]) if recorded.get("output_dir") else Path(root) / "subtitles"
