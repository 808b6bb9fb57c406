"""The CLI end to end: mixed containers and bad inputs, Parquet read back three ways."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from helpers import ffmpeg, podscribe
from pipeline.facts.runtime import auto_compute_type

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def inputs(clips, tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("inputs")
    by_name = {c.path.name: c.path for c in clips}
    good_m4a = d / "gb0 part one.m4a"
    ffmpeg("-i", str(by_name["gb0.wav"]), "-t", "40", "-c:a", "aac", str(good_m4a))
    odd = d / "-dash ünïcödé 'quoted'.flac"
    shutil.copy(by_name["jfk.flac"], odd)
    mp3 = d / "long.mp3"
    ffmpeg("-i", str(by_name["gb0.wav"]), "-t", "60", str(mp3))
    truncated = d / "truncated.mp3"
    truncated.write_bytes(mp3.read_bytes()[: mp3.stat().st_size // 2])
    # jfk wired out of phase: its two channels cancel in ffmpeg's mono mix (decoded, that was 11 s of silence)
    out_of_phase = d / "out_of_phase.mp3"
    ffmpeg("-i", str(by_name["jfk.flac"]), "-af", "pan=stereo|c0=c0|c1=-1*c0", str(out_of_phase))
    empty = d / "empty.mp3"
    empty.write_bytes(b"")
    text = d / "notes.mp3"
    text.write_text("show notes\n" * 50)
    (d / "no_audio_here").mkdir()
    (d / "no_audio_here" / "readme.txt").write_text("nothing")
    return {
        "m4a": good_m4a,
        "odd": odd,
        "truncated": truncated,
        "out_of_phase": out_of_phase,
        "empty": empty,
        "text": text,
        "emptydir": d / "no_audio_here",
        "missing": d / "missing.wav",
    }


@pytest.fixture(scope="module")
def job(inputs, cache_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("job") / "manifests"
    args = [str(p) for p in inputs.values()]
    result = podscribe("transcribe", "--model", "tiny.en", "--out", str(out), "-q", "--", *args, cache_dir=cache_dir)
    return out, result


def test_good_files_done_bad_files_failed_with_readable_errors(job, inputs):
    out, result = job
    assert result.returncode == 0, result.stderr
    assert "done: 4, failed: 4" in result.stdout
    rows = {Path(r["path"]).name: r for r in ds.dataset(out / "files").to_table().to_pylist()}
    assert rows[inputs["m4a"].name]["status"] == "done" and rows[inputs["odd"].name]["status"] == "done"
    truncated = rows[inputs["truncated"].name]  # its readable half is kept, and marked
    assert truncated["status"] == "done" and truncated["warnings"].startswith("truncated"), truncated
    expected_errors = {
        "empty": "empty",
        "text": 'not audio: ffmpeg found no audio stream in it; it is a text file starting "show notes',
        "emptydir": "no audio files",
        "missing": "not found",
    }
    for key, message in expected_errors.items():
        row = rows[inputs[key].name]
        assert row["status"] == "failed" and message in row["error"], row
        assert Path(row["path"]).name == inputs[key].name
    assert "Invalid argument" not in rows[inputs["text"].name]["error"]  # ffprobe's word for a text file
    out_of_phase = rows[inputs["out_of_phase"].name]  # transcribed from the channels' difference, and said
    assert out_of_phase["status"] == "done" and out_of_phase["n_words"] > 15, out_of_phase
    assert "out of phase: the two channels cancel" in out_of_phase["warnings"], out_of_phase
    done = rows[inputs["m4a"].name]
    assert (
        done["model"] == "tiny.en"
        and len(done["model_sha256"]) == 64
        and done["runtime"] == f"cpu/{auto_compute_type('cpu')}/sdpa"
    )  # the CPU default
    assert done["n_pieces"] >= 2 and done["n_words"] > 60 and 39.5 < done["duration_s"] <= 40.1


def test_manifests_read_with_pyarrow_pandas_and_datasets(job, inputs):
    import datasets
    import pandas as pd

    out, _ = job
    table = ds.dataset(out / "segments").to_table()
    frame = pd.read_parquet(out / "segments")
    hf = datasets.load_dataset(
        "parquet", data_files=str(out / "segments" / "*.parquet"), split="train", cache_dir=str(out.parent / "hf-cache")
    )
    assert table.num_rows == len(frame) == hf.num_rows > 5
    assert set(hf.column_names) >= {"file_id", "path", "segment", "start_s", "end_s", "text", "piece"}
    jfk = frame[frame.path.str.endswith(inputs["odd"].name)].sort_values("segment")
    assert "ask not what your country can do for you" in " ".join(jfk.text).lower()
    files = datasets.load_dataset(
        "parquet", data_files=str(out / "files" / "*.parquet"), split="train", cache_dir=str(out.parent / "hf-cache")
    )
    assert sorted(files["status"]) == ["done"] * 4 + ["failed"] * 4
    assert not [p for p in out.rglob("*") if p.suffix == ".tmp" or p.name.startswith(".") and p.name != ".lock"], (
        "temp files left"
    )


def test_rerun_skips_finished_files_and_rewrites_nothing(job, inputs, cache_dir):
    out, _ = job
    done = sorted((out / "segments").glob("*.parquet"))
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in done}
    result = podscribe(
        "transcribe",
        "--model",
        "tiny.en",
        "--out",
        str(out),
        "-q",
        "--",
        str(inputs["m4a"]),
        str(inputs["odd"]),
        cache_dir=cache_dir,
    )
    assert result.returncode == 0 and "already done: 2" in result.stdout
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in done} == before


def test_exit_codes(inputs, cache_dir, tmp_path):
    nothing = podscribe(
        "transcribe",
        "--model",
        "tiny.en",
        "--out",
        str(tmp_path / "j"),
        "-q",
        str(inputs["empty"]),
        str(inputs["missing"]),
        cache_dir=cache_dir,
    )
    assert nothing.returncode == 1 and "failed: 2" in nothing.stdout
    assert "file is empty" in nothing.stderr
    bad_args = podscribe("transcribe", "--batch-size", "0", "--out", str(tmp_path / "k"), "x.mp3", cache_dir=cache_dir)
    assert bad_args.returncode == 2
    bad_model = podscribe(
        "transcribe",
        "--model",
        "/nonexistent/model",
        "--out",
        str(tmp_path / "m"),
        str(inputs["odd"]),
        cache_dir=cache_dir,
    )
    assert bad_model.returncode == 2 and "not a directory" in bad_model.stderr


def test_models_list_and_import(cache_dir):
    listed = podscribe("models", "list", cache_dir=cache_dir)
    assert listed.returncode == 0 and "base" in listed.stdout and "tiny.en" in listed.stdout
    imported = podscribe("models", "import", "tiny.en", "--cache-dir", str(cache_dir), cache_dir=cache_dir)
    assert imported.returncode == 0
    assert (Path(imported.stdout.strip()) / "model.safetensors").is_file()


def test_job_file_runs_and_flags_override_it(inputs, cache_dir, tmp_path):
    import json

    job = tmp_path / "nightly.toml"
    job.write_text(
        f'name = "nightly"\ninputs = [{json.dumps(str(inputs["odd"]))}]\nmodel = "tiny.en"\n'
        f"batch_size = 3\nout = {json.dumps(str(tmp_path / 'out'))}\n"
    )
    result = podscribe("run", str(job), "--batch-size", "2", "-q", cache_dir=cache_dir)
    assert result.returncode == 0, result.stderr
    record = json.loads((tmp_path / "out" / "job.json").read_text())
    assert record["config"]["decode"]["batch_size"] == 2 and record["config"]["models"]["model"] == "tiny.en"
    status = podscribe("status", str(tmp_path / "out"), cache_dir=cache_dir)
    assert "1 done, 0 failed, 0 pending" in status.stdout
    job.write_text('inputs = ["x.mp3"]\nbatchsize = 3\n')
    bad = podscribe("run", str(job), cache_dir=cache_dir)
    assert bad.returncode == 2 and "unknown keys batchsize" in bad.stderr


def test_the_example_job_file_documents_every_key():
    from pipeline.cli import jobfile

    text = (REPO / "jobs" / "example.toml").read_text()
    assert all(f"{key} =" in text for key in jobfile.KEYS)
    assert jobfile.load(REPO / "jobs" / "example.toml")["name"] == "example"


def test_files_done_by_the_workers_of_a_launch_are_not_already_done(tiny_en_models, clips, tmp_path):
    """--workers N: a worker that plans after its siblings finished files counts them as theirs, not as done
    before the launch ("already done: 4" on a fresh job)."""
    from dataclasses import replace
    from datetime import datetime, timezone

    from pipeline.job.config import JobOptions
    from pipeline.job.run import run

    jfk = next(c.path for c in clips if c.path.name == "jfk.flac")
    launched = datetime.now(timezone.utc).isoformat(timespec="seconds")
    options = JobOptions(out_dir=tmp_path / "job", progress=False)
    assert run([str(jfk)], options, models=tiny_en_models).done == 1  # a sibling worker of this launch
    late = run([str(jfk)], replace(options, launched_at=launched), models=tiny_en_models)
    assert (late.already_done, late.by_others) == (0, 1)
    assert run([str(jfk)], options, models=tiny_en_models).already_done == 1  # a later run: done before it
