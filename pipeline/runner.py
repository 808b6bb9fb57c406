"""The job runner: inputs → audio → decode → stitch → manifest, one file at a time.

Built to survive the night:
- one runner per job dir (an OS lock that dies with its process);
- each decoded batch of pieces is persisted atomically before the next one
  starts, so a killed run resumes inside a half-done file, and a finished
  file is consolidated into its tables;
- rerunning skips inputs already done (and failed ones, unless asked to retry);
  a changed configuration is refused unless the job is restarted;
- a file that fails becomes a failed row with a readable error; the job goes on;
- the first Ctrl-C finishes the batch in hand, persists it and stops cleanly.
"""

from __future__ import annotations

import glob
import logging
import os
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from tqdm import tqdm

from . import audio
from .audio import AudioError, CutOptions, Piece
from .decode import DecodeOptions, PieceResult, RawSegment, Transcriber
from .manifest import JobDir, fingerprint
from .models.load import Models, load_models
from .runtime import pick_runtime
from .stitch import Segment, stitch
from .timing import Word

log = logging.getLogger("podscribe")

AUDIO_EXTENSIONS = {".mp3", ".m4a", ".m4b", ".aac", ".opus", ".ogg", ".oga", ".flac", ".wav", ".mp4", ".m4v",
                    ".mkv", ".mka", ".webm", ".mov", ".wma", ".aif", ".aiff"}


class Interrupted(Exception):
    """The run was asked to stop (Ctrl-C); everything decoded so far is persisted."""


@dataclass
class InputRef:
    path: Path
    error: str | None = None  # known-bad before any decoding (no match, empty directory)


@dataclass
class JobOptions:
    out_dir: Path
    model: str | None = None  # None: the runtime's default
    assistant: str | None = "default"
    device: str = "auto"
    dtype: str = "auto"
    decode: DecodeOptions = field(default_factory=DecodeOptions)
    cut: CutOptions = field(default_factory=CutOptions)
    cache_dir: Path | None = None
    progress: bool = True
    retry_failed: bool = False
    restart: bool = False
    checkpoint_pieces: bool = True  # persist each decoded batch (resume inside a file); off only to measure its cost
    subtitles: list[str] = field(default_factory=list)  # formats to export when the job ends


@dataclass
class JobSummary:
    out_dir: Path
    done: int = 0
    failed: int = 0
    already_done: int = 0
    skipped_failed: int = 0
    audio_s: float = 0.0
    wall_s: float = 0.0
    failures: list[tuple[str, str]] = field(default_factory=list)
    subtitles: list[Path] = field(default_factory=list)


def expand_inputs(inputs: list[str]) -> list[InputRef]:
    """Files as given; folders searched recursively for audio/video; glob patterns expanded."""
    refs: list[InputRef] = []
    for raw in inputs:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in AUDIO_EXTENSIONS)
            refs += [InputRef(p) for p in found] or [InputRef(path, f"directory has no audio files ({path})")]
        elif not path.exists() and any(c in raw for c in "*?["):
            found = sorted(Path(p) for p in glob.glob(raw, recursive=True) if Path(p).is_file())
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


def _trace(event: str, file_id: str, piece: int) -> None:
    """Test hook: PODSCRIBE_TRACE=<file> appends one line per decoded / persisted piece."""
    path = os.environ.get("PODSCRIBE_TRACE")
    if path:
        with open(path, "a") as f:
            f.write(f"{event} {file_id} {piece} {os.getpid()}\n")


# -- one file -------------------------------------------------------------------


@dataclass
class FileContext:
    ref: InputRef
    file_id: str
    transcriber: Transcriber
    cut: CutOptions
    job: JobDir
    stop: threading.Event
    probed: audio.AudioInfo | AudioError
    bar: tqdm | None = None
    checkpoint: bool = True


def _batches(pieces: Iterator[Piece], size: int) -> Iterator[list[Piece]]:
    batch: list[Piece] = []
    for piece in pieces:
        batch.append(piece)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _to_partial(file_id: str, piece: Piece, r: PieceResult) -> dict:
    row = _piece_row(file_id, piece, r)
    row.update(n_samples=piece.n_samples, tokens=r.tokens,
               segments=[{"start_s": s.start_s, "end_s": s.end_s, "text": s.text, "n_tokens": s.n_tokens,
                          "words": _word_rows(s.words)} for s in r.segments])
    return row


def _from_partial(row: dict) -> tuple[Piece, PieceResult]:
    piece = Piece(row["piece"], row["start_sample"], None, row["n_samples"])
    result = PieceResult(
        tokens=list(row["tokens"]),
        segments=[RawSegment(s["start_s"], s["end_s"], s["text"], s["n_tokens"],
                             None if s["words"] is None else [Word(**w) for w in s["words"]]) for s in row["segments"]],
        language=row["language"], no_speech_prob=row["no_speech_prob"], avg_logprob=row["avg_logprob"],
        compression_ratio=row["compression_ratio"], skipped=row["skipped"], main_calls=row["main_calls"],
        draft_calls=row["draft_calls"], drafted=row.get("drafted") or 0, accepted=row["accepted"], passes=row.get("passes") or 0)
    return piece, result


