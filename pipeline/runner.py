"""The job runner: inputs → audio → decode → stitch → manifest, one file at a time per worker.

Built to survive the night:
- a run is a worker: it plans under the job's preparation lock (one at a time), then decodes
  without any job-wide lock, claiming one file at a time (workers.py); a second run of the same
  job with the same configuration joins as another worker, on this machine or another one that
  sees the job dir; one with another configuration is refused, the difference named;
- files are decoded longest first, so one long episode does not run alone at the end of the night;
- files of one piece (clips, trailers) are decoded several to a batch (cross-file batches): a piece's
  tokens do not depend on the rows beside it, so grouping changes speed only;
- each decoded batch of pieces is persisted atomically before the next one
  starts, so a killed run resumes inside a half-done file, and a finished
  file is consolidated into its tables;
- a process that dies on a file only makes it a suspect (a whole run killed is no evidence): it is decoded
  last, alone, in a watched child process, and fails only when that child dies again at the same place
  while its worker lives (isolate.py);
- rerunning skips inputs already done (and failed ones, unless asked to retry);
  a changed configuration is refused unless the job is restarted;
- an input is its content (a SHA-256 of every byte): copies at several paths are
  decoded once and keep every path; a path that cannot be read on a rerun (an
  unmounted share) keeps its finished results and is reported missing;
- a file that fails becomes a failed row with a readable error; the job goes on;
- a table or checkpoint that cannot be read is moved aside or dropped and its
  input decoded again; a write that fails (disk full) stops the run cleanly;
- the first Ctrl-C or SIGTERM finishes the batch in hand, persists it and stops
  cleanly, also between files.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import json
import logging
import os
import signal
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from . import audio, dryrun, isolate, outputs, prefetch, probes, progress, tables, vad, workers
from .audio import AudioError, CutOptions
from .decode import DecodeOptions, Transcriber
from .decode.transcriber import Abandoned
from .diarize.options import DiarizeOptions
from .errors import ConfigChanged, DamagedState, UsageProblem
from .export import CueRules, check_writable, write_outputs
from .manifest import Fingerprints, Identity, JobDir, legacy_fingerprint, path_id, row_paths
from .models.load import Models, load_models
from .outputs import Written, output_names
from .records import PieceResult
from .runtime import pick_runtime, recorded_compute_type, return_freed_memory
from .stitch import stitch

if TYPE_CHECKING:
    from .diarize.diarizer import Diarizer

log = logging.getLogger("podscribe")

AUDIO_EXTENSIONS = {
    ".mp3",
    ".m4a",
    ".m4b",
    ".aac",
    ".opus",
    ".ogg",
    ".oga",
    ".flac",
    ".wav",
    ".mp4",
    ".m4v",
    ".mkv",
    ".mka",
    ".webm",
    ".mov",
    ".wma",
    ".aif",
    ".aiff",
}


class Interrupted(Exception):
    """The run was asked to stop (Ctrl-C, SIGTERM); everything decoded so far is persisted."""


@dataclass
class InputRef:
    path: Path  # absolute (job.json and the tables must mean the same file from any folder)
    error: str | None = None  # known-bad before any decoding (no match, empty directory)


@dataclass
class Task:
    """One content to decode and every input path that holds it (copies decode once)."""

    file_id: str
    refs: list[InputRef]
    problem: str | None = None  # why it cannot be read (its failed row says so)
    relabel: bool = False  # done, but its speaker labels are missing or were made with other --diarize options

    @property
    def paths(self) -> list[str]:
        return [str(r.path) for r in self.refs]


@dataclass
class JobOptions:
    out_dir: Path
    model: str | None = None  # None: the runtime's default
    assistant: str | None = "default"
    device: str = "auto"
    compute_type: str = "auto"  # runtime.COMPUTE_TYPES; auto resumes a job with the one it started with
    decode: DecodeOptions = field(default_factory=DecodeOptions)
    cut: CutOptions = field(default_factory=CutOptions)
    cache_dir: Path | None = None
    progress: bool = True
    retry_failed: bool = False
    restart: bool = False
    checkpoint_pieces: bool = True  # persist each decoded batch (resume inside a file); off only to measure its cost
    subtitles: list[str] = field(default_factory=list)  # formats written as each file is done, and at the end
    output_dir: Path | None = None  # where they go (default <out_dir>/subtitles)
    outputs_named_only: bool = False  # whisper mode: outputs only for the inputs named in this command
    export_at_end: bool = True  # write every output once all workers are done (off for all but the last pass)
    launched_at: str | None = None  # --workers N: when the launch began (rows done since are this launch's work)
    cue_rules: CueRules = field(default_factory=CueRules)
    threads: int | None = None  # torch CPU threads (None: torch's default)
    max_attempts: int = workers.MAX_ATTEMPTS  # watched deaths of a suspect file decoded alone before it fails
    diarize: DiarizeOptions | None = None  # speaker labels (None: none)
    writes_outputs: bool = True  # False for the workers an engine starts: the process that started them writes


@dataclass
class JobSummary:
    out_dir: Path
    done: int = 0
    failed: int = 0
    already_done: int = 0
    skipped_failed: int = 0
    copies: int = 0  # inputs with the same content as another input (decoded once, every path kept)
    audio_s: float = 0.0
    wall_s: float = 0.0
    failures: list[tuple[str, str]] = field(default_factory=list)
    missing: list[tuple[str, str]] = field(default_factory=list)  # unreadable now; earlier results kept
    warnings: list[tuple[str, str]] = field(default_factory=list)  # done, with something to check
    subtitles: list[Path] = field(default_factory=list)
    kept: list[tuple[Path, Path | None]] = field(default_factory=list)  # outputs a person changed: (kept, new)
    by_others: int = 0  # finished by other workers of the job while this one ran
    relabelled: int = 0  # finished files given speaker labels without decoding them again
    elsewhere: int = 0  # being decoded by other workers when this one ran out of files
    subtitles_left: bool = False  # other workers still at work: the last one writes the subtitles

    def merge(self, other: JobSummary) -> None:
        """Add another worker's counts (one summary for `--workers N`)."""
        for name in ("done", "failed", "audio_s", "by_others", "relabelled"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("already_done", "skipped_failed", "copies"):  # every worker plans the same job: counted once
            setattr(self, name, max(getattr(self, name), getattr(other, name)))
        for name in ("failures", "missing", "warnings", "subtitles", "kept"):
            getattr(self, name).extend(x for x in getattr(other, name) if x not in getattr(self, name))

    def wrote(self, written: Written) -> None:
        self.subtitles += [p for p in written.paths if p not in self.subtitles]
        self.kept += [k for k in written.kept if k not in self.kept]


def expand_inputs(inputs: list[str]) -> list[InputRef]:
    """Files as given; folders searched recursively for audio/video; glob patterns expanded."""
    refs: list[InputRef] = []
    for raw in inputs:
        path = Path(raw).expanduser().absolute()
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in AUDIO_EXTENSIONS)
            refs += [InputRef(p) for p in found] or [InputRef(path, f"directory has no audio files ({path})")]
        elif not path.exists() and any(c in raw for c in "*?["):
            found = sorted(Path(p).absolute() for p in glob.glob(raw, recursive=True) if Path(p).is_file())
            refs += [InputRef(p) for p in found] or [InputRef(path, f"no file matches {raw!r}")]
        else:
            refs.append(InputRef(path))
    seen, unique = set(), []
    for ref in refs:
        key = ref.path.resolve() if ref.path.exists() else ref.path
        if key not in seen:
            seen.add(key)
            unique.append(ref)
    return unique


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _trace(event: str, file_id: str, number: int) -> None:
    """Test hook: PODSCRIBE_TRACE=<file> appends one line per read / decoded / persisted piece (``number``: the
    piece's index) and per claimed file (``number``: the worker deaths counted on it before this claim)."""
    path = os.environ.get("PODSCRIBE_TRACE")
    if path:
        with open(path, "a") as f:
            f.write(f"{event} {file_id} {number} {os.getpid()}\n")


