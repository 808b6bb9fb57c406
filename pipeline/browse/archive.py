"""An archive as `podscribe search` and `podscribe site` read it: one or more job dirs, each episode's row (its
status, container tags, speakers' names), and its segments' searchable columns (``cache.py``: one table per job,
read again only where the job's tables changed).

Read only, from the manifests (``manifest.py``'s readers and ``tables.py``'s schemas); nothing here loads a model
or takes a job's lock. A folder that is not a job is refused naming what it is; a done episode whose segments
table cannot be read (damaged, missing) is ``unreadable`` and said in ``problems``, and the rest is read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ..audio.media import AUDIO_EXTENSIONS
from ..facts.errors import DamagedState, UsageProblem
from ..outputs.record import RECORD_DIR, has_record
from ..outputs.speaker_names import Names, names_for, parse, recorded
from ..storage.manifest import UNREADABLE, JobDir, is_job, jobs_below, read_table, row_paths
from ..storage.tables import SEGMENTS_SCHEMA, no_rows
from .cache import SEARCHED, job_tables, strings

SITE_RECORD = "site.json"  # in a site's .podscribe/: what it was built from (site/build.py)


class NotAJob(UsageProblem):
    """A folder given as a job dir that is none (exit 2), saying what it is."""


def what_it_is(path: Path) -> str:
    """What ``path`` is, for a user who gave it as a job dir."""
    if not path.exists():
        return "does not exist"
    if not path.is_dir():
        kind = "an audio file" if path.suffix.lower() in AUDIO_EXTENSIONS else "a file"
        return f"is {kind}, not a job dir"
    if (path / RECORD_DIR / SITE_RECORD).is_file():
        return "is a site built by `podscribe site`, not a job dir"
    if has_record(path):
        return "is a folder of subtitle and text files podscribe wrote, not a job dir"
    below = jobs_below(path)
    if below:
        return "is not a job dir; the jobs in it: " + ", ".join(str(p) for p in below)
    try:
        entries = list(path.iterdir())
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    audio = sum(1 for p in entries if p.suffix.lower() in AUDIO_EXTENSIONS)
    if audio:
        return (
            f"is a folder of {audio} audio file{'s' * (audio > 1)}, not a job dir "
            "(transcribe them first: podscribe transcribe FOLDER --out JOB_DIR)"
        )
    if not entries:
        return "is an empty folder, not a job dir"
    return "is not a job dir (a job dir has job.json and files/; `podscribe transcribe --out DIR` makes one)"


@dataclass
class Episode:
    """One input of a job as the archive shows it: ``status`` is done, failed, pending or unreadable (done, but
    its segments table cannot be read)."""

    job: Path
    path: str  # the input (the first path, for copies)
    status: str
    file_id: str | None = None  # None: pending without a row
    tag_title: str | None = None  # the container's tags
    date: str | None = None
    artist: str | None = None
    duration_s: float | None = None
    language: str | None = None
    n_segments: int = 0
    n_flagged: int = 0
    finished_at: str | None = None
    error: str | None = None  # why it failed, or why it cannot be read
    names: Names = ()  # names for Speaker 1, 2, ... (the job's speaker_names for this path)
    row: dict = field(default_factory=dict, repr=False)

    @property
    def title(self) -> str:
        """The container's title, else the file's name without its extension."""
        return self.tag_title or Path(self.path).stem

    @property
    def key(self) -> str:
        """Names the episode across builds: its job and its content (or path, while it is pending)."""
        return f"{self.job}\0{self.file_id or self.path}"

    @property
    def readable(self) -> bool:
        return self.status == "done"


@dataclass
class Archive:
    """The episodes of some job dirs, in the order given (each job's by path) and what could not be read."""

    jobs: list[Path]
    episodes: list[Episode]
    problems: list[str] = field(default_factory=list)
    searchable: dict[Path, pa.Table] = field(default_factory=dict, repr=False)  # per job: cache.SEARCHED

    @property
    def unreadable(self) -> list[Episode]:
        return [e for e in self.episodes if e.status == "unreadable"]


def open_archive(job_dirs: list[Path], speaker_names: str | None = None, text: bool = True) -> Archive:
    """The episodes of ``job_dirs``. ``speaker_names``: names for every episode (``"Lena,Walter"``), instead of
    those the job recorded with its outputs. ``text=False``: without the searchable text (``searchable`` is then
    empty). A folder that is not a job: NotAJob, naming what it is."""
    roots = []
    for given in job_dirs:
        root = Path(os.path.abspath(given))
        if not is_job(root):
            raise NotAJob(f"{given} {what_it_is(root)}")
        if root not in roots:
            roots.append(root)
    override = parse(speaker_names) if speaker_names else None
    archive = Archive(roots, [])
    for root in roots:
        _read_job(root, archive, override, text)
    return archive


def _read_job(root: Path, archive: Archive, override, text: bool) -> None:
    job = JobDir(root)
    try:
        record = job.read_job() or {}
    except DamagedState as exc:
        record = {}
        archive.problems.append(f"{exc}: its pending inputs are not listed")
    rules = (record.get("outputs") or {}).get("cue_rules") or {}
    names, by_show = (
        override
        or recorded(record)  # the run's own names (a job file's per show too), with or without subtitles
        or (tuple(rules.get("speaker_names") or ()), rules.get("show_speaker_names") or ())
    )
    tables = job_tables(root, text=text)
    archive.searchable[root] = tables.segments
    damaged = {path: error.splitlines()[0] if error else "unreadable" for path, error in tables.damaged}
    known: set[str] = set()
    found = []
    for row in tables.rows:
        paths = row_paths(row)
        known.update(paths)
        episode = Episode(
            job=root,
            path=paths[0],
            status=row["status"],
            file_id=row["file_id"],
            tag_title=row.get("title"),
            date=row.get("date"),
            artist=row.get("artist"),
            duration_s=row.get("duration_s"),
            language=row.get("language"),
            n_segments=row.get("n_segments") or 0,
            n_flagged=row.get("n_flagged") or 0,
            finished_at=row.get("finished_at"),
            error=row.get("error"),
            names=names_for(paths[0], names, by_show),
            row=row,
        )
        found.append(episode)
        segments = job.table_path("segments", row["file_id"])
        if episode.status != "done" or not episode.n_segments:
            continue
        if segments in damaged:
            mark_unreadable(
                archive, episode, f"its segments table cannot be read ({damaged.pop(segments)}): {segments}"
            )
        elif not segments.is_file():
            mark_unreadable(archive, episode, f"its segments table is missing from {root} (rerun the job to decode it)")
    archive.problems += [
        f"{path}: cannot be read ({error}); its episode is left out" for path, error in damaged.items()
    ]
    inputs = record.get("inputs") if isinstance(record.get("inputs"), list) else []
    for path in inputs:
        if os.path.abspath(path) not in known:
            known.add(os.path.abspath(path))
            found.append(Episode(job=root, path=os.path.abspath(path), status="pending"))
    archive.episodes += sorted(found, key=lambda e: e.path)


def searchable(archive: Archive, episodes: list[Episode]) -> pa.Table:
    """The searchable columns (``cache.SEARCHED``: numbers, times, speakers, folded text) of ``episodes``' segments
    (the readable done ones), as one table."""
    parts = []
    for root in archive.jobs:
        ids = {e.file_id for e in episodes if e.job == root and e.status == "done" and e.n_segments}
        every = {e.file_id for e in archive.episodes if e.job == root and e.file_id}
        table = archive.searchable.get(root)
        if not ids or table is None or not table.num_rows:
            continue
        if ids >= every:  # the whole job: the table as it is (mapped from the cache, not copied)
            parts.append(table)
        else:
            parts.append(table.filter(pc.is_in(table.column("file_id"), strings(sorted(ids)))))
    return pa.concat_tables(parts) if parts else no_rows(SEARCHED)


class Unreadable(Exception):
    """A table that cannot be read (the message says which and why)."""


def episode_segments(episode: Episode) -> list[dict]:
    """One episode's segments, whole (words too), in order; Unreadable when its table cannot be read."""
    if not episode.n_segments:
        return []
    path = JobDir(episode.job).table_path("segments", episode.file_id)
    try:
        rows = read_table(path, SEGMENTS_SCHEMA).to_pylist()
    except UNREADABLE as exc:
        raise Unreadable(f"its segments table cannot be read ({str(exc).splitlines()[0]}): {path}") from exc
    return sorted(rows, key=lambda r: r["segment"])


def mark_unreadable(archive: Archive, episode: Episode, why: str) -> None:
    episode.status, episode.error = "unreadable", why
    archive.problems.append(f"{episode.path}: {why}")