def _lookahead(batches: Iterator[list[Piece]]) -> Iterator[tuple[list[Piece], bool]]:
    """Each batch with whether it is the file's last one."""
    current = next(batches, None)
    while current is not None:
        following = next(batches, None)
        yield current, following is None
        current = following


def _decoded_pieces(ctx: FileContext, info: audio.AudioInfo, warnings: list[str]):
    """Every piece of the file with its result: persisted ones are reused, the rest decoded and persisted.

    The last batch of a file is not checkpointed: the whole file is consolidated right after it.
    """
    persisted = ctx.job.read_partial(ctx.file_id)
    batches = _batches(audio.pieces(ctx.ref.path, ctx.cut, info.duration_s, warnings), ctx.transcriber.options.batch_size)
    for batch, last in _lookahead(batches):
        known = [persisted.get(p.index) for p in batch]
        if all(k is not None and k["start_sample"] == p.start_sample and k["n_samples"] == p.n_samples
               for k, p in zip(known, batch)):
            results = [_from_partial(k)[1] for k in known]
        else:
            results = ctx.transcriber.transcribe([p.samples for p in batch])
            for p in batch:
                _trace("decoded", ctx.file_id, p.index)
            if ctx.checkpoint and not last:
                rows = [_to_partial(ctx.file_id, p, r) for p, r in zip(batch, results)]
                ctx.job.write_partial(ctx.file_id, batch[0].index, rows)
                for p in batch:
                    _trace("persisted", ctx.file_id, p.index)
        for piece, result in zip(batch, results):
            piece.samples = None  # the audio is no longer needed; keep memory bounded
            if ctx.bar is not None:
                ctx.bar.update(round(piece.duration_s, 2))
            yield piece, result
        if ctx.stop.is_set() and not last:
            raise Interrupted()


def transcribe_file(ctx: FileContext) -> tuple[dict, list[dict], list[dict]]:
    """Decode one input; raise AudioError for bad input."""
    if isinstance(ctx.probed, AudioError):
        raise ctx.probed
    info = ctx.probed
    warnings: list[str] = []
    done = list(_decoded_pieces(ctx, info, warnings))
    if not done:
        raise AudioError("file decodes to no audio samples")
    duration = done[-1][0].end_sample / audio.SAMPLE_RATE
    segments = stitch([p for p, _ in done], [r for _, r in done], duration)
    return (_file_row(duration, done, segments, warnings), _segment_rows(ctx.file_id, ctx.ref, segments),
            [_piece_row(ctx.file_id, p, r) for p, r in done])


def _file_row(duration, done, segments: list[Segment], warnings) -> dict:
    languages = [r.language for _, r in done if r.language and not r.skipped]
    return {
        "status": "done", "error": None, "warnings": "; ".join(warnings) or None,
        "duration_s": round(duration, 3), "language": max(set(languages), key=languages.count) if languages else None,
        "n_pieces": len(done), "n_segments": len(segments), "n_words": sum(len(s.text.split()) for s in segments),
        "main_calls": sum(r.main_calls for _, r in done), "draft_calls": sum(r.draft_calls for _, r in done),
        "drafted": sum(r.drafted for _, r in done), "accepted": sum(r.accepted for _, r in done),
    }


def _segment_rows(file_id: str, ref: InputRef, segments: list[Segment]) -> list[dict]:
    return [{"file_id": file_id, "path": str(ref.path), "segment": s.index, "start_s": s.start_s,
             "end_s": s.end_s, "text": s.text, "piece": s.piece, "avg_logprob": s.avg_logprob,
             "no_speech_prob": s.no_speech_prob, "words": _word_rows(s.words)} for s in segments]


def _word_rows(words: list[Word] | None) -> list[dict] | None:
    if words is None:
        return None
    return [{"word": w.word, "start_s": w.start_s, "end_s": w.end_s, "probability": w.probability} for w in words]


def _piece_row(file_id: str, p: Piece, r: PieceResult) -> dict:
    return {"file_id": file_id, "piece": p.index, "start_s": round(p.start_sample / audio.SAMPLE_RATE, 3),
            "end_s": round(p.end_sample / audio.SAMPLE_RATE, 3), "start_sample": p.start_sample,
            "end_sample": p.end_sample, "language": r.language, "skipped": r.skipped,
            "no_speech_prob": r.no_speech_prob, "avg_logprob": r.avg_logprob,
            "compression_ratio": r.compression_ratio, "n_tokens": len(r.tokens), "main_calls": r.main_calls,
            "draft_calls": r.draft_calls, "drafted": r.drafted, "accepted": r.accepted, "passes": r.passes}


def _base_row(ref: InputRef, file_id: str, models: Models) -> dict:
    try:
        stat = ref.path.stat()
        size, mtime = stat.st_size, stat.st_mtime
    except OSError:
        size, mtime = None, None
    d = models.describe()
    return {"file_id": file_id, "path": str(ref.path), "size_bytes": size, "mtime": mtime,
            "model": d["model"], "model_sha256": d["model_sha256"], "assistant": d["assistant"],
            "runtime": d["runtime"], "finished_at": None}