def _crash_test(path: Path, indexes: list[int]) -> None:
    """Test hook: PODSCRIBE_CRASH=<file name>:<piece> kills the process (SIGKILL, as the OOM killer would) when it
    starts decoding that piece of that file: a file that really kills its worker."""
    planted = os.environ.get("PODSCRIBE_CRASH")
    if planted:
        name, _, piece = planted.rpartition(":")
        if name == path.name and int(piece) in indexes:
            os.kill(os.getpid(), signal.SIGKILL)


# -- one file -------------------------------------------------------------------


@dataclass
class Predecoded:
    """A one-piece file decoded in a batch with other files: its piece, result, cutting warnings, share of time."""

    pieces: list[tuple[audio.Piece, PieceResult]]
    warnings: list[str]
    wall_s: float


@dataclass
class FileContext:
    task: Task
    transcriber: Transcriber
    cut: CutOptions
    job: JobDir
    stop: threading.Event
    probed: audio.AudioInfo | AudioError
    bar: progress.AudioBar | None = None
    checkpoint: bool = True
    config_hash: str | None = None
    diarizer: Diarizer | None = None
    ready: Predecoded | None = None  # decoded beside other files (cross-file batch): nothing left to decode
    stream: _Stream | None = None  # its audio, opened ahead while the files before it decoded

    @property
    def file_id(self) -> str:
        return self.task.file_id

    @property
    def path(self) -> Path:
        return self.task.refs[0].path


def _with_last(items: Iterator) -> Iterator[tuple[object, bool]]:
    """Each item with whether it is the last one."""
    current = next(items, _END)
    while current is not _END:
        following = next(items, _END)
        yield current, following is _END
        current = following


_END = object()


@dataclass
class _Stream:
    """A file's pieces as a background thread reads them (ffmpeg, the cutter, the VAD), a batch ahead:
    ``(piece, persisted row or None, voice or None)``. A piece persisted when reading began comes without its
    samples or VAD; ``notes`` fills with the cutter's warnings as it reads."""

    persisted: dict[int, dict]
    notes: list[str]
    items: prefetch.Ahead


def _read(
    file_id: str, path: Path, cut: CutOptions, duration_s: float | None, transcriber: Transcriber, persisted: dict
) -> _Stream:
    """Start reading a file's pieces in the background."""
    notes: list[str] = []
    voice = (
        functools.partial(vad.speech_spans, opts=vad.VadOptions(threshold=transcriber.options.vad_threshold))
        if cut.at_pauses
        else None
    )  # the cutter's VAD runs only when it cuts at pauses
    hear = transcriber.voice if transcriber.options.vad else None

    def produced():
        for piece in audio.pieces(path, cut, duration_s, notes, voice):
            known = persisted.get(piece.index)
            if known is not None and (known["start_sample"], known["n_samples"]) == (
                piece.start_sample,
                piece.n_samples,
            ):
                piece.samples = None
                yield piece, known, None
            else:
                heard = hear(piece.samples) if hear else None
                _trace("read", file_id, piece.index)
                yield piece, None, heard

    return _Stream(persisted, notes, prefetch.ahead(produced(), depth=transcriber.options.batch_size))


class _Lookahead:
    """The audio of the next group of files, read while the model decodes the current group, so a job of many
    short files does not wait on ffmpeg between batches (within a file, ``_Stream`` reads a batch ahead).
    Reading takes no claim and writes nothing: a file another worker claims in the meantime is closed unread,
    and one that got checkpoints before its claim is read again (``_decoded_pieces``)."""

    def __init__(self, job: JobDir, transcriber: Transcriber, cut: CutOptions, probed: dict):
        self.job, self.transcriber, self.cut, self.probed = job, transcriber, cut, probed
        self.streams: dict[str, _Stream] = {}

    def open(self, tasks: list[Task]) -> None:
        """Start reading these files, but for those with checkpoints: a worker without the claim reads nothing
        of a file's state (``read_partial`` drops a damaged checkpoint), and a resumed file reads little."""
        for task in tasks:
            info = self.probed.get(task.file_id)
            if task.relabel or not isinstance(info, audio.AudioInfo) or task.file_id in self.streams:
                continue
            if self.job.persisted_batches(task.file_id) == 0:
                self.streams[task.file_id] = _read(
                    task.file_id, task.refs[0].path, self.cut, info.duration_s, self.transcriber, {}
                )

    def take(self, tasks: list[Task]) -> dict[str, _Stream]:
        """The streams opened for these files; any other one is closed (its file went to another worker)."""
        taken = {task.file_id: self.streams.pop(task.file_id) for task in tasks if task.file_id in self.streams}
        self.close()
        return taken

    def close(self) -> None:
        for stream in self.streams.values():
            stream.items.close()
        self.streams.clear()


