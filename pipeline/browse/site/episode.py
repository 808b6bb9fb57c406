"""One episode of the site made, and one search group: what the build hands to worker processes when there are
many (``build._in_processes``), so everything here is picklable in and out and touches no site folder: an
episode's page, its downloads (the job's own files where it wrote them, a person's edits included and marked;
else made as `podscribe export` makes them), its search text and its Opus copy.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from ...facts.errors import DamagedState
from ...outputs.names import output_names
from ...outputs.record import Recorded, has_record, recorded
from ...outputs.speaker_names import named
from ...storage.manifest import UNREADABLE, JobDir, row_paths
from ..archive import Episode, Unreadable, episode_segments
from . import pages, searchindex

log = logging.getLogger("podscribe")

DOWNLOADS = (("SRT", "srt"), ("VTT", "vtt"), ("TXT", "txt"), ("JSON", "json"))


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
        data = read_file(own) if own else None
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
        opus = opus_copy(Path(e.path))
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


def read_file(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def opus_copy(source: Path) -> bytes | None:
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
