"""`podscribe site`: a static site of an archive's transcripts, built from its job dirs' manifests.

A new site is built in a temporary folder beside its place, synced, and renamed into place, so a folder of that
name is a whole site or none. A site rebuilt (more episodes done, relabelled, renamed speakers) is changed in
place, one file at a time (each written whole: temp file and rename), and only where something changed: an
episode whose row, segments table, names, audio link and downloads are as they were is not rendered again (the
state of each is kept in ``.podscribe/site.json``), and a file whose new bytes equal the old is not written.
Episode pages and search files are written before the index that links to them. Builds of one site take turns
(an OS lock), so the workers of a job can each build it as their files finish. Many episodes to render are
shared among worker processes, one per core.

Every file of the site is podscribe's output as in ``outputs/ownership.py``: a page or download a person changed after
podscribe wrote it is never replaced (the new version goes beside it as ``NAME.new.EXT``, and the build says
so), nor removed when its episode leaves the site. An episode's downloads (SRT, VTT, TXT, JSON) are the job's own
files where the job wrote them, a person's edits included (a TXT corrected by hand beside the job is the one the
site offers, marked as edited); where the job wrote none, they are made from the manifest (export.py's writers:
the costly part of a first build, ~0.6 s of CPU per hour of audio).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import multiprocessing
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import pyarrow.parquet as pq

from ...facts.errors import DamagedState, StorageError, UsageProblem
from ...outputs.ownership import RECORD, RECORD_DIR, OutputDir, Recorded, has_record, output_names, recorded
from ...outputs.speaker_names import named
from ...storage.atomic import atomic_write_bytes, read_json_dict, try_flock
from ...storage.manifest import UNREADABLE, JobDir, is_job, row_paths
from .. import text as textmod
from ..archive import (
    SITE_RECORD,
    Archive,
    Episode,
    NotAJob,
    Unreadable,
    episode_segments,
    mark_unreadable,
    open_archive,
    what_it_is,
)
from ..sites import remember
from . import pages, searchindex

log = logging.getLogger("podscribe")

ASSETS = ("site.css", "episode.js", "search.js", "index.js")
DOWNLOADS = (("SRT", "srt"), ("VTT", "vtt"), ("TXT", "txt"), ("JSON", "json"))
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


# -- the folder ------------------------------------------------------------------------------------------------


def check_out(out: Path) -> bool:
    """Whether ``out`` is a site already (False: a new one is made there). A file, a folder of other things or a
    folder that cannot be written: UsageProblem, before anything is read or written."""
    if out.exists() and not out.is_dir():
        raise UsageProblem(f"-o {out}: a file is there, not a folder")
    if out.is_dir():
        if (out / RECORD_DIR / SITE_RECORD).is_file():
            if not os.access(out, os.W_OK | os.X_OK):
                raise UsageProblem(f"-o {out}: the site's folder cannot be written (permissions)")
            return True
        try:
            entries = sorted(p.name for p in out.iterdir())
        except OSError as exc:
            raise UsageProblem(f"-o {out}: cannot be read ({exc.strerror or exc})") from exc
        if entries:
            raise UsageProblem(
                f"-o {out}: the folder holds other files ({', '.join(entries[:3])}{', ...' * (len(entries) > 3)}) "
                "and is no site podscribe built; give a new or empty folder"
            )
    parent = next((p for p in out.parents if p.exists()), None)
    if parent is None or not parent.is_dir():
        raise UsageProblem(f"-o {out}: {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageProblem(f"-o {out}: {parent} cannot be written (permissions)")
    return False


def build_site(job_dirs: list[Path], options: SiteOptions) -> SiteResult:
    """Build or update the site at ``options.out`` from ``job_dirs``. A folder that is no job: NotAJob (exit 2);
    an episode whose tables cannot be read is listed unreadable (``result.unreadable``) and the rest is built."""
    start = time.monotonic()
    out = Path(os.path.abspath(options.out))
    exists = check_out(out)
    if not job_dirs and not (options.add_jobs and exists):
        raise UsageProblem("name at least one job dir")
    for root in job_dirs:  # a folder that is no job: refused before anything is made
        if not is_job(Path(os.path.abspath(root))):
            raise NotAJob(f"{root} {what_it_is(Path(os.path.abspath(root)))}")
    if not exists:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-"))
        try:
            result = _build(staging, out, job_dirs, options, {}, durable=False)
            os.chmod(staging, 0o777 & ~_umask())
            os.sync()  # every file on disk before the folder is renamed into place (one sync, not one per file)
            os.rename(staging, out)  # the site appears whole, or not at all
            staging = None
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not (out / RECORD_DIR / SITE_RECORD).is_file():
                raise StorageError(f"cannot build the site in {out}: {exc.strerror or exc}") from exc
            exists = True  # another build made it meanwhile: update that one
        finally:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
    if exists:
        with _locked(out):
            record = read_json_dict(out / RECORD_DIR / SITE_RECORD)
            result = _build(out, out, job_dirs, options, record, durable=True)
    for job in [Path(j) for j in read_json_dict(out / RECORD_DIR / SITE_RECORD).get("jobs", [])]:
        if not remember(job, out):
            log.info("%s cannot be written: `podscribe search` links to this site with --site %s", job, out)
    result.wall_s = time.monotonic() - start
    return result


def _build(
    target: Path, final: Path, job_dirs: list[Path], options: SiteOptions, record: dict, durable: bool
) -> SiteResult:
    jobs = [Path(os.path.abspath(j)) for j in job_dirs]
    if options.add_jobs:
        earlier = [Path(os.path.abspath(j)) for j in record.get("jobs", []) if isinstance(j, str) and is_job(Path(j))]
        jobs = list(dict.fromkeys([*earlier, *jobs]))
    archive = open_archive(jobs, options.speaker_names, text=False)
    return Builder(target, final, archive, options, record, durable).run()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def _locked(out: Path):
    fd = os.open(out / RECORD_DIR / "build.lock", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        while not try_flock(fd):
            time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def slug(text: str) -> str:
    """A page name: the folded file name, letters, digits and dashes (safe in any URL and file system)."""
    name = re.sub(r"[^a-z0-9]+", "-", textmod.fold(text).encode("ascii", "ignore").decode()).strip("-")
    return name[:80].strip("-") or "episode"


# -- one episode, one search group: in worker processes when there are many ----------------------------------------


@dataclass
class Downloads:
    """An episode's files in its job's output folder (extension -> path), the digests podscribe left in each (a file
    holding none of them is a person's version), and the cue rules the job laid them out with."""

    files: dict[str, Path] = field(default_factory=dict)
    written: dict[str, set[str]] = field(default_factory=dict)  # file name -> digests podscribe may have left
    cue_rules: dict | None = None


@dataclass
class JobOutputs:
    """Where a job wrote its episodes' files (None: it wrote none), what that folder's record says podscribe wrote
    there (None: no record, a folder written before there was one: the names are then the job's own names), the
    formats, and the cue rules they were laid out with."""

    folder: Path | None = None
    names: dict[str, str] = field(default_factory=dict)
    formats: set[str] = field(default_factory=set)
    cue_rules: dict | None = None
    written: Recorded | None = None

    def own_file(self, episode: Episode, ext: str) -> Path | None:
        """The file written for this episode (never one written for another input of the same stem: two jobs
        sharing a folder name theirs apart, and the record says which is whose)."""
        if not self.folder or ext not in self.formats:
            return None
        name = self.names.get(episode.path)
        if self.written is None:
            return self.folder / f"{name}.{ext}" if name else None
        names = self.written.names(episode.path, ext)
        if not names:
            return None
        return self.folder / (f"{name}.{ext}" if f"{name}.{ext}" in names else min(names))

    def downloads(self, episode: Episode) -> Downloads:
        files = {ext: f for _, ext in DOWNLOADS if (f := self.own_file(episode, ext)) is not None}
        digests = self.written.digests if self.written else {}
        return Downloads(files, {f.name: digests.get(f.name, set()) for f in files.values()}, self.cue_rules)


def job_outputs(root: Path, rows: list[dict]) -> JobOutputs:
    """The files the job wrote (``--subtitles``, recorded in job.json) or `podscribe export` wrote into its
    subtitles folder: whichever of SRT, VTT, TXT and JSON are there for an episode are the site's downloads."""
    try:
        recorded_job = (JobDir(root).read_job() or {}).get("outputs") or {}
    except DamagedState:
        recorded_job = {}
    folder = Path(recorded_job["output_dir"]) if recorded_job.get("output_dir") else root / "subtitles"
    if not folder.is_dir():
        return JobOutputs(cue_rules=recorded_job.get("cue_rules"))
    names = output_names([p for r in rows for p in row_paths(r)])
    written = recorded(folder) if has_record(folder) else None
    return JobOutputs(folder, names, {ext for _, ext in DOWNLOADS}, recorded_job.get("cue_rules"), written)


@dataclass
class EpisodeWork:
    """Everything one episode's files are made from (sent to a worker process)."""

    episode: Episode
    name: str
    site_title: str
    page_dir: Path  # where the page will be (e/ of the site's final place): the audio's relative link
    copy_audio: bool
    own: Downloads


@dataclass
class Rendered:
    files: dict[str, bytes] = field(default_factory=dict)  # path in the site -> bytes
    speakers: list[str] = field(default_factory=list)  # display names, by first appearance
    edited: list[str] = field(default_factory=list)  # downloads a person edited
    unreadable: str | None = None  # why its table cannot be read (then no files)


def render_episode(work: EpisodeWork) -> Rendered:
    """An episode's page, its downloads, its search text (and its Opus copy)."""
    e, name = work.episode, work.name
    try:
        segments = episode_segments(e)
    except Unreadable as exc:
        return Rendered(unreadable=str(exc))
    labels = list(dict.fromkeys(s["speaker"] for s in segments if s.get("speaker")))
    out = Rendered(speakers=[named(label, e.names) for label in labels])
    downloads, made = [], None
    for label, ext in DOWNLOADS:
        own = work.own.files.get(ext)
        data = _read(own) if own else None
        if data is None:
            made = made or made_downloads(e, segments, work.own.cue_rules)
            data = made[ext]
        elif hashlib.sha256(data).hexdigest() not in work.own.written.get(own.name, ()):
            out.edited.append(label)  # changed since the job wrote it (or not the job's): the person's version
        downloads.append((label, f"{name}.{ext}"))
        out.files[f"e/{name}.{ext}"] = data
    audio, note = audio_link(e, work.page_dir), None
    if not os.path.isfile(e.path):  # no player that would ask for a file that is not there
        audio, note = None, f"The audio was not at {e.path} when this page was made."
    elif work.copy_audio:
        opus = _opus(Path(e.path))
        if opus is not None:
            out.files[f"e/{name}.opus"] = opus
            audio = pages.url_path(f"{name}.opus")
        else:
            note = f"The audio could not be copied from {e.path}: the player links to it where it is."
    page = pages.EpisodePage(
        title=e.title,
        site_title=work.site_title,
        date=e.date,
        duration_s=e.duration_s,
        language=e.language,
        speakers=out.speakers,
        audio=audio,
        audio_note=note,
        downloads=downloads,
        edited=out.edited,
        source=e.path,
    )
    out.files[f"e/{name}.html"] = pages.episode_page(page, segments, lambda label: named(label, e.names)).encode()
    out.files[f"search/t/{name}.js"] = searchindex.episode_text(name, segments, labels)
    return out


def made_downloads(e: Episode, segments: list[dict], cue_rules: dict | None) -> dict[str, bytes]:
    """SRT, VTT, TXT and JSON as `podscribe export` writes them, for a job that wrote none."""
    from ...outputs.cues import CueRules, build_cues
    from ...outputs.export import named_speakers, to_json, to_srt, to_txt, to_vtt

    rules = CueRules()
    with contextlib.suppress(TypeError, ValueError):
        rules = CueRules(**(cue_rules or {}))
    labelled = named_speakers(segments, tuple(e.names))
    cues, timed = build_cues(labelled, rules, e.duration_s)
    return {
        "srt": to_srt(cues).encode(),
        "vtt": to_vtt(cues, timed).encode(),
        "txt": to_txt(labelled, rules).encode(),
        "json": to_json(e.row, labelled, cues, timed, rules).encode(),
    }


def audio_link(e: Episode, page_dir: Path) -> str:
    return pages.url_path(os.path.relpath(e.path, page_dir))


def index_group(number: int, members: list[tuple[str, str]]) -> dict[str, bytes] | str:
    """A search group's files from its episodes' (page name, segments table) — or why a table cannot be read."""
    episodes = []
    for name, path in members:
        try:
            table = pq.read_table(path, columns=["segment", "text"], page_checksum_verification=True)
        except UNREADABLE as exc:
            return f"{path} cannot be read ({str(exc).splitlines()[0]})"
        order = sorted(zip(table.column("segment").to_pylist(), table.column("text").to_pylist()))
        episodes.append((name, [text for _, text in order]))
    return searchindex.group_index(number, episodes).files


def _in_processes(function: Callable, items: list) -> Iterator:
    """``function`` over ``items``, in order: in worker processes (one per core) when there are enough items to
    pay for starting them, else here."""
    workers = min(os.cpu_count() or 1, len(items) // PER_PROCESS)
    if workers < 2:
        yield from map(function, items)
        return
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield from pool.map(function, items, chunksize=2)


# -- the whole build -------------------------------------------------------------------------------------------------


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


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _opus(source: Path) -> bytes | None:
    """An Opus copy of ``source``'s first audio stream (mono, 48 kb/s: speech), or None when ffmpeg cannot."""
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "audio.opus"
        cmd = ["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", f"file:{source.absolute()}", "-vn", "-map", "0:a:0"]
        cmd += ["-ac", "1", "-c:a", "libopus", "-b:a", "48k", f"file:{target}"]
        try:
            subprocess.run(cmd, check=True, capture_output=True, timeout=3600)
            return target.read_bytes()
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("cannot copy the audio of %s: %s", source, getattr(exc, "stderr", b"") or exc)
            return None


__all__ = ["SiteOptions", "SiteResult", "build_site", "check_out"]