def _decoded_pieces(ctx: FileContext, info: audio.AudioInfo, warnings: list[str]):
    """Every piece of the file with its result, in order: persisted ones are reused, the others decoded in
    batches of ``batch_size`` and persisted.

    Only pieces not yet persisted form batches, so a run resumed with another batch size decodes nothing
    twice; with the same batch size it forms exactly the batches of an uninterrupted run (persisted batches
    are whole ones). The last batch of a file is not checkpointed: the file is consolidated right after it.
    """
    if ctx.ready is not None:
        warnings.extend(ctx.ready.warnings)
        queue = deque([piece, result] for piece, result in ctx.ready.pieces)
        yield from _ready(ctx, queue)
        return
    persisted = ctx.job.read_partial(ctx.file_id)
    stream = ctx.stream
    if stream is None or stream.persisted != persisted:  # opened before another worker saved batches of it
        if stream is not None:
            stream.items.close()
        stream = _read(ctx.file_id, ctx.path, ctx.cut, info.duration_s, ctx.transcriber, persisted)
    size = ctx.transcriber.options.batch_size
    queue: deque[list] = deque()  # [piece, result or None] in piece order
    batch: list[list] = []
    lock = _LanguageLock(ctx.transcriber, persisted)
    try:
        voices: list = []
        for (piece, known, heard), last in _with_last(stream.items):
            queue.append([piece, None if known is None else tables.from_partial(known)])
            if known is None:
                batch.append(queue[-1])
                voices.append(heard)
            if batch and (len(batch) == size or last):
                _decode_batch(ctx, batch, lock, checkpoint=ctx.checkpoint and not last, voices=voices)
                batch, voices = [], []
                if ctx.stop.is_set() and not last:
                    yield from _ready(ctx, queue)
                    raise Interrupted()
            yield from _ready(ctx, queue)
    finally:
        stream.items.close()
    warnings.extend(stream.notes)


class _LanguageLock:
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


def _decode_batch(
    ctx: FileContext, batch: list[list], lock: _LanguageLock, checkpoint: bool, voices: list | None = None
) -> None:
    pieces = [entry[0] for entry in batch]
    samples = [p.samples for p in pieces]
    _crash_test(ctx.path, [p.index for p in pieces])
    try:
        results = ctx.transcriber.transcribe(samples, lock(samples), voices)
    except Abandoned:  # a stop during a second chance: this batch is decoded again on resume
        raise Interrupted() from None
    return_freed_memory()
    for p in pieces:
        _trace("decoded", ctx.file_id, p.index)
    if checkpoint:
        ctx.job.write_partial(
            ctx.file_id, pieces[0].index, [tables.partial_row(ctx.file_id, p, r) for p, r in zip(pieces, results)]
        )
        for p in pieces:
            _trace("persisted", ctx.file_id, p.index)
    for entry, result in zip(batch, results):
        entry[0].samples = None  # the audio is no longer needed; keep memory bounded
        entry[1] = result


def _ready(ctx: FileContext, queue: deque[list]):
    """Yield the leading pieces whose results are known (a persisted piece waits behind an undecoded one)."""
    while queue and queue[0][1] is not None:
        piece, result = queue.popleft()
        if ctx.bar is not None:
            ctx.bar.advance(piece.duration_s)
        yield piece, result


def transcribe_file(ctx: FileContext) -> tuple[dict, list[dict], list[dict]]:
    """Decode one input: its files-row outcome, segments rows and pieces rows. Raise AudioError for bad input."""
    if isinstance(ctx.probed, AudioError):
        raise ctx.probed
    info = ctx.probed
    warnings: list[str] = list(info.notes)
    done = list(_decoded_pieces(ctx, info, warnings))
    if not done:
        raise AudioError("file decodes to no audio samples")
    duration = done[-1][0].end_sample / audio.SAMPLE_RATE
    segments = stitch([p for p, _ in done], [r for _, r in done], duration)
    language = tables.file_language(done)
    by_piece = {p.index: r for p, r in done}
    flags = {s.index: tables.segment_flags(by_piece[s.piece], language, ctx.transcriber.options) for s in segments}
    outcome = tables.file_done(duration, done, segments, warnings, language, flags, info.tags)
    rows = tables.segment_rows(ctx.file_id, ctx.path, segments, by_piece, flags)
    if ctx.diarizer is not None:
        outcome, rows = _labelled(ctx, outcome, rows)
    return outcome, rows, [tables.piece_row(ctx.file_id, p, r) for p, r in done]


def _labelled(ctx: FileContext, row: dict, segments: list[dict]) -> tuple[dict, list[dict]]:
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


