"""One build of a site, new or an update (``Builder``): which episodes changed (their row, segments table, names,
audio link and downloads against ``.podscribe/site.json``), their pages and downloads rendered (``episode.py``,
in worker processes when there are many), the search groups and the index written last, each file only where its
bytes changed and never over a person's edit (``outputs/ownership.py``). ``build.py`` decides where it builds: a
new site aside, renamed into place whole; an update in place, under the site's lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import multiprocessing
import os
import re
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ...outputs.ownership import OutputDir
from ...outputs.record import RECORD, RECORD_DIR
from ...outputs.speaker_names import named
from ...storage.atomic import atomic_write_bytes
from ...storage.manifest import JobDir
from .. import text as textmod
from ..archive import (
    SITE_RECORD,
    Archive,
    Episode,
    mark_unreadable,
)
from . import pages, searchindex
from .episode import EpisodeWork, audio_link, index_group, job_outputs, render_episode

log = logging.getLogger("podscribe")

ASSETS = ("site.css", "episode.js", "search.js", "index.js")
WRITE_BATCH = 40  # episodes whose files are written together (one update of the record of what was written)
PER_PROCESS = 6  # fewer episodes than this per core to render: no worker processes (starting one costs ~1 s)


@dataclass
class SiteOptions:
    out: Path
    title: str | None = None  # default: the job dirs' names
    copy_audio: bool = False  # an Opus copy of each episode's audio beside its page (a site served elsewhere)
    speaker_names: str | None = None  # names for every episode, instead of the jobs' own ("Lena,Walter")
    add_jobs: bool = False  # keep the jobs the site was built from and add these (a job's own `site` key)


@dataclass
class SiteResult:
    out: Path
    episodes: int = 0  # listed on the index
    pages: int = 0  # episodes rendered in this build (the others were as they were)
    groups: int = 0  # search groups indexed in this build (the others were as they were)
    removed: int = 0  # files of episodes no longer in the site
    kept: list[tuple[Path, Path | None]] = field(default_factory=list)  # changed by a person: (kept, new version)
    unreadable: list[Episode] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    wall_s: float = 0.0


def slug(text: str) -> str:
    """A page name: the folded file name, letters, digits and dashes (safe in any URL and file system)."""
    name = re.sub(r"[^a-z0-9]+", "-", textmod.fold(text).encode("ascii", "ignore").decode()).strip("-")
    return name[:80].strip("-") or "episode"


def _in_processes(function: Callable, items: list) -> Iterator:
    """``function`` over ``items``, in order: in worker processes (one per core) when there are enough items to
    pay for starting them, else here."""
    workers = min(os.cpu_count() or 1, len(items) // PER_PROCESS)
    if workers < 2:
        yield from map(function, items)
        return
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield from pool.map(function, items, chunksize=2)


class Builder:
    """One build: the archive, what the site had (its record), what it gets."""

    def __init__(self, target: Path, final: Path, archive: Archive, options: SiteOptions, record: dict, durable: bool):
        self.target, self.final, self.archive, self.options, self.record = target, final, archive, options, record
        self.output = OutputDir(target, durable)
        self.result = SiteResult(final, unreadable=[], problems=archive.problems)
        self.render = _render_version()
        self.title = options.title or record.get("title") or ", ".join(j.name for j in archive.jobs)
        self.names: dict[str, str] = {}  # episode key -> page name
        self.keep: set[str] = set()  # every file of the site after this build
        self.entries: dict[str, dict] = {}  # the site record's episodes after this build
        self.own = {
            root: job_outputs(root, [e.row for e in archive.episodes if e.job == root and e.row])
            for root in archive.jobs
        }

    def write(self, files: dict[str, bytes]) -> list[str]:
        written = self.output.write(files)
        self.result.kept += written.kept
        names = [p.relative_to(self.output.folder).as_posix() for p in written.paths]
        self.keep.update(names)
        return names

    def run(self) -> SiteResult:
        done = [e for e in self.archive.episodes if e.status == "done"]
        self.assign_names(done)
        self.episodes(done)
        readable = [e for e in done if e.status == "done"]
        self.search_groups(readable)
        self.write({f"assets/{a}": resources.files(__package__).joinpath("assets", a).read_bytes() for a in ASSETS})
        self.write({"index.html": self.index(self.archive.episodes).encode()})  # last: it links to the rest
        kept = self.output.remove_others(self.keep | {f"{RECORD_DIR}/{RECORD}"})
        self.result.kept += [(p, None) for p in kept]
        self.result.removed = len(set(_recorded(self.record)) - self.keep)
        _drop_empty_folders(self.target, ("e", "search"))
        self.result.unreadable = self.archive.unreadable
        self.result.episodes = len(self.archive.episodes)
        record = {
            "version": 1,
            "title": self.options.title or self.record.get("title"),
            "jobs": [str(j) for j in self.archive.jobs],
            "episodes": self.entries,
            "groups": self.members,
            "group_states": self.group_states,
        }
        atomic_write_bytes(self.target / RECORD_DIR / SITE_RECORD, json.dumps(record, indent=1).encode())
        return self.result

    # -- names and groups --------------------------------------------------------------------------------------

    def assign_names(self, done: list[Episode]) -> None:
        """Each episode keeps the page name it had; a new one gets its file name as a slug (``-2`` ... when
        taken)."""
        old = self.record.get("episodes", {})
        taken = set()
        for e in done:
            name = (old.get(e.key) or {}).get("name")
            if isinstance(name, str) and name not in taken:
                self.names[e.key] = name
                taken.add(name)
        for e in done:
            if e.key not in self.names:
                base = slug(Path(e.path).stem)
                name, n = base, 2
                while name in taken:
                    name, n = f"{base}-{n}", n + 1
                self.names[e.key] = name
                taken.add(name)

    def groups(self, done: list[Episode]) -> dict[str, list[str]]:
        """Search groups: each episode stays in the group it joined; new ones (oldest first) join the last group
        while it has room, so a new episode rewrites one group's files, not every group's."""
        keys = {e.key for e in done}
        old = self.record.get("groups", {})
        groups = {g: [k for k in members if k in keys] for g, members in old.items() if isinstance(members, list)}
        placed = {k for members in groups.values() for k in members}
        fresh = sorted((e for e in done if e.key not in placed), key=lambda e: (e.date or "", e.title, e.path))
        last = max(groups, key=int) if groups else None
        for e in fresh:
            if last is None or len(groups[last]) >= searchindex.GROUP_EPISODES:
                last = str(int(last) + 1) if last is not None else "0"
                groups[last] = []
            groups[last].append(e.key)
        return {g: members for g, members in sorted(groups.items(), key=lambda kv: int(kv[0])) if members}

    # -- episodes ------------------------------------------------------------------------------------------------

    def state_of(self, e: Episode) -> str:
        """What an episode's files are made from, as a digest: an episode whose state is unchanged is not made
        again."""
        own = self.own[e.job].downloads(e)
        sources = [(ext, _stat(path)) for ext, path in own.files.items()]
        audio = [audio_link(e, self.final / "e"), self.options.copy_audio]
        audio += [_stat(e.path) if self.options.copy_audio else os.path.isfile(e.path)]
        segments = _stat(JobDir(e.job).table_path("segments", e.file_id))
        parts = [self.render, self.title, self.names[e.key], e.row, segments, list(e.names), audio, sources]
        return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]

    def episodes(self, done: list[Episode]) -> None:
        old = self.record.get("episodes", {})
        todo: list[tuple[Episode, str]] = []
        for e in done:
            state, name = self.state_of(e), self.names[e.key]
            before = old.get(e.key) or {}
            files = [f for f in before.get("files", []) if isinstance(f, str)]
            if before.get("state") == state and files and all((self.target / f).is_file() for f in files):
                self.entries[e.key] = before
                self.keep.update(files)
            else:
                todo.append((e, state))
        works = [
            EpisodeWork(
                e,
                self.names[e.key],
                self.title,
                self.final / "e",
                self.options.copy_audio,
                self.own[e.job].downloads(e),
            )
            for e, _ in todo
        ]
        batch: dict[str, bytes] = {}
        owners: list[tuple[str, set[str]]] = []
        for (e, state), made in zip(todo, _in_processes(render_episode, works)):
            if made.unreadable:
                mark_unreadable(self.archive, e, made.unreadable)
                continue
            name = self.names[e.key]
            entry = {"name": name, "page": f"e/{name}.html", "state": state, "speakers": made.speakers, "files": []}
            self.entries[e.key] = entry
            self.result.pages += 1
            batch.update(made.files)
            owners.append((e.key, set(made.files)))
            if len(owners) >= WRITE_BATCH:
                self.flush(batch, owners)
        self.flush(batch, owners)

    def flush(self, batch: dict[str, bytes], owners: list[tuple[str, set[str]]]) -> None:
        """Write a batch of episodes' files; each episode's record lists the files it has (a new version beside
        a person's edit among them)."""
        if not batch:
            return
        names = self.write(dict(batch))
        for key, files in owners:
            self.entries[key]["files"] = sorted(n for n in names if n in files or _new_of(n) in files)
        batch.clear()
        owners.clear()

    # -- search -----------------------------------------------------------------------------------------------------

    def search_groups(self, readable: list[Episode]) -> None:
        by_key = {e.key: e for e in readable}
        self.members = self.groups(readable)
        self.group_states: dict[str, dict] = {}
        todo = []
        for number, members in self.members.items():
            digest = json.dumps([self.render, [(k, self.entries[k]["state"]) for k in members]])
            state = hashlib.sha256(digest.encode()).hexdigest()[:24]
            files = _recorded_group(self.record, number)
            self.group_states[number] = {"state": state, "files": files}
            before = (self.record.get("group_states") or {}).get(number) or {}
            if before.get("state") == state and files and all((self.target / f).is_file() for f in files):
                self.keep.update(files)
                continue
            table = [
                (self.names[k], str(JobDir(by_key[k].job).table_path("segments", by_key[k].file_id))) for k in members
            ]
            todo.append((int(number), table))
        vocabularies: dict[int, list[str]] = {}
        for (number, _), made in zip(todo, _in_processes(_index_group, todo)):
            if isinstance(made, str):  # a table that read for its page but not now: no search for its group
                self.archive.problems.append(f"search group {number}: {made}")
                continue
            vocabularies[number] = json.loads(made[f"search/g{number}/words.json"])
            self.group_states[str(number)]["files"] = sorted(self.write(made))
            self.result.groups += 1
        for number in self.members:  # the groups as they were: their words as the last build wrote them
            if int(number) not in vocabularies:
                with contextlib.suppress(OSError, ValueError):
                    vocabularies[int(number)] = json.loads((self.target / f"search/g{number}/words.json").read_bytes())
        self.write(searchindex.directory(vocabularies))
        self.directory = sorted({searchindex.key_of(w) for words in vocabularies.values() for w in words})

    def index(self, episodes: list[Episode]) -> str:
        rows, catalog = [], {"episodes": {}, "groups": [int(g) for g in self.members], "words": self.directory}
        for e in episodes:
            entry = self.entries.get(e.key) if e.status == "done" else None
            speakers = entry["speakers"] if entry else []
            if not speakers and e.row.get("n_speakers"):
                speakers = [named(f"Speaker {n}", e.names) for n in range(1, e.row["n_speakers"] + 1)]
            if entry:
                catalog["episodes"][entry["name"]] = {
                    "title": e.title,
                    "date": e.date,
                    "page": entry["page"],
                    "speakers": speakers,
                }
            rows.append(
                pages.IndexRow(
                    title=e.title,
                    page=entry["page"] if entry else None,
                    date=e.date,
                    duration_s=e.duration_s,
                    speakers=speakers,
                    flagged=e.n_flagged,
                    status=e.status,
                    note=e.error if e.status in ("failed", "unreadable") else None,
                    path=e.path,
                )
            )
        rows.sort(key=lambda r: (r.date or "", r.title.casefold()), reverse=True)  # newest first
        done = [e for e in episodes if e.status == "done"]
        hours = sum(e.duration_s or 0 for e in done) / 3600
        counts = {s: sum(1 for e in episodes if e.status == s) for s in ("failed", "pending", "unreadable")}
        audio = f"{hours:,.1f} hours" if hours >= 1 else textmod.clock(hours * 3600)
        summary = f"{len(done)} episode{'s' * (len(done) != 1)} transcribed, {audio}" + "".join(
            f"; {n} {s}" for s, n in counts.items() if n
        )
        return pages.index_page(self.title, rows, catalog, summary)


def _index_group(item: tuple[int, list[tuple[str, str]]]):
    return index_group(*item)


def _render_version() -> str:
    """What the pages are made by: the site's code (a new podscribe renders every page again). Not the assets:
    they are written at every build, and a page does not change with them."""
    digest = hashlib.sha256()
    here = Path(__file__).parent
    for path in sorted([*here.glob("*.py"), here.parent / "text.py"]):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _new_of(name: str) -> str:
    """The file a ``NAME.new.EXT`` (a new version beside a person's edit) stands beside."""
    return re.sub(r"\.new(-\d+)?(\.[^./]+)$", r"\2", name)


def _recorded(record: dict) -> list[str]:
    out = []
    for entry in (record.get("episodes") or {}).values():
        out += entry.get("files", []) if isinstance(entry, dict) else []
    for number in record.get("group_states") or {}:
        out += _recorded_group(record, number)
    return out


def _recorded_group(record: dict, number: str) -> list[str]:
    entry = (record.get("group_states") or {}).get(number) or {}
    return [f for f in entry.get("files", []) if isinstance(f, str)]


def _drop_empty_folders(root: Path, tops: Iterable[str]) -> None:
    for top in tops:
        folders = sorted((p for p in (root / top).rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        for folder in folders if (root / top).is_dir() else []:
            with contextlib.suppress(OSError):
                folder.rmdir()


def _stat(path) -> list | None:
    try:
        st = os.stat(path)
    except (OSError, TypeError):
        return None
    return [st.st_size, st.st_mtime_ns]