def _run_one(ctx: FileContext, summary: JobSummary) -> None:
    t0 = time.monotonic()
    row = _base_row(ctx.ref, ctx.file_id, ctx.transcriber.models)
    try:
        outcome, segments, pieces = transcribe_file(ctx)
    except AudioError as exc:
        outcome, segments, pieces = {"status": "failed", "error": str(exc)}, [], []
    except (RuntimeError, ValueError, MemoryError) as exc:  # a decoder failure (out of memory too) on this file only
        log.debug("decoding %s failed:\n%s", ctx.ref.path, traceback.format_exc())
        outcome, segments, pieces = {"status": "failed", "error": f"decoding failed: {type(exc).__name__}: {exc}"}, [], []
    wall = time.monotonic() - t0
    row.update(outcome, wall_s=round(wall, 3), finished_at=_now(), decode_mode=ctx.transcriber.mode)
    if row.get("duration_s"):
        row["realtime_factor"] = round(row["duration_s"] / max(wall, 1e-9), 3)
    ctx.job.write_file(row, segments, pieces)
    for piece in pieces:
        _trace("persisted", ctx.file_id, piece["piece"])
    if row["status"] == "done":
        summary.done += 1
        summary.audio_s += row["duration_s"]
        log.info("done %s: %.0f s of audio in %.0f s, %d segments", ctx.ref.path, row["duration_s"], wall,
                 row["n_segments"])
    else:
        summary.failed += 1
        summary.failures.append((str(ctx.ref.path), row["error"]))
        log.warning("%s: %s", ctx.ref.path, row["error"])


# -- the job ----------------------------------------------------------------------


def job_config(options: JobOptions, models: Models) -> dict:
    """What decides the output: a resumed job must match it (but for SPEED_ONLY)."""
    return {"models": models.describe(), "decode": asdict(options.decode), "cut": asdict(options.cut)}


# Every decoding mode gives the main model's own tokens (tests/test_speculative.py), so the assistant and
# the batch size may change between runs of a job: resume a night's job with --assistant auto, or smaller batches.
SPEED_ONLY = ("models.assistant", "decode.batch_size")


def _plan(refs: list[InputRef], job: JobDir, options: JobOptions, summary: JobSummary) -> list[tuple[InputRef, str]]:
    rows = job.file_rows()
    status = {r["file_id"]: r["status"] for r in rows}
    file_ids = [fingerprint(ref.path) for ref in refs]
    current = set(file_ids)
    paths = {str(ref.path) for ref in refs}
    for r in rows:  # the file at this path changed: its old results go
        if r["path"] in paths and r["file_id"] not in current:
            job.forget(r["file_id"])
    todo = []
    for ref, file_id in zip(refs, file_ids):
        state = status.get(file_id)
        if state == "done":
            summary.already_done += 1
        elif state == "failed" and not options.retry_failed:
            summary.skipped_failed += 1
        else:
            todo.append((ref, file_id))
    return todo


def _probe(ref: InputRef) -> audio.AudioInfo | AudioError:
    """Probed once per file: for the progress total, then for decoding (an error becomes its failed row)."""
    if ref.error:
        return AudioError(ref.error)
    try:
        return audio.probe(ref.path)
    except AudioError as exc:
        return exc


def run(inputs: list[str], options: JobOptions, models: Models | None = None,
        stop: threading.Event | None = None) -> JobSummary:
    start = time.monotonic()
    stop = stop or threading.Event()
    job = JobDir(options.out_dir)
    job.lock()
    if models is None:
        models = load_models(options.model, options.assistant, pick_runtime(options.device, options.dtype),
                             options.cache_dir)
    config = job_config(options, models)
    if options.restart:
        job.clear()
    job.check_config(config, SPEED_ONLY)
    refs = expand_inputs(inputs)
    job.write_job(config, [str(r.path) for r in refs])
    transcriber = Transcriber(models, options.decode)
    summary = JobSummary(Path(options.out_dir))
    todo = _plan(refs, job, options, summary)
    probed = {id(ref): _probe(ref) for ref, _ in todo}
    durations = {key: 0.0 if isinstance(info, AudioError) else info.duration_s or 0.0 for key, info in probed.items()}
    with tqdm(total=round(sum(durations.values()) / 3600, 3), unit="h", desc="job", disable=not options.progress,
              bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.2f}/{total:.2f} h audio [{elapsed}<{remaining}]",
              position=0) as job_bar:
        for ref, file_id in todo:
            with tqdm(total=round(durations[id(ref)], 1), unit="s", desc=ref.path.name[:40], leave=False,
                      disable=not options.progress, position=1,
                      bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s [{remaining}]") as file_bar:
                ctx = FileContext(ref, file_id, transcriber, options.cut, job, stop, probed[id(ref)], file_bar,
                                  options.checkpoint_pieces)
                _run_one(ctx, summary)
            job_bar.update(round(durations[id(ref)] / 3600, 3))
    if options.subtitles:
        from .export import export_job

        summary.subtitles = export_job(options.out_dir, options.subtitles)
    summary.wall_s = time.monotonic() - start
    return summary