def _relabel_one(ctx: FileContext, row: dict, summary: JobSummary) -> tuple[dict, list[dict]] | None:
    """A finished file that needs speaker labels (``--diarize`` added or changed): its segments labelled, nothing
    decoded again. Segments first, the files row last, each written atomically."""
    known_damage = len(ctx.job.damaged)
    segments = ctx.job.read("segments", {ctx.file_id}).to_pylist()
    if (
        len(ctx.job.damaged) > known_damage or not segments
    ):  # damaged or gone since planning: the next run decodes the file again
        _quarantine_damaged(ctx.job)
        summary.warnings.append((str(ctx.path), "its segments table could not be read: not labelled"))
        summary.already_done += 1
        return
    # (A count that differs from the row's n_segments is a labelling cut short between its two writes: the
    # segments were already split, and labelling them again is the way on.)
    new_row, labelled = _labelled(ctx, row, segments)
    if new_row.get("speaker_config") != ctx.diarizer.config:
        summary.warnings.append((str(ctx.path), new_row["warnings"]))
        summary.already_done += 1  # its transcript is done; the next run with --diarize tries the labels again
        return
    ctx.job.write_labels(new_row, labelled)
    summary.relabelled += 1
    log.info("labelled %s: %d speakers", ctx.path, new_row["n_speakers"])
    return new_row, labelled


def _base_row(ctx: FileContext) -> dict:
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


def _run_one(ctx: FileContext, summary: JobSummary) -> tuple[dict, list[dict]]:
    t0 = time.monotonic()
    identity = _base_row(ctx)
    try:
        outcome, segments, pieces = transcribe_file(ctx)
    except AudioError as exc:
        outcome, segments, pieces = tables.file_failed(str(exc)), [], []
    except (RuntimeError, ValueError, MemoryError) as exc:  # a decoder failure (out of memory too) on this file only
        log.warning("decoding %s failed:\n%s", ctx.path, traceback.format_exc())
        outcome, segments, pieces = tables.file_failed(f"decoding failed: {type(exc).__name__}: {exc}"), [], []
    wall = time.monotonic() - t0 + (ctx.ready.wall_s if ctx.ready else 0.0)
    row = tables.file_closed({**identity, **outcome}, wall, _now(), ctx.transcriber.mode)
    ctx.job.write_file(row, segments, pieces)
    for piece in pieces:
        _trace("persisted", ctx.file_id, piece["piece"])
    if row["status"] == "done":
        summary.done += 1
        summary.audio_s += row["duration_s"]
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


# -- the job ----------------------------------------------------------------------


def job_config(options: JobOptions, models: Models) -> dict:
    """What decides the output: a resumed job must match it (but for SPEED_ONLY)."""
    return {
        "models": models.describe(),
        "decode": asdict(options.decode),
        "cut": asdict(options.cut),
        "threads": options.threads,
        **({"diarize": asdict(options.diarize)} if options.diarize else {}),
    }


# Every decoding mode gives the main model's own tokens (tests/test_speculative.py), so the assistant and
# the batch size may change between runs of a job: resume a night's job with --assistant auto, or smaller batches.
SPEED_ONLY = ("models.assistant", "decode.batch_size", "threads")

# Speaker labels are made after the transcript and from it: adding or changing --diarize relabels finished files
# (no decoding); a run without --diarize on a diarized job is refused (it would leave files unlabelled).
LABELS = "diarize"

# Options added after job dirs were made, with the value that does what older versions did: a job dir made
# before the second chances resumes with `--no-coverage --fallback-beams 0` (the refusal names them).
ADDED = {"decode.coverage": False, "decode.coverage_gap_s": 1.0, "decode.fallback_beams": 0, "cut.at_pauses": False}


def output_hash(config: dict) -> str:
    """The hash of what decides the tokens (SPEED_ONLY left out), kept in every files row: it checks
    the configuration when job.json is lost."""
    deciding = json.loads(json.dumps(config))
    deciding.pop(LABELS, None)
    for dotted in SPEED_ONLY:
        *parents, leaf = dotted.split(".")
        node = deciding
        for key in parents:
            node = node.get(key, {})
        node.pop(leaf, None)
    return JobDir.config_hash(deciding)


def _check_config(job: JobDir, config: dict, rows: list[dict], joining: bool = False) -> None:
    """job.json decides; when it is lost or damaged, the files rows' hashes decide (and job.json is rebuilt).
    Other speaker-label options relabel finished files, unless other workers are at work (``joining``): workers
    of one job label alike."""
    try:
        old = job.read_job()
        why = f"{job.root / 'job.json'} is missing"
    except DamagedState as exc:
        old, why = None, str(exc)
    if old is not None:
        relabel = LABELS in config and not joining  # workers at work together must label alike
        labels = (LABELS, *(f"{LABELS}.{key}" for key in config[LABELS])) if relabel else ()
        job.check_config(config, SPEED_ONLY + labels, old, ADDED)
        return
    if not rows:
        return
    if LABELS not in config and any(r.get("speaker_config") for r in rows):
        raise ConfigChanged(
            f"{why}, and the results in {job.root} carry speaker labels (--diarize): run with --diarize "
            "(and the speaker options they were made with), another --out, or --restart to start over."
        )
    hashes = {r.get("config_hash") for r in rows}
    if hashes == {output_hash(config)}:
        log.warning("%s; the results there were made with this configuration: rebuilding it", why)
        return
    if None in hashes:
        raise DamagedState(
            f"{why}, and the results in {job.root} are older than the configuration hash in "
            "their rows, so podscribe cannot tell whether these options made them. Restore job.json, "
            "use another --out, or --restart to start over."
        )
    raise ConfigChanged(
        f"{why}, and the results in {job.root} were made with another configuration. Use the "
        "options they were made with, another --out, or --restart to start over."
    )


def _readable_rows(job: JobDir) -> list[dict]:
    """The files rows; a damaged files table is moved aside (its input is decoded again)."""
    rows = job.file_rows()
    _quarantine_damaged(job)
    return rows


def _quarantine_damaged(job: JobDir) -> None:
    for path, error in job.damaged:
        log.warning(
            "damaged table %s (%s): moved to %s; its input is decoded again",
            path,
            error.splitlines()[0] if error else "unreadable",
            job.quarantine(path).parent,
        )
    job.damaged.clear()


def _identify(refs: list[InputRef], rows: list[dict], fps: Fingerprints) -> list[Identity]:
    legacy = {p: r["file_id"] for r in rows if len(r["file_id"]) == 16 for p in row_paths(r)}
    known = {r["file_id"] for r in rows}
    out = []
    for ref in refs:
        ident = Identity(path_id(ref.path), ref.error) if ref.error else fps.identify(ref.path)
        old = legacy.get(str(ref.path))
        if ident.readable and ident.file_id not in known and old and legacy_fingerprint(ref.path) == old:
            ident = Identity(old)  # a job dir from before whole-file ids: keep its results
            fps.adopt(ref.path, old)
        out.append(ident)
    return out


