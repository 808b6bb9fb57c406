"""One file, decoded: its pieces streamed in batches, each batch checkpointed before the next starts (a killed
run resumes inside the file; a piece's audio is dropped once decoded), then stitched, labelled if asked, and
written as its files row (the commit) with its segments and pieces.

Only pieces not yet persisted form batches, so a run resumed with another batch size decodes nothing twice; with
the same batch size it forms exactly the batches of an uninterrupted run (persisted batches are whole ones).
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from ..audio import media
from ..audio.media import AudioError, CutOptions
from ..decode import review
from ..decode.stitch import stitch
from ..facts.events import NOTHING, Events
from ..facts.records import PieceResult
from ..facts.rows import PieceRow, SegmentRow
from ..facts.runtime import return_freed_memory
from ..storage import tables, workers
from ..storage.manifest import JobDir
from . import Interrupted, progress
from .plan import check_unchanged
from .stream import Stream, read, with_last

if TYPE_CHECKING:
    from ..decode import Transcriber
    from ..diarize.diarizer import Diarizer
    from .plan import Task
    from .summary import JobSummary

log = logging.getLogger("podscribe")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class Predecoded:
    """A one-piece file decoded in a batch with other files: its piece, result, cutting warnings, share of time."""

    pieces: list[tuple[media.Piece, PieceResult]]
    warnings: list[str]
    wall_s: float


@dataclass(kw_only=True)
class FileContext:
    """What decoding one file needs, built by name (``finish.FileWork.context``)."""

    task: Task
    transcriber: Transcriber
    cut: CutOptions
    job: JobDir
    stop: threading.Event
    probed: media.AudioInfo | AudioError
    bar: progress.AudioBar | None = None
    checkpoint: bool = True
    config_hash: str | None = None
    diarizer: Diarizer | None = None
    ready: Predecoded | None = None  # decoded beside other files (cross-file batch): nothing left to decode
    stream: Stream | None = None  # its audio, opened ahead while the files before it decoded
    last_batch: Callable[[], None] | None = None  # called as the file's last batch starts (the next file is read)
    events: Events = NOTHING  # what the run tells as it goes (facts/events.py)

    @property
    def file_id(self) -> str:
        return self.task.file_id

    @property
    def path(self) -> Path:
        return self.task.refs[0].path


def decoded_pieces(ctx: FileContext, info: media.AudioInfo, warnings: list[str]):
    """Every piece of the file with its result, in order: persisted ones are reused, the others decoded in
    batches of ``batch_size`` and persisted. The last batch of a file is not checkpointed: the file is
    consolidated right after it."""
    if ctx.ready is not None:
        warnings.extend(ctx.ready.warnings)
        queue = deque([piece, result] for piece, result in ctx.ready.pieces)
        yield from _known(ctx, queue)
        return
    persisted = ctx.job.read_partial(ctx.file_id)
    stream = ctx.stream
    if stream is None or stream.persisted != persisted:  # opened before another worker saved batches of it
        if stream is not None:
            stream.items.close()
        stream = read(ctx.file_id, ctx.path, ctx.cut, info.duration_s, ctx.transcriber, persisted, ctx.events)
    size = ctx.transcriber.options.batch_size
    queue: deque[list] = deque()  # [piece, result or None] in piece order
    batch: list[list] = []
    lock = LanguageLock(ctx.transcriber, persisted)
    try:
        voices: list = []
        for (piece, known, heard), last in with_last(stream.items):
            queue.append([piece, None if known is None else tables.from_partial(known)])
            if known is None:
                batch.append(queue[-1])
                voices.append(heard)
            if last and ctx.last_batch is not None:
                ctx.last_batch()
            if batch and (len(batch) == size or last):
                _decode_batch(ctx, batch, lock, checkpoint=ctx.checkpoint and not last, voices=voices)
                batch, voices = [], []
                if ctx.stop.is_set() and not last:
                    yield from _known(ctx, queue)
                    raise Interrupted()
            yield from _known(ctx, queue)
    finally:
        stream.items.close()
    warnings.extend(stream.notes)


class LanguageLock:
    """``--language-mode file``: the file's language is detected on its first pieces with a voice (the one
    with the most voice) and given to every piece after. A resumed file keeps the language its persisted
    pieces were decoded with."""

    def __init__(self, transcriber: Transcriber, persisted: dict[int, dict]):
        options = transcriber.options
        self.active = options.language_mode == "file" and not options.language and transcriber.multilingual
        self.transcriber = transcriber
        spoken = [row["language"] for row in persisted.values() if row["language"] and not row["skipped"]]
        self.language = spoken[0] if self.active and spoken else None

    def __call__(self, samples: list) -> str | None:
        if self.active and self.language is None:
            voice: dict[str, float] = {}
            for lang, seconds in self.transcriber.detect(samples):
                if lang:
                    voice[lang] = voice.get(lang, 0.0) + seconds
            self.language = max(voice, key=lambda k: (voice[k], k)) if voice else None
        return self.language


@dataclass
class BatchPiece:
    """A piece in a batch, with what the job knows it by: its file's id and path."""

    file_id: str
    path: Path
    piece: media.Piece


