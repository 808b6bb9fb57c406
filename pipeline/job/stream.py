"""A file's pieces, read in the background (ffmpeg, the cutter, the VAD) a batch ahead of the model, and the next
group of files opened while the current one decodes, so the model does not wait on ffmpeg (decision 0021)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..audio import media, prefetch, vad
from ..audio.media import CutOptions
from ..facts.events import NOTHING, Events
from ..storage.manifest import JobDir

if TYPE_CHECKING:
    from ..decode import Transcriber
    from .plan import Task


@dataclass
class Stream:
    """A file's pieces as a background thread reads them (ffmpeg, the cutter, the VAD), a batch ahead:
    ``(piece, persisted row or None, voice or None)``. A piece persisted when reading began comes without its
    samples or VAD; ``notes`` fills with the cutter's warnings as it reads."""

    persisted: dict[int, dict]
    notes: list[str]
    items: prefetch.Ahead


def read(
    file_id: str,
    path: Path,
    cut: CutOptions,
    duration_s: float | None,
    transcriber: Transcriber,
    persisted: dict,
    events: Events = NOTHING,
) -> Stream:
    """Start reading a file's pieces in the background."""
    notes: list[str] = []
    voice = (
        functools.partial(vad.speech_spans, opts=vad.VadOptions(threshold=transcriber.options.vad_threshold))
        if cut.at_pauses
        else None
    )  # the cutter's VAD runs only when it cuts at pauses
    hear = transcriber.voice if transcriber.options.vad else None

    def produced():
        for piece in media.pieces(path, cut, duration_s, notes, voice):
            known = persisted.get(piece.index)
            if known is not None and (known["start_sample"], known["n_samples"]) == (
                piece.start_sample,
                piece.n_samples,
            ):
                piece.samples = None
                yield piece, known, None
            else:
                heard = hear(piece.samples) if hear else None
                events.happened("read", file_id, piece.index)
                yield piece, None, heard

    return Stream(persisted, notes, prefetch.ahead(produced(), depth=transcriber.options.batch_size))


class Lookahead:
    """The audio of the next group of files, read while the model decodes the current group, so a job of many
    short files does not wait on ffmpeg between batches (within a file, ``Stream`` reads a batch ahead).
    Opened after a group of short files only, and only for files this worker holds (``workers.hold``,
    schedule.py: no two workers read one file's audio); reading writes nothing, and a file that got checkpoints before its claim is read again
    (``onefile.decoded_pieces``)."""

    def __init__(self, job: JobDir, transcriber: Transcriber, cut: CutOptions, probed: dict, events: Events = NOTHING):
        self.job, self.transcriber, self.cut, self.probed, self.events = job, transcriber, cut, probed, events
        self.streams: dict[str, Stream] = {}

    def open(self, tasks: list[Task]) -> None:
        """Start reading these files, but for those with checkpoints: a worker without the claim reads nothing
        of a file's state (``read_partial`` drops a damaged checkpoint), and a resumed file reads little."""
        for task in tasks:
            info = self.probed.get(task.file_id)
            if task.relabel or not isinstance(info, media.AudioInfo) or task.file_id in self.streams:
                continue
            if self.job.persisted_batches(task.file_id) == 0:
                self.events.happened("opened", task.file_id, 0)  # before its reading thread can tell ``read``
                self.streams[task.file_id] = read(
                    task.file_id, task.refs[0].path, self.cut, info.duration_s, self.transcriber, {}, self.events
                )

    def take(self, tasks: list[Task]) -> dict[str, Stream]:
        """The streams opened for these files; any other one is closed (its file went to another worker)."""
        taken = {task.file_id: self.streams.pop(task.file_id) for task in tasks if task.file_id in self.streams}
        self.close()
        return taken

    def close(self) -> None:
        for stream in self.streams.values():
            stream.items.close()
        self.streams.clear()


def with_last(items: Iterator) -> Iterator[tuple[object, bool]]:
    """Each item with whether it is the last one."""
    current = next(items, _END)
    while current is not _END:
        following = next(items, _END)
        yield current, following is _END
        current = following


_END = object()