def _plan(refs: list[InputRef], job: JobDir, rows: list[dict], options: JobOptions, summary: JobSummary) -> list[Task]:
    fps = job.fingerprints()
    labels = JobDir.config_hash(asdict(options.diarize)) if options.diarize else None
    idents = _identify(refs, rows, fps)
    content_of = {str(ref.path): ident.file_id for ref, ident in zip(refs, idents) if ident.readable}
    by_id = {r["file_id"]: r for r in rows}
    for r in rows:  # a path whose content changed no longer belongs to its old row
        listed = row_paths(r)
        kept = [p for p in listed if content_of.get(p, r["file_id"]) == r["file_id"]]
        if kept == listed:
            continue
        if kept:
            by_id[r["file_id"]] = {**r, "path": kept[0], "paths": kept}
            job.update_file_row(by_id[r["file_id"]])
        else:
            job.forget(r["file_id"])
            del by_id[r["file_id"]]
    known_paths = {p: r["file_id"] for r in by_id.values() for p in row_paths(r)}
    tasks: dict[str, Task] = {}
    for ref, ident in zip(refs, idents):
        if not ident.readable and known_paths.get(str(ref.path), ident.file_id) != ident.file_id:
            summary.missing.append((str(ref.path), ident.problem))  # results from an earlier run stay
            continue
        if ident.file_id in tasks:
            tasks[ident.file_id].refs.append(ref)
            summary.copies += 1
        else:
            tasks[ident.file_id] = Task(ident.file_id, [ref], ident.problem)
    todo = []
    for task in tasks.values():
        row = by_id.get(task.file_id)
        state = row["status"] if row else None
        if state == "done" and row["n_segments"] and not job.readable("segments", task.file_id):
            _quarantine_damaged(job)
            state = None
        if state == "done":
            listed = row_paths(row)
            added = [p for p in task.paths if p not in listed]
            if added or listed != row["paths"]:  # a new copy of finished content: its subtitles are written too
                row = {**row, "path": listed[0], "paths": listed + added}
                job.update_file_row(row)
            if _needs_labels(row, labels):
                todo.append(Task(task.file_id, task.refs, task.problem, relabel=True))
            elif options.launched_at and (row.get("finished_at") or "") >= options.launched_at:
                summary.by_others += 1  # done by another worker of this launch, not before it
            else:
                summary.already_done += 1
        elif state == "failed" and not options.retry_failed:
            summary.skipped_failed += 1
        else:
            todo.append(task)
    fps.save()
    return todo


def _needs_labels(row: dict, speaker_config: str | None) -> bool:
    """A done file whose labels are missing or were made with other options (``speaker_config``: the hash of
    this run's diarization options; None: no --diarize)."""
    return speaker_config is not None and bool(row["n_segments"]) and row.get("speaker_config") != speaker_config


def _probe_all(tasks: list[Task], root: Path) -> dict[str, audio.AudioInfo | AudioError | None]:
    """Every file probed (None for one that only needs labels) before the first is decoded: files go longest
    first. A content probed before (by any run or worker of the job) is not probed again (probes.py). An
    ffprobe run is mostly process start-up, so a few run at once (49 clips: 3.0 s one by one, 1.5 s two or four
    at a time on a 2-core CPU)."""
    cache = probes.ProbeCache(root)
    known = {task.file_id: cache.get(task.file_id) for task in tasks if not task.problem}
    left = [task for task in tasks if not task.relabel and known.get(task.file_id) is None]
    with ThreadPoolExecutor(max_workers=4) as pool:
        found = dict(zip((task.file_id for task in left), pool.map(_probe, left)))
    for file_id, info in found.items():
        if isinstance(info, audio.AudioInfo):
            cache.put(file_id, info)
    cache.save()
    return {
        task.file_id: None if task.relabel else found.get(task.file_id) or known.get(task.file_id) for task in tasks
    }


def _probe(task: Task) -> audio.AudioInfo | AudioError:
    """Probed once per file: for the progress total, then for decoding (an error becomes its failed row)."""
    if task.problem:
        return AudioError(task.problem)
    try:
        return audio.probe(task.refs[0].path)
    except AudioError as exc:
        return exc


def run(
    inputs: list[str], options: JobOptions, models: Models | None = None, stop: threading.Event | None = None
) -> JobSummary:
    """Run the job as one worker: plan (under the preparation lock), then decode every file no other
    worker holds, then write the subtitles if no other worker is still at work."""
    start = time.monotonic()
    stop = stop or threading.Event()
    refs = expand_inputs(inputs)
    job = JobDir(options.out_dir)
    if options.threads:
        import torch

        torch.set_num_threads(options.threads)
    summary = JobSummary(Path(options.out_dir))
    registration = workers.Registration(job.root)
    if models is None:  # before the lock: the workers of a launch load their models at the same time
        models = job_models(options)
    diarizer = _diarizer(options)
    transcriber = Transcriber(models, options.decode)  # options the model refuses: before the job dir is made
    if options.subtitles and options.writes_outputs:  # a read-only -o found now, not after the night's decoding
        check_writable(Path(options.output_dir) if options.output_dir else job.root / "subtitles")
    with job.locked():
        config = job_config(options, models)
        todo, seen, names = _prepare(refs, job, config, options, summary, registration)
        registration.__enter__()  # registered before the lock is let go: a joining worker sees this one
    only = {str(ref.path) for ref in refs} if options.outputs_named_only else None
    try:
        transcriber.stop = stop
        transcriber.notify = functools.partial(_second_chance, shown=options.progress)
        worker = _Worker(job, transcriber, options, output_hash(config), stop, summary, seen, diarizer, names, only)
        worker.decode_all(todo)
    finally:
        registration.__exit__()
    recorded = None  # what every worker of the job agreed on (outputs.py); a joiner may have added it
    with contextlib.suppress(DamagedState):
        recorded = (job.read_job() or {}).get("outputs") if options.writes_outputs else None
    if recorded and options.export_at_end:
        if workers.live_workers(job.root):
            summary.subtitles_left = True
        else:  # files done in earlier runs (and by other workers) too; what is already written stays as it is
            problems: list[str] = []
            named = [str(ref.path) for ref in refs]
            summary.wrote(outputs.export_recorded(job.root, recorded, problems, only=only, named=named))
            summary.warnings += [(str(outputs.folder(job.root, recorded)), problem) for problem in problems]
    summary.wall_s = time.monotonic() - start
    key = dryrun.rate_key(options.model, options.compute_type, options.device)
    dryrun.record_rate(key, summary.audio_s, summary.wall_s, options.cache_dir)  # for --dry-run's estimate
    return summary