def decode_batch(
    transcriber: Transcriber,
    batch: list[BatchPiece],
    language: str | None,
    voices: list | None,
    events: Events = NOTHING,
) -> list[PieceResult]:
    """The one way a worker decodes a batch, of one file's pieces or of several one-piece files: decoded, the
    memory the batch freed given back, each piece said decoded and its audio dropped. A stop during a second
    chance is Interrupted: the batch is decoded again on resume."""
    from ..decode.transcriber import Abandoned  # loaded with the model already

    for path in dict.fromkeys(held.path for held in batch):
        events.decoding(path, [held.piece.index for held in batch if held.path == path])
    try:
        results = transcriber.transcribe([held.piece.samples for held in batch], language, voices)
    except Abandoned:
        raise Interrupted() from None
    return_freed_memory()
    for held in batch:
        events.happened("decoded", held.file_id, held.piece.index)
        held.piece.samples = None  # the audio is no longer needed; keep memory bounded
    return results


def _decode_batch(
    ctx: FileContext, batch: list[list], lock: LanguageLock, checkpoint: bool, voices: list | None = None
) -> None:
    """A batch of this file's pieces, decoded and (but for the file's last) checkpointed before the next starts."""
    pieces = [entry[0] for entry in batch]
    language = lock([p.samples for p in pieces])
    results = decode_batch(
        ctx.transcriber, [BatchPiece(ctx.file_id, ctx.path, p) for p in pieces], language, voices, ctx.events
    )
    if checkpoint:
        check_unchanged(ctx.task)  # a checkpoint of other audio under this content's id would be resumed from
        ctx.job.write_partial(
            ctx.file_id, pieces[0].index, [tables.partial_row(ctx.file_id, p, r) for p, r in zip(pieces, results)]
        )
        for p in pieces:
            ctx.events.happened("persisted", ctx.file_id, p.index)
    for entry, result in zip(batch, results):
        entry[1] = result


def _known(ctx: FileContext, queue: deque[list]):
    """Yield the leading pieces whose results are known (a persisted piece waits behind an undecoded one)."""
    while queue and queue[0][1] is not None:
        piece, result = queue.popleft()
        if ctx.bar is not None:
            ctx.bar.advance(piece.duration_s)
        yield piece, result


