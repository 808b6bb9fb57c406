"""Whisper mode as a whisper user works in it (`-o DIR`, no --out): rerun with another model in the same folder,
edit a transcript, add an input; outputs written as each file is done; files that are podscribe's own only
ever replaced, never a person's edit."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from helpers import REPO, TRACED, finish, lines, podscribe, wait_for_progress
from pipeline.outputs.export import FORMATS
from pipeline.outputs.ownership import OutputDir


@pytest.fixture(scope="module")
def three(clips, tmp_path_factory) -> list[Path]:
    """jfk.flac, a 5 s clip, a 9.7 s clip, copied into a fresh folder."""
    folder = tmp_path_factory.mktemp("inputs")
    by_name = {c.path.name: c.path for c in clips}
    out = []
    for name in ("jfk.flac", "stereo_diarization_left.wav", "LJ001-0001.wav"):
        shutil.copy(by_name[name], folder / name)
        out.append(folder / name)
    return out


def _outputs(folder: Path, stem: str) -> dict[str, str]:
    return {fmt: (folder / f"{stem}.{fmt}").read_text() for fmt in FORMATS}


def _job_text(job: Path, path: Path) -> str:
    rows = ds.dataset(job / "segments").to_table().to_pylist()
    return "".join(r["text"].strip() + "\n" for r in sorted(rows, key=lambda r: r["segment"]) if r["path"] == str(path))


def test_another_model_in_the_same_folder_keeps_every_edit_and_writes_only_what_was_named(three, cache_dir, tmp_path):
    jfk, left, lj = three
    out = tmp_path / "out"

    first = podscribe("transcribe", "--model", "tiny.en", "-q", "-f", "all", "-o", str(out), str(jfk), str(left),
                      cache_dir=cache_dir, cwd=tmp_path)  # fmt: skip
    assert first.returncode == 0, first.stderr
    tiny_left = _outputs(out, "stereo_diarization_left")
    edited = "And so, my fellow Americans: ask not.\n(edited by hand)\n"
    (out / "jfk.txt").write_text(edited)

    # another model, the edited input and a third one: another job in the same folder, no exit 4
    second = podscribe("transcribe", "--model", "base", "--language", "en", "-q", "-f", "all", "-o", str(out),
                       str(jfk), str(lj), cache_dir=cache_dir, cwd=tmp_path)  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert (out / "jfk.txt").read_text() == edited, "a hand-edited transcript was overwritten"
    jobs = sorted(p for p in (out / "podscribe-manifests").iterdir() if p.is_dir())
    assert len(jobs) == 2 and {p.name.split("-")[0] for p in jobs} == {"tiny.en", "base"}, jobs
    base_job = next(p for p in jobs if p.name.startswith("base"))
    new_txt = out / "jfk.new.txt"
    if _job_text(base_job, jfk) != _job_text(next(p for p in jobs if p != base_job), jfk):
        assert new_txt.read_text() == _job_text(base_job, jfk)
        assert "jfk.new.txt" in second.stderr and "kept" in second.stderr
    for stem in ("jfk", "stereo_diarization_left", "LJ001-0001"):
        assert all((out / f"{stem}.{fmt}").stat().st_size > 0 for fmt in FORMATS), stem
    assert (out / "LJ001-0001.txt").read_text() == _job_text(base_job, lj)
    assert _outputs(out, "stereo_diarization_left") == tiny_left, "an input not named in the command was rewritten"
    jfk_srt = (out / "jfk.srt").read_text()  # not edited: replaced by the newer model's

    # the first configuration again, with only the third input: the first job grows; nothing else is written
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir() if p.is_file()}
    third = podscribe("transcribe", "--model", "tiny.en", "-q", "-f", "all", "-o", str(out), str(lj),
                      cache_dir=cache_dir, cwd=tmp_path)  # fmt: skip
    assert third.returncode == 0, third.stderr
    assert "done: 1" in third.stdout
    after = {p.name: p.stat().st_mtime_ns for p in out.iterdir() if p.is_file()}
    changed = {name for name in after if after[name] != before.get(name)}
    assert changed and all(name.startswith("LJ001-0001.") for name in changed), changed
    assert (out / "jfk.srt").read_text() == jfk_srt and (out / "jfk.txt").read_text() == edited


def test_output_ownership_rule(tmp_path):
    folder = OutputDir(tmp_path)
    assert folder.write({"a.txt": b"one\n"}).kept == []
    assert folder.write({"a.txt": b"two\n"}).kept == [] and (tmp_path / "a.txt").read_bytes() == b"two\n"
    (tmp_path / "a.txt").write_text("mine\n")
    assert folder.write({"a.txt": b"two\n"}).kept == [(tmp_path / "a.txt", None)]  # nothing new: no .new file
    assert not (tmp_path / "a.new.txt").exists()
    written = folder.write({"a.txt": b"three\n"})
    assert written.kept == [(tmp_path / "a.txt", tmp_path / "a.new.txt")]
    assert (tmp_path / "a.txt").read_text() == "mine\n" and (tmp_path / "a.new.txt").read_text() == "three\n"
    (tmp_path / "a.new.txt").write_text("mine too\n")
    folder.write({"a.txt": b"four\n"})
    assert (tmp_path / "a.new.txt").read_text() == "mine too\n" and (tmp_path / "a.new-2.txt").read_text() == "four\n"
    (tmp_path / "b.srt").write_text("not podscribe's\n")  # another tool's file of the same name
    folder.write({"b.srt": b"1\n"})
    assert (tmp_path / "b.srt").read_text() == "not podscribe's\n" and (tmp_path / "b.new.srt").read_text() == "1\n"
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        "a.new-2.txt",
        "a.new.txt",
        "a.txt",
        "b.new.srt",
        "b.srt",
    ]


def test_an_input_given_with_dot_dot_gets_its_outputs_and_each_file_is_counted_once(three, cache_dir, tmp_path):
    """``../in/jfk.flac`` from another folder, ``-o subs/`` relative: the outputs were not written at all (the path
    kept its ``..``, the rows' did not), and a relative -o counted each file twice (5 files as 10)."""
    (tmp_path / "in").mkdir()
    (tmp_path / "run").mkdir()
    shutil.copy(three[0], tmp_path / "in" / "jfk.flac")
    args = ("transcribe", "--model", "tiny.en", "-q", "-f", "txt,srt", "-o", "subs/", "../in/jfk.flac")
    result = podscribe(*args, cache_dir=cache_dir, cwd=tmp_path / "run")
    subs = tmp_path / "run" / "subs"
    assert result.returncode == 0 and "done: 1" in result.stdout, result.stdout + result.stderr
    assert sorted(p.name for p in subs.glob("jfk.*")) == ["jfk.srt", "jfk.txt"]
    assert f"subtitles: 2 files in {subs}" in result.stdout, result.stdout


def test_outputs_are_written_as_each_file_is_done(three, cache_dir, tmp_path):
    """Killed after the first file is done: that file's outputs are there, the second's are not."""
    jfk, left, _ = three
    trace = tmp_path / "trace"
    out = tmp_path / "out"
    env = {
        **os.environ,
        "PODSCRIBE_CACHE": str(cache_dir),
        "PODSCRIBE_TRACE": str(trace),
        "PYTHONPATH": os.environ["PYTHONPATH"],
    }
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, str(TRACED), "transcribe", "--model", "tiny.en", "-q", "-f", "txt,srt",
         "--batch-size", "1", "--out", str(tmp_path / "job"), "-o", str(out), str(jfk), str(left)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    seen = 0
    while not any(line.startswith("written ") for line in _trace(trace)):
        assert wait_for_progress(proc, trace, seen), "the job ended before any file's outputs were written"
        seen = len(lines(trace))
    os.kill(proc.pid, signal.SIGKILL)
    finish(proc)
    written = next(line for line in _trace(trace) if line.startswith("written "))
    first = ds.dataset(tmp_path / "job" / "files").to_table().to_pylist()
    done = [row for row in first if row["file_id"] == written.split()[1]]
    assert done and done[0]["status"] == "done"
    stem = Path(done[0]["path"]).stem
    assert (out / f"{stem}.txt").read_text().strip() and (out / f"{stem}.srt").read_text().strip()
    # the kill lands a moment after the event: a short second file may be done (and written) by then too
    done_stems = {Path(row["path"]).stem for row in first if row["status"] == "done"}
    written_stems = {p.stem for p in out.iterdir() if not p.name.startswith(".")}
    assert stem in written_stems and written_stems <= done_stems, "outputs before their file was done"


def _trace(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_dry_run_lists_and_estimates_what_a_job_has_left_from_a_comparable_measured_rate(three, cache_dir, tmp_path):
    """--dry-run on a resumed job: its done files said as done and left out of the estimate; the estimate from the
    rate measured with the same settings and on files of the same length class, or none, said, where no run
    measured them so (one latest rate per model was 10x off after a run on one short clip)."""
    from helpers import ffmpeg
    from pipeline.job.progress import clock

    jfk, left, _ = three
    cache = tmp_path / "cache"  # its own rates.json: every CLI run of the suite records one in the shared cache
    cache.mkdir()
    (cache / "models").symlink_to(cache_dir / "models")
    job, gone = tmp_path / "job", tmp_path / "gone.mp3"
    long = tmp_path / "long.flac"  # 33 s: a file of more than one piece
    ffmpeg("-stream_loop", "2", "-i", str(jfk), str(long))
    longer_clip = tmp_path / "jfk twice.flac"  # 22 s: one piece, as jfk's 11 s
    ffmpeg("-stream_loop", "1", "-i", str(jfk), str(longer_clip))

    def dry(*args: str) -> str:
        result = podscribe("transcribe", "--model", "tiny.en", "--out", str(job), "--dry-run", *args, cache_dir=cache)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    first = dry(str(jfk), str(left), str(gone))
    assert "2 inputs left, 0:00:16 of audio; 1 cannot be read" in first and "done" not in first, first
    assert "estimate: none: no run on this machine measured tiny.en" in first and "files under 10 s" in first, first
    assert not job.exists(), "a dry run wrote the job dir"
    result = podscribe("transcribe", "--model", "tiny.en", "--out", str(job), "-q", str(jfk), cache_dir=cache)
    assert result.returncode == 0, result.stdout + result.stderr
    (row,) = ds.dataset(job / "files").to_table().to_pylist()
    rate = row["duration_s"] / row["wall_s"]  # the file's decoding alone: the model's load is not in it
    before = {p: p.stat().st_mtime_ns for p in job.rglob("*")}

    resumed = dry(str(jfk), str(longer_clip))
    assert f"job {job}: 1 inputs done (0:00:11 of audio), not decoded again" in resumed, resumed
    assert f"  done    {jfk}" in resumed and "1 inputs left, 0:00:22 of audio" in resumed, resumed
    assert f"  0:00:22  {longer_clip}" in resumed and f"  0:00:11  {jfk}" not in resumed, resumed
    seconds = float(__import__("subprocess").check_output(
        ["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", str(longer_clip)], text=True))  # fmt: skip
    assert f"estimate: {clock(seconds / rate)} of decoding, plus loading the model ({rate:.1f}x real time" in resumed
    assert "batch auto" in resumed and "word timestamps off" in resumed, resumed  # no --batch-size: by the model
    assert {p: p.stat().st_mtime_ns for p in job.rglob("*")} == before, "a dry run wrote into the job"
    shorter = dry(str(left))  # a 5 s clip: one piece as well, but a cost per file more than per second
    assert "estimate: none" in shorter and "files under 10 s" in shorter, shorter

    other_batch = dry("--batch-size", "1", str(longer_clip))  # another batch size: not this rate
    assert "estimate: none: no run on this machine measured tiny.en" in other_batch and "batch 1" in other_batch
    assert "measured here, not comparable:" in other_batch and "batch_size auto" in other_batch, other_batch
    longer = dry(str(long))  # a file of several pieces: the short clip's rate says nothing about it
    assert "estimate: none" in longer and "files of 30 s to 10 min" in longer, longer
    assert "estimate: nothing left to decode" in dry(str(jfk))


def test_container_tags_are_kept_in_the_files_row(three, tiny_en_models, tmp_path):
    from helpers import ffmpeg
    from pipeline.decode import DecodeOptions
    from pipeline.job.config import JobOptions
    from pipeline.job.run import run

    tagged = tmp_path / "episode 12.mp3"
    ffmpeg("-i", str(three[0]), "-metadata", "title=Ask not", "-metadata", "artist=JFK Archive",
           "-metadata", "date=1961-01-20", str(tagged))  # fmt: skip
    options = JobOptions(out_dir=tmp_path / "job", progress=False, decode=DecodeOptions(language="en"))
    assert run([str(tagged)], options, models=tiny_en_models).done == 1
    (row,) = ds.dataset(tmp_path / "job" / "files").to_table().to_pylist()
    assert (row["title"], row["artist"], row["date"]) == ("Ask not", "JFK Archive", "1961-01-20")
