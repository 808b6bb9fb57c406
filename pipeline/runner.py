"""The job runner: inputs → audio → decode → stitch → manifest, one file at a time.

A file that fails becomes a failed row with a readable error and the job goes
on; a file already done in the job dir (same content fingerprint) is skipped,
so rerunning the same command finishes what an interrupted run left.
"""

from __future__ import annotations

import glob
import logging
import time
import traceback
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from tqdm import tqdm

from . import audio
from .audio import AudioError, CutOptions, Piece
from .decode import DecodeOptions, PieceResult, Transcriber
from .manifest import JobDir, fingerprint
from .models.load import Models, load_models
from .runtime import pick_runtime
from .stitch import Segment, stitch

log = logging.getLogger("podscribe")

AUDIO_EXTENSIONS = {".mp3", ".m4a", ".m4b", ".aac", ".opus", ".ogg", ".oga", ".flac", ".wav", ".mp4", ".m4v",
                    ".mkv", ".mka", ".webm", ".mov", ".wma", ".aif", ".aiff"}


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


@dataclass
class JobSummary:
    out_dir: Path
    done: int = 0
    failed: int = 0
    already_done: int = 0
    audio_s: float = 0.0
    wall_s: float = 0.0
    failures: list[tuple[str, str]] = field(default_factory=list)


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


def _batches(pieces, size: int):
    batch: list[Piece] = []
    for piece in pieces:
        batch.append(piece)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _batch_size(transcriber: Transcriber) -> int:
    # transformers' assisted generation decodes one piece at a time; batching only pays without it
    return 1 if transcriber.models.assistant is not None else transcriber.options.batch_size


def transcribe_file(ref: InputRef, file_id: str, transcriber: Transcriber, cut: CutOptions,
                    bar: tqdm | None = None) -> tuple[dict, list[dict], list[dict]]:
    """Decode one input; raise AudioError for bad input."""
    if ref.error:
        raise AudioError(ref.error)
    info = audio.probe(ref.path)
    warnings: list[str] = []
    done: list[tuple[Piece, PieceResult]] = []
    for batch in _batches(audio.pieces(ref.path, cut, info.duration_s, warnings), _batch_size(transcriber)):
        results = transcriber.transcribe([p.samples for p in batch])
        for piece, result in zip(batch, results):
            done.append((piece, result))
            piece.samples = None  # the audio is no longer needed; keep memory bounded
            if bar is not None:
                bar.update(round(piece.duration_s, 2))
    duration = (done[-1][0].end_sample / audio.SAMPLE_RATE) if done else 0.0
    if not done:
        raise AudioError("file decodes to no audio samples")
    segments = stitch([p for p, _ in done], [r for _, r in done], duration)
    return _file_row(info, duration, done, segments, warnings), _segment_rows(file_id, ref, segments), \
        _piece_rows(file_id, done)


def _file_row(info, duration, done, segments: list[Segment], warnings) -> dict:
    languages = [r.language for _, r in done if r.language and not r.skipped]
    return {
        "status": "done", "error": None, "warnings": "; ".join(warnings) or None,
        "duration_s": round(duration, 3), "language": max(set(languages), key=languages.count) if languages else None,
        "n_pieces": len(done), "n_segments": len(segments), "n_words": sum(len(s.text.split()) for s in segments),
        "main_calls": sum(r.main_calls for _, r in done), "draft_calls": sum(r.draft_calls for _, r in done),
        "accepted": sum(r.accepted for _, r in done),
    }


def _segment_rows(file_id: str, ref: InputRef, segments: list[Segment]) -> list[dict]:
    return [{"file_id": file_id, "path": str(ref.path), "segment": s.index, "start_s": s.start_s,
             "end_s": s.end_s, "text": s.text, "piece": s.piece, "avg_logprob": s.avg_logprob,
             "no_speech_prob": s.no_speech_prob} for s in segments]


def _piece_rows(file_id: str, done: list[tuple[Piece, PieceResult]]) -> list[dict]:
    return [{"file_id": file_id, "piece": p.index, "start_s": round(p.start_sample / audio.SAMPLE_RATE, 3),
             "end_s": round(p.end_sample / audio.SAMPLE_RATE, 3), "start_sample": p.start_sample,
             "end_sample": p.end_sample, "language": r.language, "skipped": r.skipped,
             "no_speech_prob": r.no_speech_prob, "avg_logprob": r.avg_logprob,
             "compression_ratio": r.compression_ratio, "n_tokens": len(r.tokens), "main_calls": r.main_calls,
             "draft_calls": r.draft_calls, "accepted": r.accepted} for p, r in done]


def job_config(options: JobOptions, models: Models) -> dict:
    return {"models": models.describe(), "decode": asdict(options.decode), "cut": asdict(options.cut)}


def run(inputs: list[str], options: JobOptions, models: Models | None = None) -> JobSummary:
    start = time.monotonic()
    refs = expand_inputs(inputs)
    if models is None:
        models = load_models(options.model, options.assistant, pick_runtime(options.device, options.dtype),
                             options.cache_dir)
    transcriber = Transcriber(models, options.decode)
    job = JobDir(options.out_dir)
    job.write_job(job_config(options, models))
    summary = JobSummary(Path(options.out_dir))
    todo = []
    for ref in refs:
        file_id = fingerprint(ref.path)
        if job.file_status(file_id) == "done":
            summary.already_done += 1
        else:
            todo.append((ref, file_id))
    total = sum(_probe_duration(ref) for ref, _ in todo)
    with tqdm(total=round(total, 2), unit="s", desc="audio", disable=not options.progress,
              bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s audio [{elapsed}<{remaining}, {rate_fmt}]") as bar:
        for ref, file_id in todo:
            _run_one(ref, file_id, transcriber, options, job, summary, bar)
    summary.wall_s = time.monotonic() - start
    return summary


def _probe_duration(ref: InputRef) -> float:
    if ref.error:
        return 0.0
    try:
        return audio.probe(ref.path).duration_s or 0.0
    except AudioError:
        return 0.0


def _run_one(ref, file_id, transcriber, options, job: JobDir, summary: JobSummary, bar) -> None:
    t0 = time.monotonic()
    row = _base_row(ref, file_id, transcriber.models)
    try:
        outcome, segments, pieces = transcribe_file(ref, file_id, transcriber, options.cut, bar)
    except AudioError as exc:
        outcome, segments, pieces = {"status": "failed", "error": str(exc)}, [], []
    except (RuntimeError, ValueError, MemoryError) as exc:  # a decoder failure on this file only
        log.debug("decoding %s failed:\n%s", ref.path, traceback.format_exc())
        outcome, segments, pieces = {"status": "failed", "error": f"decoding failed: {type(exc).__name__}: {exc}"}, [], []
    wall = time.monotonic() - t0
    row.update(outcome, wall_s=round(wall, 3), finished_at=_now())
    if row.get("duration_s"):
        row["realtime_factor"] = round(row["duration_s"] / max(wall, 1e-9), 3)
    job.write_file(row, segments, pieces)
    if row["status"] == "done":
        summary.done += 1
        summary.audio_s += row["duration_s"]
    else:
        summary.failed += 1
        summary.failures.append((str(ref.path), row["error"]))
        log.warning("%s: %s", ref.path, row["error"])