def transcribe_file(ctx: FileContext) -> tuple[dict, list[SegmentRow], list[PieceRow]]:
    """Decode one input: its files-row outcome, segments rows and pieces rows. Raise AudioError for bad input."""
    if isinstance(ctx.probed, AudioError):
        raise ctx.probed
    info = ctx.probed
    warnings: list[str] = list(info.notes)
    done = list(decoded_pieces(ctx, info, warnings))
    if not done:
        raise AudioError("file decodes to no audio samples")
    duration = done[-1][0].end_sample / media.SAMPLE_RATE
    segments = stitch([p for p, _ in done], [r for _, r in done], duration)
    language = review.file_language(done)
    by_piece = {p.index: r for p, r in done}
    flags = {s.index: review.segment_flags(by_piece[s.piece], language, ctx.transcriber.options) for s in segments}
    outcome = tables.file_done(duration, done, segments, warnings, language, flags, info.tags)
    rows = tables.segment_rows(ctx.file_id, ctx.path, segments, by_piece, flags)
    if ctx.diarizer is not None:
        outcome, rows = with_labels(ctx, outcome, rows)
    return outcome, rows, [tables.piece_row(ctx.file_id, p, r) for p, r in done]


def with_labels(ctx: FileContext, row: dict, segments: list[SegmentRow]) -> tuple[dict, list[SegmentRow]]:
    """The diarize stage on a transcript. If it fails, the transcript is kept unlabelled with a warning (a later
    run with --diarize labels it): a night's decoding is never lost to the labels."""
    if not segments:
        return tables.file_labelled(row, segments, 0, ctx.diarizer.config), segments
    try:
        labelled, n_speakers = ctx.diarizer.label(ctx.path, segments, row.get("duration_s"))
    except Exception as exc:  # whatever breaks in the labels (a native library, the hub), the transcript stays
        log.warning("diarizing %s failed:\n%s", ctx.path, traceback.format_exc())
        problem = f"diarization failed: {type(exc).__name__}: {exc}"
        return {**row, "warnings": "; ".join(filter(None, [row.get("warnings"), problem]))}, segments
    return tables.file_labelled(row, labelled, n_speakers, ctx.diarizer.config), labelled


def base_row(ctx: FileContext) -> dict:
    """The identity part of a file's row: its content, paths, size and time, models, configuration, worker."""
    try:
        stat = ctx.path.stat()
        size, mtime = stat.st_size, stat.st_mtime
    except OSError:
        size, mtime = None, None
    return tables.file_identity(
        ctx.file_id,
        ctx.path,
        ctx.task.paths,
        size,
        mtime,
        ctx.transcriber.models.describe(),
        ctx.config_hash,
        workers.worker_name(),
    )


def run_one(ctx: FileContext, summary: JobSummary) -> tuple[dict, list[SegmentRow]]:
    """Decode a file and write its row (done or failed) with its segments and pieces; counted in ``summary``."""
    t0 = time.monotonic()
    identity = base_row(ctx)
    try:
        outcome, segments, pieces = transcribe_file(ctx)
    except AudioError as exc:
        outcome, segments, pieces = tables.file_failed(str(exc)), [], []
    except (RuntimeError, ValueError, MemoryError) as exc:  # a decoder failure (out of memory too) on this file only
        log.warning("decoding %s failed:\n%s", ctx.path, traceback.format_exc())
        outcome, segments, pieces = tables.file_failed(f"decoding failed: {type(exc).__name__}: {exc}"), [], []
    wall = time.monotonic() - t0 + (ctx.ready.wall_s if ctx.ready else 0.0)
    row = tables.file_closed({**identity, **outcome}, wall, now(), ctx.transcriber.mode)
    check_unchanged(ctx.task)  # what was read may be the new content: never written under the old id
    ctx.job.write_file(row, segments, pieces)
    for piece in pieces:
        ctx.events.happened("persisted", ctx.file_id, piece["piece"])
    ctx.events.happened("finished", ctx.file_id, len(pieces))
    if row["status"] == "done":
        summary.done += 1
        summary.audio_s += row["duration_s"]
        summary.decoded.append((row["duration_s"] or 0.0, row["wall_s"] or 0.0))
        if row["warnings"]:
            summary.warnings.append((str(ctx.path), row["warnings"]))
        log.info(
            "done %s: %.0f s of audio in %.0f s, %d segments", ctx.path, row["duration_s"], wall, row["n_segments"]
        )
    else:
        summary.failed += 1
        summary.failures.append((str(ctx.path), row["error"]))
        log.warning("%s: %s", ctx.path, row["error"])
    return row, segments
