"""The manifest's tables: each one's Arrow schema beside the function that builds its rows from the
pipeline's records (records.py), and the inverse the runner needs to resume inside a file.

A column is added in two places that sit side by side here (schema, builder), and to its row's shape in
rows.py; tests/test_tables.py checks that every builder fills exactly its schema's columns and that a
checkpoint reads back equal, tests/test_rows.py that each shape has exactly its schema's columns.
manifest.py stores the rows (atomic writes, locks); manifests/README.md documents the columns for users.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from pathlib import Path

import pyarrow as pa

from ..audio.media import SAMPLE_RATE, Piece
from ..facts.records import DecodeStats, PieceResult, RawSegment, Redecode, Segment, Word
from ..facts.rows import PieceRow, SegmentRow, WordRow

# -- schemas ----------------------------------------------------------------------------------------------

FILES_SCHEMA = pa.schema(
    [
        ("file_id", pa.string()),
        ("path", pa.string()),
        ("size_bytes", pa.int64()),
        ("mtime", pa.float64()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("warnings", pa.string()),
        ("duration_s", pa.float64()),
        ("language", pa.string()),
        ("n_pieces", pa.int32()),
        ("n_segments", pa.int32()),
        ("n_words", pa.int32()),
        ("wall_s", pa.float64()),
        ("realtime_factor", pa.float64()),
        ("model", pa.string()),
        ("model_sha256", pa.string()),
        ("assistant", pa.string()),
        ("runtime", pa.string()),
        ("decode_mode", pa.string()),
        ("main_calls", pa.int64()),
        ("draft_calls", pa.int64()),
        ("drafted", pa.int64()),
        ("accepted", pa.int64()),
        ("finished_at", pa.string()),
        ("paths", pa.list_(pa.string())),  # every input path with this content (copies), `path` first
        ("config_hash", pa.string()),  # of the configuration that decides the output (speed-only keys left out)
        ("n_flagged", pa.int32()),  # segments with a flag
        ("n_redecodes", pa.int32()),  # second chances tried (pieces.redecodes)
        ("recovered_tokens", pa.int32()),  # text tokens they brought (kept)
        ("worker", pa.string()),  # host:pid of the worker that wrote the row
        ("n_speakers", pa.int32()),  # with --diarize: speakers in its segments (null: not diarized)
        ("speaker_config", pa.string()),  # hash of the diarization options its labels were made with
        ("title", pa.string()),  # the container's tags (audio.TAGS), null where it has none
        ("artist", pa.string()),
        ("date", pa.string()),
    ]
)

WORD = pa.struct(
    [
        ("word", pa.string()),
        ("start_s", pa.float64()),
        ("end_s", pa.float64()),
        ("probability", pa.float32()),
        ("speaker", pa.string()),  # with --diarize
    ]
)

SEGMENTS_SCHEMA = pa.schema(
    [
        ("file_id", pa.string()),
        ("path", pa.string()),
        ("segment", pa.int32()),
        ("start_s", pa.float64()),
        ("end_s", pa.float64()),
        ("text", pa.string()),
        ("piece", pa.int32()),
        ("avg_logprob", pa.float32()),
        ("no_speech_prob", pa.float32()),
        ("words", pa.list_(WORD)),  # null when the job ran without word timestamps
        ("language", pa.string()),  # of the piece it was decoded in (detected or given)
        (
            "flags",
            pa.list_(pa.string()),
        ),  # what to check: no_speech, low_logprob, loop, language (decode/review.py: FLAGS)
        ("speaker", pa.string()),  # with --diarize: "Speaker 1", ... (null: not diarized)
    ]
)

PIECES_SCHEMA = pa.schema(
    [
        ("file_id", pa.string()),
        ("piece", pa.int32()),
        ("start_s", pa.float64()),
        ("end_s", pa.float64()),
        ("start_sample", pa.int64()),
        ("end_sample", pa.int64()),
        ("language", pa.string()),
        ("skipped", pa.string()),
        ("no_speech_prob", pa.float32()),
        ("avg_logprob", pa.float32()),
        ("compression_ratio", pa.float32()),
        ("n_tokens", pa.int32()),
        ("main_calls", pa.int32()),
        ("draft_calls", pa.int32()),
        ("drafted", pa.int32()),
        ("accepted", pa.int32()),
        ("passes", pa.int32()),
        ("redecode_calls", pa.int32()),  # of main_calls, those spent on second chances (null: written before it)
        # second chances (decode/recover.py): piece-relative span, why, the text token ids kept from it
        (
            "redecodes",
            pa.list_(
                pa.struct(
                    [
                        ("start_s", pa.float64()),
                        ("end_s", pa.float64()),
                        ("reason", pa.string()),
                        ("tokens", pa.list_(pa.int32())),
                    ]
                )
            ),
        ),
    ]
)

# A decoded piece as persisted before its file is finished: the pieces columns plus what
# stitching needs again (piece-relative segments) and the token ids.
PARTIAL_SCHEMA = pa.schema(
    [
        *PIECES_SCHEMA,
        ("n_samples", pa.int64()),
        ("tokens", pa.list_(pa.int32())),
        (
            "segments",
            pa.list_(
                pa.struct(
                    [
                        ("start_s", pa.float64()),
                        ("end_s", pa.float64()),
                        ("text", pa.string()),
                        ("n_tokens", pa.int32()),
                        ("words", pa.list_(WORD)),
                    ]
                )
            ),
        ),
    ]
)

TABLES = {"files": FILES_SCHEMA, "segments": SEGMENTS_SCHEMA, "pieces": PIECES_SCHEMA}


def no_rows(schema: pa.Schema) -> pa.Table:
    """A table of no rows. Not ``Schema.empty_table``: it goes through ``pa.array``, which imports pandas to ask
    whether the values are one of its types (0.15-0.5 s of a job's or a search's start; decision 0054)."""
    return pa.Table.from_batches([], schema=schema)


# -- rows from records ------------------------------------------------------------------------------------


def word_rows(words: list[Word] | None) -> list[WordRow] | None:
    return None if words is None else [asdict(w) for w in words]


def piece_row(file_id: str, p: Piece, r: PieceResult) -> PieceRow:
    return {
        "file_id": file_id,
        "piece": p.index,
        "start_s": round(p.start_sample / SAMPLE_RATE, 3),
        "end_s": round(p.end_sample / SAMPLE_RATE, 3),
        "start_sample": p.start_sample,
        "end_sample": p.end_sample,
        "language": r.language,
        "skipped": r.skipped,
        "no_speech_prob": r.no_speech_prob,
        "avg_logprob": r.avg_logprob,
        "compression_ratio": r.compression_ratio,
        "n_tokens": len(r.tokens),
        **asdict(r.stats),
        "redecodes": [asdict(d) for d in r.redecodes],
    }


def partial_row(file_id: str, p: Piece, r: PieceResult) -> dict:
    """A decoded piece as checkpointed before its file is finished (read back by ``from_partial``)."""
    return {
        **piece_row(file_id, p, r),
        "n_samples": p.n_samples,
        "tokens": r.tokens,
        "segments": [
            {
                "start_s": s.start_s,
                "end_s": s.end_s,
                "text": s.text,
                "n_tokens": s.n_tokens,
                "words": word_rows(s.words),
            }
            for s in r.segments
        ],
    }


def from_partial(row: dict) -> PieceResult:
    """The inverse of ``partial_row`` (but for what is kept in memory only: VAD spans, segment token ids).
    Columns added since a checkpoint was written read as null: counted as 0."""
    return PieceResult(
        tokens=list(row["tokens"]),
        segments=[
            RawSegment(
                s["start_s"],
                s["end_s"],
                s["text"],
                s["n_tokens"],
                None if s["words"] is None else [Word(**w) for w in s["words"]],
            )
            for s in row["segments"]
        ],
        language=row["language"],
        no_speech_prob=row["no_speech_prob"],
        avg_logprob=row["avg_logprob"],
        compression_ratio=row["compression_ratio"],
        skipped=row["skipped"],
        stats=DecodeStats(**{f.name: row.get(f.name) or 0 for f in fields(DecodeStats)}),
        redecodes=[Redecode(**d) for d in row.get("redecodes") or ()],
    )


def segment_rows(
    file_id: str, path: Path, segments: list[Segment], pieces: dict[int, PieceResult], flags: dict[int, list[str]]
) -> list[SegmentRow]:
    return [
        {
            "file_id": file_id,
            "path": str(path),
            "segment": s.index,
            "start_s": s.start_s,
            "end_s": s.end_s,
            "text": s.text,
            "piece": s.piece,
            "language": pieces[s.piece].language,
            "avg_logprob": s.avg_logprob,
            "no_speech_prob": s.no_speech_prob,
            "words": word_rows(s.words),
            "flags": flags[s.index],
            "speaker": None,  # set by the diarize stage (diarize/turns.label_rows)
        }
        for s in segments
    ]


def file_identity(
    file_id: str,
    path: Path,
    paths: list[str],
    size_bytes: int | None,
    mtime: float | None,
    models: dict,
    config_hash: str | None,
    worker: str,
) -> dict:
    """The part of a files row known before decoding: which input, which models, which worker."""
    return {
        "file_id": file_id,
        "path": str(path),
        "paths": paths,
        "size_bytes": size_bytes,
        "mtime": mtime,
        "model": models["model"],
        "model_sha256": models["model_sha256"],
        "assistant": models["assistant"],
        "runtime": models["runtime"],
        "finished_at": None,
        "config_hash": config_hash,
        "worker": worker,
    }


def file_done(
    duration_s: float,
    done: list[tuple[Piece, PieceResult]],
    segments: list[Segment],
    warnings: list[str],
    language: str | None,
    flags: dict[int, list[str]],
    tags: tuple[tuple[str, str], ...] = (),
) -> dict:
    """The outcome part of a files row for a decoded file: totals over its pieces. ``language``: the file's
    (``file_language``), which the caller already needed for the flags; ``tags``: the container's (audio.TAGS)."""
    total = DecodeStats()
    for _, r in done:
        total.add(r.stats)
    return {
        "status": "done",
        "error": None,
        "warnings": "; ".join(warnings) or None,
        "duration_s": round(duration_s, 3),
        "language": language,
        "n_pieces": len(done),
        "n_segments": len(segments),
        "n_words": sum(len(s.text.split()) for s in segments),
        "main_calls": total.main_calls,
        "draft_calls": total.draft_calls,
        "drafted": total.drafted,
        "accepted": total.accepted,
        "n_flagged": sum(bool(f) for f in flags.values()),
        "n_redecodes": sum(len(r.redecodes) for _, r in done),
        "recovered_tokens": sum(len(d.tokens) for _, r in done for d in r.redecodes),
        "n_speakers": None,
        "speaker_config": None,
        **{name: dict(tags).get(name) for name in ("title", "artist", "date")},
    }


def file_labelled(row: dict, segments: list[SegmentRow], n_speakers: int, speaker_config: str) -> dict:
    """A done files row after the diarize stage labelled (and maybe split) its segments (a failed labelling's
    warning from an earlier run dropped)."""
    kept = [w for w in (row.get("warnings") or "").split("; ") if w and not w.startswith("diarization failed")]
    return {
        **row,
        "warnings": "; ".join(kept) or None,
        "n_segments": len(segments),
        "n_flagged": sum(bool(s["flags"]) for s in segments),
        "n_speakers": n_speakers,
        "speaker_config": speaker_config,
    }


def file_failed(error: str) -> dict:
    return {"status": "failed", "error": error}


def file_closed(row: dict, wall_s: float, finished_at: str, decode_mode: str) -> dict:
    """The files row as written when the file ends: how long it took, when, how it was decoded."""
    row = {**row, "wall_s": round(wall_s, 3), "finished_at": finished_at, "decode_mode": decode_mode}
    if row.get("duration_s"):
        row["realtime_factor"] = round(row["duration_s"] / max(wall_s, 1e-9), 3)
    return row