def _second_chance(line: str, shown: bool) -> None:
    """A piece at its second chance (beam search, then sampling) can take minutes: said, so the bar does not
    look hung."""
    log.info("%s", line)
    progress.say(line, shown)


def _diarizer(options: JobOptions) -> Diarizer | None:
    """Loaded at job start with the models: a missing embedder or pyannote token stops the run before any decoding."""
    if options.diarize is None:
        return None
    from .diarize.diarizer import Diarizer
    from .diarize.embed import EmbedderMissing

    try:
        return Diarizer(options.diarize)
    except EmbedderMissing as exc:
        raise UsageProblem(str(exc)) from exc


def job_models(options: JobOptions) -> Models:
    if options.progress:  # seconds of silence otherwise
        print(f"loading {options.model or 'the default model'} ...", file=sys.stderr, flush=True)
    runtime = pick_runtime(options.device, _compute_type(options))
    return load_models(options.model, options.assistant, runtime, options.cache_dir)


def _compute_type(options: JobOptions) -> str:
    """``auto`` on a job started before (on this kind of device) is the compute type it was started with: its
    tokens depend on it, and a night's job started in float32 resumes as it began."""
    if options.compute_type != "auto" or options.restart:
        return options.compute_type
    job = JobDir(options.out_dir)
    recorded = []
    with contextlib.suppress(DamagedState):
        recorded.append(((job.read_job() or {}).get("config", {}).get("models") or {}).get("runtime"))
    if not any(recorded):  # job.json lost or damaged: the rows say what made them
        with contextlib.suppress(DamagedState):
            recorded = [row.get("runtime") for row in job.file_rows()]
    device = pick_runtime(options.device, "float32").device.type
    for describe in recorded:
        compute_type = recorded_compute_type(describe)
        if compute_type and describe.startswith(f"{device}/"):
            return compute_type
    return "auto"


def _prepare(
    refs: list[InputRef],
    job: JobDir,
    config: dict,
    options: JobOptions,
    summary: JobSummary,
    registration: workers.Registration,
) -> tuple[list[Task], dict[str, str | None], dict[str, str]]:
    """Planning, under the preparation lock: --restart, the configuration check, job.json, what is left.

    A worker joining a job that other workers are at work on never starts it over (with accelerate every
    rank passes the same --restart: the first one restarts, the others join) and adds its inputs to the
    job's. Returns the files to decode, per file the ``finished_at`` of its row as planned (a row that changed
    since was written by another worker), and the output file name of each input path."""
    others = workers.live_workers(job.root, besides=registration.path)
    if options.restart:
        _restart(job, others)
    rows = _readable_rows(job)
    _check_config(job, config, rows, joining=bool(others))
    inputs = [str(r.path) for r in refs]
    wanted = outputs.spec(options.subtitles, options.output_dir, options.cue_rules) if options.writes_outputs else None
    if others:
        earlier = {}
        with contextlib.suppress(DamagedState):
            earlier = job.read_job() or {}
        inputs = list(dict.fromkeys([*earlier.get("inputs", []), *inputs]))
        wanted = outputs.join(earlier.get("outputs"), wanted, job.root)
    job.write_job(config, inputs, wanted)
    todo = _plan(refs, job, rows, options, summary)
    names = output_names([p for r in rows for p in row_paths(r)] + [str(ref.path) for ref in refs])
    return todo, {r["file_id"]: r.get("finished_at") for r in rows}, names


def _restart(job: JobDir, others: list[str]) -> None:
    if others:
        log.warning(
            "--restart: %d other worker(s) are at work on %s; joining them instead of starting over",
            len(others),
            job.root,
        )
        return
    job.clear()
    workers.forget_counts(job.root)


def restart_job(root: Path, restart: bool) -> None:
    """--restart for a launch of several workers: done once, before they start (the workers get no --restart)."""
    if restart:
        job = JobDir(root)
        with job.locked():
            _restart(job, workers.live_workers(job.root))


