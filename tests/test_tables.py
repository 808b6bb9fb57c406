"""Fast tests (no model): every row builder fills exactly its table's columns, rows from records are
accepted by their Arrow schema, and a checkpointed piece reads back as the record it was written from."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pyarrow as pa

from pipeline.audio.media import SAMPLE_RATE, Piece
from pipeline.decode import review
from pipeline.decode.stitch import stitch
from pipeline.facts.records import DecodeStats, PieceResult, RawSegment, Redecode, Segment, Word
from pipeline.storage import tables

PIECE = Piece(3, 90 * SAMPLE_RATE, None, 17 * SAMPLE_RATE)
RESULT = PieceResult(
    tokens=[50364, 440, 1627, 50464, 50514, 286, 50600],
    segments=[
        RawSegment(0.0, 2.0, " The cat", 2, [Word(" The", 0.0, 0.4, 0.9), Word(" cat", 0.4, 2.0, 0.8)], [440, 1627]),
        RawSegment(3.0, 4.72, " I", 1, [Word(" I", 3.0, 4.72, 0.7)], [286]),
    ],
    language="en",
    no_speech_prob=0.01,
    avg_logprob=-0.3,
    compression_ratio=1.1,
    skipped=None,
    speech=[(0.0, 2.1), (2.9, 4.8)],
    stats=DecodeStats(main_calls=5, draft_calls=9, drafted=9, accepted=6, passes=1),
    redecodes=[Redecode(2.0, 3.0, "uncovered speech", [286])],
)
IN_MEMORY_ONLY = {"speech"}  # VAD spans: the coverage check's input, not a result


def _check(rows: list[dict], schema: pa.Schema) -> None:
    for row in rows:
        assert set(row) == set(schema.names), set(row) ^ set(schema.names)
    pa.Table.from_pylist(rows, schema=schema)  # every value has its column's type


def test_a_pieces_row_has_every_column_and_every_stat():
    row = tables.piece_row("f1", PIECE, RESULT)
    _check([row], tables.PIECES_SCHEMA)
    assert {f.name for f in fields(DecodeStats)} <= set(tables.PIECES_SCHEMA.names), "a stat with no column"
    assert (row["start_s"], row["end_s"], row["drafted"], row["passes"]) == (90.0, 107.0, 9, 1)


def test_a_checkpointed_piece_reads_back_as_the_record_it_was_written_from():
    row = tables.partial_row("f1", PIECE, RESULT)
    _check([row], tables.PARTIAL_SCHEMA)
    stored = pa.Table.from_pylist([row], schema=tables.PARTIAL_SCHEMA).to_pylist()[0]  # float32 columns round
    back = tables.from_partial(stored)
    kept = {f.name for f in fields(PieceResult)} - IN_MEMORY_ONLY
    for name in kept - {"segments", "no_speech_prob", "avg_logprob", "compression_ratio"}:
        assert getattr(back, name) == getattr(RESULT, name), name
    assert [(s.start_s, s.end_s, s.text, s.n_tokens, [w.word for w in s.words]) for s in back.segments] == [
        (s.start_s, s.end_s, s.text, s.n_tokens, [w.word for w in s.words]) for s in RESULT.segments
    ]
    assert abs(back.avg_logprob - RESULT.avg_logprob) < 1e-6


def test_a_checkpoint_written_before_a_stat_existed_reads_it_as_zero():
    row = tables.partial_row("f1", PIECE, RESULT)
    row.update(drafted=None, passes=None, redecodes=None)  # columns added later read as null
    back = tables.from_partial(row)
    assert (back.stats.drafted, back.stats.passes, back.stats.main_calls, back.redecodes) == (0, 0, 5, [])


def test_segments_and_files_rows_have_every_column():
    segments = stitch([PIECE], [RESULT], 200.0)
    assert all(isinstance(s, Segment) for s in segments)
    flags = {s.index: review.segment_flags(RESULT, "de", _options()) for s in segments}
    _check(tables.segment_rows("f1", Path("/a.mp3"), segments, {PIECE.index: RESULT}, flags), tables.SEGMENTS_SCHEMA)
    identity = tables.file_identity(
        "f1",
        Path("/a.mp3"),
        ["/a.mp3"],
        10,
        1.5,
        {"model": "base", "model_sha256": "x", "assistant": None, "runtime": "cpu"},
        "hash",
        "host:1",
    )
    done = tables.file_closed(
        {**identity, **tables.file_done(107.0, [(PIECE, RESULT)], segments, [], "en", flags)},
        12.0,
        "2026-12-01T00:00:00+00:00",
        "plain",
    )
    _check([done], tables.FILES_SCHEMA)
    assert (done["drafted"], done["n_flagged"], done["recovered_tokens"], done["realtime_factor"]) == (9, 2, 1, 8.917)
    failed = tables.file_closed({**identity, **tables.file_failed("bad")}, 1.0, "now", "plain")
    assert set(failed) <= set(tables.FILES_SCHEMA.names)
    pa.Table.from_pylist([failed], schema=tables.FILES_SCHEMA)


def _options():
    from pipeline.decode import DecodeOptions

    return DecodeOptions()


def test_a_table_no_file_wrote_yet_reads_as_no_rows_of_its_schema(tmp_path):
    """A new job dir's tables: no rows, each column of its schema (or of the columns asked for)."""
    from pipeline.storage.manifest import JobDir

    job = JobDir(tmp_path / "job")
    assert job.read("files").schema == tables.FILES_SCHEMA and job.read("files").num_rows == 0
    assert job.read("segments", columns=["file_id", "text"]).schema.names == ["file_id", "text"]
    assert job.file_rows() == []


def test_the_pandas_import_beside_a_job_is_quiet_where_pandas_is_missing(tmp_path):
    """pyarrow needs no pandas: a job where it cannot be imported starts as any other, no traceback from the thread
    that imports it beside the job."""
    import subprocess
    import sys

    code = (
        "import sys, threading\n"
        "class NoPandas:  # as on a machine without it\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'pandas': raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, NoPandas())\n"
        "from pipeline.storage.manifest import import_pandas_beside\n"
        "import_pandas_beside()\n"
        "[t.join() for t in threading.enumerate() if t.name == 'podscribe-import']\n"
        "print('started')\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True
    )
    assert run.returncode == 0 and run.stdout == "started\n" and run.stderr == "", run.stderr
