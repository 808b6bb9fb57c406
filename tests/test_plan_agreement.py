"""`podscribe status`, `--dry-run` and a run's planning read one job state (job/state.py) and one plan (job/plan.py):
what status counts is what the next run does, in every state a job dir can be in, damaged ones included.

Before they shared the rule but not the reading, status counted a done file whose path now holds other audio as
done (the run forgets that row) beside its new content as pending: one input, two files.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.cli.status import job_status
from pipeline.diarize.options import DiarizeOptions
from pipeline.job.config import JobOptions
from pipeline.job.dryrun import _job_state
from pipeline.job.inputs import expand_inputs
from pipeline.job.run import prepare
from pipeline.job.summary import JobSummary
from pipeline.storage import workers
from pipeline.storage.identity import identify
from pipeline.storage.manifest import JobDir
from pipeline.storage.tables import FILES_SCHEMA, PIECES_SCHEMA, SEGMENTS_SCHEMA


def _audio(path: Path, tag: bytes) -> Path:
    path.write_bytes(b"RIFF" + tag * 2000)  # planning never decodes: what matters is the content id
    return path


def _finished(job: JobDir, path: Path, status: str = "done", duration_s: float = 60.0) -> str:
    """A files row (with its segments and pieces when done) for the content ``path`` holds now."""
    file_id = identify(path)[0].file_id
    row = {name: None for name in FILES_SCHEMA.names}
    row.update(file_id=file_id, path=str(path), paths=[str(path)], status=status, duration_s=duration_s,
               wall_s=6.0, warnings="", finished_at="2026-12-01T00:00:00", n_pieces=0, n_segments=0)  # fmt: skip
    segments, pieces = [], []
    if status == "done":
        row.update(n_pieces=2, n_segments=2, n_words=4)
        for i in range(2):
            seg = {name: None for name in SEGMENTS_SCHEMA.names}
            seg.update(file_id=file_id, path=str(path), segment=i, start_s=30.0 * i, end_s=30.0 * i + 5, text="hi",
                       piece=i, flags=[], words=[])  # fmt: skip
            segments.append(seg)
            piece = {name: None for name in PIECES_SCHEMA.names}
            piece.update(file_id=file_id, path=str(path), piece=i, start_s=30.0 * i, end_s=30.0 * i + 29.5)
            pieces.append(piece)
    else:
        row.update(error="cannot be decoded: planted")
    job.write_file(row, segments, pieces)
    return file_id


def _job(tmp: Path, labels: bool) -> tuple[Path, list[str], dict]:
    """A job dir in every state at once; returns it, its inputs and its configuration."""
    audio = tmp / "audio"
    audio.mkdir()
    root = tmp / "job"
    job = JobDir(root)
    config = {"models": {"main": "planted"}, **({"diarize": asdict(DiarizeOptions())} if labels else {})}
    done = _audio(audio / "done.mp3", b"A")
    _finished(job, done)
    _finished(job, _audio(audio / "failed.mp3", b"B"), status="failed")
    new = _audio(audio / "new.mp3", b"C")  # no row: pending
    half = _audio(audio / "half.mp3", b"H")  # no row, checkpoints: pending, half done
    half_id = identify(half)[0].file_id
    (root / "partial" / half_id).mkdir(parents=True)
    pq.write_table(pa.table({"n_samples": [16000 * 30]}), root / "partial" / half_id / "batch-00000.parquet")
    cut = _audio(audio / "cut.mp3", b"D")  # done, its segments table cut short by a crash of the disk
    segments = root / "segments" / f"{_finished(job, cut)}.parquet"
    segments.write_bytes(segments.read_bytes()[:-100])
    lost = _audio(audio / "lost.mp3", b"E")  # done, its pieces table gone
    (root / "pieces" / f"{_finished(job, lost)}.parquet").unlink()
    gone = _audio(audio / "gone.mp3", b"F")  # done, its audio gone since: results kept, missing
    _finished(job, gone)
    gone.unlink()
    replaced = _audio(audio / "replaced.mp3", b"G")  # done, then another episode saved over it
    _finished(job, replaced)
    os.utime(_audio(replaced, b"g"), ns=(10**18, 10**18))
    copy = _audio(audio / "copy of done.mp3", b"A")  # a copy of a done file: done, one more path
    never = audio / "never.mp3"  # never could be read, no row: pending (the run gives it a failed row)
    inputs = [str(p) for p in (done, audio / "failed.mp3", new, half, cut, lost, gone, replaced, copy, never)]
    job.write_job(config, inputs)
    job.verified.save()
    return root, inputs, config


@pytest.mark.parametrize("labels", [False, True], ids=["plain", "diarize"])
def test_status_dry_run_and_planning_agree_on_every_state(tmp_path, labels):
    root, inputs, config = _job(tmp_path, labels)
    options = JobOptions(out_dir=root, diarize=DiarizeOptions() if labels else None)
    before = job_status(root)
    dry = _job_state(expand_inputs(inputs), root, options)
    untouched = {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}
    assert before.missing == [inputs[6]], "the input that cannot be read now keeps its results"
    assert before.done == 2 and before.failed == 1, "done (and its copy), the one whose audio is gone; failed"
    assert before.pending == 6 and before.in_progress == 1, "new, half done, cut, lost, replaced's new audio, never"
    assert len(before.unlabelled) == (2 if labels else 0), "done, and gone (its audio cannot be read now)"
    assert any("damaged table" in p and "segments" in p for p in before.problems)
    assert any("pieces table of" in p and "lost.mp3" in p for p in before.problems)
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()} == untouched, "status wrote"

    summary = JobSummary(root)
    tasks, *_ = prepare(expand_inputs(inputs), JobDir(root), config, options, summary, workers.Registration(root))
    decode = [t for t in tasks if not t.relabel]
    relabel = [t for t in tasks if t.relabel]
    assert len(decode) == before.pending - before.unread, "status's pending is what the run decodes"
    assert summary.skipped_failed == before.failed
    assert summary.already_done + len(relabel) + len(summary.missing) == before.done
    assert [p for p, _ in summary.missing] == before.missing
    assert len(relabel) + sum("no speaker labels" in w for _, w in summary.warnings) == len(before.unlabelled)
    assert summary.copies == 1
    assert sorted(str(r.path) for t in decode for r in t.refs) == sorted(str(r.path) for r in dry.left)
    assert len(dry.done) == before.done - len(before.missing) + summary.copies
    assert len(dry.failed) == before.failed and dry.missing == before.missing and len(dry.damaged) == 1

    after = job_status(root)  # the run's repairs made: status says the same
    for count in ("done", "failed", "pending", "in_progress", "missing"):
        assert getattr(after, count) == getattr(before, count), count
    assert list((root / "damaged" / "segments").iterdir()), "the damaged table was moved aside, not deleted"
    assert not any("damaged table" in p for p in after.problems)
    assert len(after.unlabelled) == len(before.unlabelled)