@dataclass
class _Worker:
    """What one worker's loop over the job's files needs, planned once."""

    job: JobDir
    transcriber: Transcriber
    options: JobOptions
    config_hash: str
    stop: threading.Event
    summary: JobSummary
    seen: dict[str, str | None]  # per file, the finished_at of its row as planned
    diarizer: Diarizer | None = None
    names: dict[str, str] = field(default_factory=dict)  # input path -> output file name (outputs.output_names)
    only: set[str] | None = None  # the input paths whose outputs this run writes (None: every one)
    alone: bool = False  # a child process decoding suspect files alone for its worker (isolate.py)
    watched: isolate.Watched | None = None  # that child, seen from its worker

    def write_outputs(self, row: dict, segments: list[dict]) -> None:
        """A file's outputs (txt, srt, ...) as soon as its row is done or relabelled: a job stopped at 6 a.m.
        has every finished episode's files."""
        options = self.options
        if not options.subtitles:
            return
        out_dir = options.output_dir or options.out_dir / "subtitles"
        problems: list[str] = []
        written = write_outputs(
            row, segments, options.subtitles, out_dir, options.cue_rules, self.names, self.only, problems
        )
        self.summary.wrote(written)
        self.summary.warnings += [(str(out_dir), problem) for problem in problems]
        _trace("written", row["file_id"], len(written.paths))

    def decode_all(self, todo: list[Task]) -> None:
        """Longest first, suspects last (a process died on them: isolate.py); each file only under its claim.
        Files held by other workers are tried again after a pass (their worker may have died), until a pass
        finds nothing to take."""
        job, summary = self.job, self.summary
        probed = _probe_all(todo, job.root)
        durations = {
            k: info.duration_s or 0.0 if isinstance(info, audio.AudioInfo) else 0.0 for k, info in probed.items()
        }
        suspects = {t.file_id for t in todo if workers.suspect(job.root, t.file_id)}
        pending = sorted(todo, key=lambda task: (task.file_id in suspects, -durations[task.file_id]))
        with progress.job_bar(sum(durations.values()), self.options.progress) as job_bar:
            looked_again = False
            lookahead = _Lookahead(self.job, self.transcriber, self.options.cut, probed)
            try:
                while pending:
                    busy = []
                    at = 0
                    while at < len(pending):
                        if self.stop.is_set():  # a stop between files (short files end inside one batch)
                            raise Interrupted()
                        group = self._group(pending, at, probed)
                        at += len(group)
                        claims = []
                        for task in group:
                            held = workers.claim(job.root, task.file_id, job.persisted_batches(task.file_id))
                            if held is None:
                                busy.append(task)
                                continue
                            if self._finished_by_others(task, held):
                                continue
                            _trace("claimed", task.file_id, held.deaths)
                            claims.append((task, held))
                        streams = lookahead.take([task for task, _ in claims])
                        if at < len(pending):  # read the next group while this one decodes
                            lookahead.open(self._group(pending, at, probed))
                        self._decode_claims(claims, probed, durations, job_bar, streams)
                    if len(busy) < len(pending):
                        looked_again = False
                    elif looked_again:  # held twice in a row: their workers are at them
                        summary.elsewhere = len(busy)
                        return
                    else:  # once more after a moment: `podscribe status` may have been testing a lock just then
                        looked_again = True
                        time.sleep(0.5)
                    pending = busy
            finally:
                lookahead.close()
                if self.watched is not None:
                    self.watched.close()

    def _finished_by_others(self, task: Task, held: workers.Claim) -> bool:
        """Whether another worker wrote the file's row after this one planned (checked as soon as it is claimed:
        a file held by another worker when this one first passed is usually done when it passes again, and a
        batch across files must not decode it). (A row as planned is not a reason to skip: a done row whose
        segments table was damaged is planned to be redone.)"""
        row = self.job.file_row(task.file_id)
        if row is None or row.get("finished_at") == self.seen.get(task.file_id):
            return False
        self.summary.by_others += 1
        held.finish()
        held.release()
        return True

    def _group(self, pending: list[Task], at: int, probed: dict) -> list[Task]:
        """The task at ``at``; if it is a file of one piece, the one-piece files right after it too, up to the
        batch size (one batch for several files)."""
        group = [pending[at]]
        per_file_language = _LanguageLock(self.transcriber, {}).active  # --language-mode file: detected per file
        if self._one_piece(pending[at], probed) and not per_file_language:
            for task in pending[at + 1 : at + self.transcriber.options.batch_size]:
                if not self._one_piece(task, probed):
                    break
                group.append(task)
        return group

    def _one_piece(self, task: Task, probed: dict) -> bool:
        info = probed[task.file_id]
        return (
            not task.relabel
            and isinstance(info, audio.AudioInfo)
            and 0 < (info.duration_s or 0.0) <= self.options.cut.max_s
        )

    def _decode_claims(self, claims: list, probed: dict, durations: dict, job_bar, streams: dict) -> None:
        """Decode claimed files: several one-piece files in one batch first (``_decode_together``), then each
        file under its claim as ever. Claims not yet finished when something stops the loop are given back.
        ``streams``: the files' audio as it was opened ahead (``_Lookahead``); each is closed once used."""
        pending, current = list(claims), None
        try:
            ready = self._decode_together(claims, probed, streams) if len(claims) > 1 else {}
            while pending:
                task, current = pending.pop(0)
                self.decode_claimed(
                    task,
                    current,
                    probed[task.file_id],
                    durations[task.file_id],
                    ready.get(task.file_id),
                    streams.get(task.file_id),
                )
                current.release()
                current = None
                job_bar.advance(durations[task.file_id])
        except BaseException:
            if current is not None:  # decode_claimed gave it back, or its death counts (as ever)
                current.release()
            for _, held in pending:  # not started: no death
                held.give_back()
                held.release()
            raise
        finally:
            for stream in streams.values():
                stream.items.close()

    def _decode_together(self, claims: list, probed: dict, streams: dict) -> dict[str, Predecoded]:
        """Cross-file batches: the one piece of each claimed file, decoded in one batch. A file a worker already
        died on is left to decode alone (a file that kills workers must not take others with it); a file that
        does not cut into exactly one piece, or cannot be read, is left to its own run, which records why."""
        start = time.monotonic()
        entries = []
        for task, held in claims:
            if held.deaths:
                continue
            # taken out of ``streams``: a file left to its own run (no batch formed, a failed batch) reads afresh
            stream = streams.pop(task.file_id, None) or _read(
                task.file_id, task.refs[0].path, self.options.cut, probed[task.file_id].duration_s, self.transcriber, {}
            )
            try:
                cut = list(stream.items)
            except (AudioError, RuntimeError, ValueError, MemoryError):  # its own run records why
                continue
            finally:
                stream.items.close()
            if len(cut) == 1 and cut[0][1] is None:
                piece, _, heard = cut[0]
                entries.append((task.file_id, piece, stream.notes, heard))
        if len(entries) < 2:
            return {}
        paths = {task.file_id: task.refs[0].path for task, _ in claims}
        for file_id, *_ in entries:
            _crash_test(paths[file_id], [0])
        try:
            results = self.transcriber.transcribe(
                [piece.samples for _, piece, _, _ in entries], None, [heard for *_, heard in entries]
            )
        except Abandoned:  # a stop during a second chance: these files are decoded again on resume
            raise Interrupted() from None
        except (RuntimeError, ValueError, MemoryError):  # each file then decodes alone, and fails alone
            log.warning("a batch across files failed; decoding them one by one:\n%s", traceback.format_exc())
            return {}
        return_freed_memory()
        share = (time.monotonic() - start) / len(entries)
        ready = {}
        for (file_id, piece, notes, _), result in zip(entries, results):
            _trace("decoded", file_id, piece.index)
            piece.samples = None
            ready[file_id] = Predecoded([(piece, result)], notes, share)
        return ready

    def decode_claimed(
        self,
        task: Task,
        held: workers.Claim,
        probed: audio.AudioInfo | AudioError | None,
        duration_s: float,
        ready: Predecoded | None = None,
        stream: _Stream | None = None,
    ) -> None:
        # Another worker wrote its row after this one planned. (A row as planned is not a reason to skip: a
        # done row whose segments table was damaged is planned to be redone.)
        row = self.job.file_row(task.file_id)
        if row is not None and row.get("finished_at") != self.seen.get(task.file_id):
            self.summary.by_others += 1
            held.finish()
            return
        if held.deaths and not self.alone:  # a process died on it: decoded alone, watched (isolate.py)
            if stream is not None:
                stream.items.close()
            self._decode_watched(task, held, probed, duration_s)
            return
        try:
            self.decode_file(task, row, probed, duration_s, ready, stream)
        except BaseException:
            held.give_back()  # the worker lives: a clean stop or a full disk is no death
            raise
        held.finish()

    def _decode_watched(self, task: Task, held: workers.Claim, probed, duration_s: float) -> None:
        """A suspect file, decoded in the child that serves this worker until it is done, or until the child
        died ``max_attempts`` times in a row at the same place while this worker lived: then it fails."""
        if self.watched is None:
            self.watched = isolate.Watched(self.options, self.config_hash, self.stop)
        while True:
            try:
                outcome = self.watched.decode(task, probed, duration_s, self.seen.get(task.file_id))
            except BaseException:
                held.give_back()
                raise
            if not isinstance(outcome, isolate.Died):
                isolate.add_counts(self.summary, outcome)
                held.finish()
                return
            witnessed = held.died_alone(self.job.persisted_batches(task.file_id))
            log.warning(
                "%s: the process decoding it alone died (%s), %d time(s) in a row at the same place",
                task.refs[0].path,
                outcome,
                witnessed,
            )
            if witnessed >= self.options.max_attempts:
                self._fail_poisoned(task, probed, witnessed, outcome)
                held.finish()
                return

    def decode_unclaimed(self, task: Task, probed, duration_s: float) -> None:
        """In the child that decodes a suspect file alone: its worker holds the claim."""
        self.decode_file(task, self.job.file_row(task.file_id), probed, duration_s)

    def _context(self, task: Task, probed, bar=None, ready=None, stream=None) -> FileContext:
        options = self.options
        return FileContext(
            task,
            self.transcriber,
            options.cut,
            self.job,
            self.stop,
            probed,
            bar,
            options.checkpoint_pieces,
            self.config_hash,
            self.diarizer,
            ready,
            stream,
        )

    def decode_file(
        self,
        task: Task,
        row: dict | None,
        probed: audio.AudioInfo | AudioError | None,
        duration_s: float,
        ready: Predecoded | None = None,
        stream: _Stream | None = None,
    ) -> None:
        with progress.file_bar(task.refs[0].path.name, duration_s, self.options.progress) as file_bar:
            ctx = self._context(task, probed, file_bar, ready, stream)
            if task.relabel and row is not None and not _needs_labels(row, self.diarizer.config):
                self.summary.by_others += 1  # another worker labelled it in the meantime
                finished = None
            elif task.relabel and row is not None:
                finished = _relabel_one(ctx, row, self.summary)
            else:
                finished = _run_one(ctx, self.summary)
            if finished is not None and finished[0]["status"] == "done":
                self.write_outputs(*finished)

    def _fail_poisoned(self, task: Task, probed, deaths: int, died: isolate.Died) -> None:
        ctx = self._context(task, probed)
        if task.relabel:  # labels are not worth a transcript
            warning = f"labelling its speakers alone killed the process {deaths} times ({died}): left unlabelled"
            self.summary.warnings.append((str(ctx.path), warning))
            self.summary.already_done += 1  # its transcript is
            log.warning("%s: %s", ctx.path, warning)
            return
        _poisoned(ctx, deaths, died, self.summary)


