"""Output files beside the inputs (txt, srt, vtt, tsv, json): their names, and who owns them.

A person edits a transcript; the next run must not throw that work away. So every output file podscribe
writes is recorded in its folder (``.podscribe/written.json``: name -> SHA-256 of the bytes written), and a
file is only ever replaced when its content is still what podscribe last wrote there:

- absent, or podscribe's own and unchanged since: written (replaced);
- already holding exactly the new content: left as it is;
- changed since podscribe wrote it (edited), or never written by podscribe (another tool's, or the record
  lost): kept. If podscribe has something new to say (the content differs from what it last wrote there),
  it goes to ``NAME.new.EXT`` (``NAME.new-2.EXT``, ... if that one was edited too), and the run says so.

The record is read and written under an OS lock (``.podscribe/lock``, flock), so the workers of a job, each
writing a file's outputs as the file finishes, never lose each other's entries. Everything lives in one
hidden folder: ``ls``, ``datasets`` and globs over the outputs do not see it.

The workers of one job agree on which outputs it writes: ``--subtitles``, ``-o`` and the cue options are
recorded in job.json (``outputs``) while workers are at work; a joining worker must ask for the same ones
(refused with the configuration-mismatch exit code otherwise) or for none (it adopts theirs), and whoever
finishes last writes what is recorded (``spec``, ``join``, ``export_recorded``).

Names: an input's stem; stems that occur more than once among a job's inputs get ``-<8 hex of the path's
hash>`` (the same name on every run, said out loud), so no input's files overwrite another's.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .atomic import atomic_write_bytes, read_json_dict, try_flock
from .errors import ConfigChanged, StorageError

log = logging.getLogger("podscribe")

RECORD_DIR = ".podscribe"
RECORD = "written.json"
SOURCES = "sources.json"  # name -> [the input path it was written for, its extension]


def output_names(paths: Iterable[str]) -> dict[str, str]:
    """Each input path's output name (without extension): its stem, or ``stem-<hash8>`` when several inputs
    share the stem."""
    unique = sorted(set(map(str, paths)))
    stems: dict[str, int] = {}
    for path in unique:
        stems[Path(path).stem] = stems.get(Path(path).stem, 0) + 1
    names = {}
    for path in unique:
        stem = Path(path).stem
        names[path] = stem if stems[stem] == 1 else f"{stem}-{_path_hash(path)}"
    return names


def _path_hash(path: str) -> str:
    return hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:8]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Written:
    """What writing the outputs did: every output file as it now stands (written or already up to date), and
    the files kept because a person changed them, each with where the new content went (None: nothing new)."""

    paths: list[Path] = field(default_factory=list)
    kept: list[tuple[Path, Path | None]] = field(default_factory=list)

    def add(self, other: Written) -> None:
        self.paths += [p for p in other.paths if p not in self.paths]
        self.kept += [k for k in other.kept if k not in self.kept]


class OutputDir:
    """One folder of output files and its record of what podscribe wrote there."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.record_path = self.folder / RECORD_DIR / RECORD
        self.sources_path = self.folder / RECORD_DIR / SOURCES

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
                import time

                time.sleep(0.02)
            yield
        finally:
            os.close(fd)  # drops the lock

    def _record(self) -> dict[str, str]:
        return read_json_dict(self.record_path)

    def write(
        self,
        files: dict[str, bytes],
        problems: list[str] | None = None,
        sources: dict[str, tuple[str, str]] | None = None,
    ) -> Written:
        """Write ``{file name: content}`` into the folder by the rule above. A file that cannot be written for
        its own name (too long, a folder of that name) is skipped and described in ``problems``; a full disk or a
        read-only folder stops the write (every output would fail).

        ``sources``: per file name, the input path it is written for and its extension. A file written earlier for
        that path and extension under another name (the input's name changed: another input with its stem joined
        the job) is gone afterwards, unless a person changed it (then it is kept, and listed in ``kept``)."""
        done = Written()
        with self._locked():
            record = self._record()
            before = dict(record)
            owners = read_json_dict(self.sources_path)
            owners_before = dict(owners)
            written: list[str] = []
            for name, data in files.items():
                try:
                    target, kept = self._one(name, data, record)
                except StorageError as exc:
                    if not _this_name_only(exc):
                        raise
                    problem = f"{self.folder / name} cannot be written ({exc.__cause__.strerror}): skipped; the others are written"
                    log.warning("%s", problem)
                    if problems is not None:
                        problems.append(problem)
                    continue
                done.paths.append(target)
                if kept is not None:
                    done.kept.append(kept)
                if name in (sources or {}):
                    owners[target.name] = list(sources[name])
                    written.append(name)
            by_owner: dict[tuple, list[str]] = {}  # one pass over the record, not one per output written
            for old, owner in owners.items():
                by_owner.setdefault(tuple(owner), []).append(old)
            for name in written:  # an output not written (its name refused) leaves its older files as they are
                path, ext = sources[name]
                self._drop_renamed(name, path, ext, by_owner.get((path, ext), []), record, owners, done)
            if record != before:
                atomic_write_bytes(self.record_path, json.dumps(record, indent=0, sort_keys=True).encode())
            if owners != owners_before:
                atomic_write_bytes(self.sources_path, json.dumps(owners, indent=0, sort_keys=True).encode())
        return done

    def _drop_renamed(
        self, name: str, path: str, ext: str, names: list[str], record: dict, owners: dict, done: Written
    ) -> None:
        """The files written for ``path`` (extension ``ext``; ``names``: every name recorded for it) under a name
        it no longer has: removed where they still hold what podscribe wrote; kept where a person changed them."""
        stem = name[: -len(ext) - 1]
        current = {name, f"{stem}.new.{ext}"}
        for old in names:
            if old not in owners or old in current or old.startswith(f"{stem}.new-"):
                continue
            del owners[old]
            target = self.folder / old
            digest = _file_digest(target)
            if digest is not None and digest != record.get(old):
                log.warning("%s was written for %s, now named %s, and changed since: kept", target, path, name)
                done.kept.append((target, self.folder / name))
                continue
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
            record.pop(old, None)
            if digest is not None:
                log.info("removed %s: %s is now named %s", target, path, name)

    def _one(self, name: str, data: bytes, record: dict) -> tuple[Path, tuple[Path, Path | None] | None]:
        target = self.folder / name
        digest = _digest(data)
        current = _file_digest(target)
        if current == digest:
            record[name] = digest
            return target, None
        if current is None or record.get(name) == current:
            atomic_write_bytes(target, data)
            record[name] = digest
            return target, None
        # changed since podscribe wrote it, or not podscribe's: kept
        if record.get(name) == digest:  # nothing new to say: the person's version stands
            return target, (target, None)
        stem, dot, ext = name.rpartition(".")
        for n in range(1, 1000):
            alt_name = f"{stem}.new{'' if n == 1 else f'-{n}'}{dot}{ext}"
            alt = self.folder / alt_name
            alt_current = _file_digest(alt)
            if alt_current in (None, digest) or record.get(alt_name) == alt_current:
                if alt_current != digest:
                    atomic_write_bytes(alt, data)
                record[alt_name] = digest
                log.warning(
                    "%s was changed since podscribe wrote it (or is not podscribe's): kept; new: %s", target, alt
                )
                return alt, (target, alt)
        raise RuntimeError(f"no free name for a new version of {target}")


def _file_digest(path: Path) -> str | None:
    try:
        return _digest(path.read_bytes())
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        return "a folder"


def _this_name_only(exc: StorageError) -> bool:
    """A write that failed for its own name (too long, a folder of that name), not for the folder or disk."""
    cause = exc.__cause__
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


def export_recorded(
    root: Path, recorded: dict, problems: list[str], only: set[str] | None = None, named: Iterable[str] = ()
) -> Written:
    """The recorded subtitles written; an output that cannot be written for its own name is described in
    ``problems`` and the others are written."""
    from .cues import CueRules
    from .export import export_job

    rules = CueRules(**recorded["cue_rules"])
    return export_job(root, recorded["subtitles"], folder(root, recorded), rules, problems, only=only, named=named)