def alone_worker(options: JobOptions, config_hash: str, stop) -> _Worker:
    """The worker inside the child that decodes suspect files alone (isolate.py): its own models, no claims."""
    if options.threads:
        import torch

        torch.set_num_threads(options.threads)
    models = job_models(options)
    transcriber = Transcriber(models, options.decode)
    job = JobDir(options.out_dir)
    return _Worker(
        job, transcriber, options, config_hash, stop, JobSummary(job.root), {}, _diarizer(options), alone=True
    )


def _poisoned(ctx: FileContext, deaths: int, died: isolate.Died, summary: JobSummary) -> None:
    """A file that killed the process decoding it alone ``deaths`` times in a row while its worker lived: a
    failed row (its checkpoints are kept, so --retry-failed resumes from them) instead of one more death."""
    row = {
        **_base_row(ctx),
        **tables.file_failed(
            f"decoding this file alone killed the process {deaths} times in a row at the same place ({died}; out "
            "of memory, a crash in a native library?) while the job went on; rerun with --retry-failed to try again"
        ),
        "finished_at": _now(),
        "decode_mode": ctx.transcriber.mode,
    }
    ctx.job.write_file(row, [], [], keep_partial=True)
    summary.failed += 1
    summary.failures.append((str(ctx.path), row["error"]))
    log.warning("%s: %s", ctx.path, row["error"])
