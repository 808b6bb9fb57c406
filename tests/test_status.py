"""`podscribe status` counts each input once, keeps a half-done file in sight, and never runs ffprobe."""

from __future__ import annotations

import json
import os
import re
import shutil

from helpers import podscribe


def test_status_counts_a_failed_missing_input_once_keeps_half_done_files_and_never_probes(clips, cache_dir, tmp_path):
    short = sorted((c.path for c in clips if c.language == "en" and c.duration_s < 4), key=lambda p: p.name)
    out, missing = tmp_path / "job", tmp_path / "gone.mp3"
    result = podscribe(
        "transcribe", "--out", str(out), "--model", "tiny.en", "-q", str(short[0]), str(missing), cache_dir=cache_dir
    )
    assert result.returncode == 0 and "done: 1, failed: 1" in result.stdout, result.stdout + result.stderr
    record = json.loads((out / "job.json").read_text())
    record["inputs"].append(str(short[1]))  # an input not decoded yet: status must not probe it either
    (out / "job.json").write_text(json.dumps(record))
    (out / "partial" / "a").mkdir(parents=True)
    (out / "partial" / "a" / "batch-000000.parquet").write_bytes(b"")  # a half-done file of an earlier run's inputs
    bin_dir, called = tmp_path / "bin", tmp_path / "ffprobe-called"
    bin_dir.mkdir()
    (bin_dir / "ffprobe").write_text(f"#!/bin/sh\ntouch {called}\nexit 1\n")
    (bin_dir / "ffprobe").chmod(0o755)
    status = podscribe("status", str(out), cache_dir=cache_dir, env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert status.returncode == 0, status.stderr
    assert re.search(r"files: 1 done, 1 failed, 2 pending \(1 half done\)", status.stdout), status.stdout
    assert not called.exists(), "status ran ffprobe"


def test_a_kept_probe_keeps_the_containers_tags(tmp_path):
    """A probe kept in probes.json gives back all ffprobe said, tags included: a rerun that probes nothing
    still writes the title, artist and date into the files row."""
    from pipeline.audio.media import AudioInfo
    from pipeline.storage.probes import ProbeCache

    info = AudioInfo(61.5, "mp3", "mp3", ("two audio streams",), (("title", "Ep. 1"), ("date", "2024")))
    kept = ProbeCache(tmp_path)
    kept.put("abc", info)
    kept.save()
    assert ProbeCache(tmp_path).get("abc") == info


def test_a_job_being_planned_says_so_on_its_terminal_and_in_status(clips, cache_dir, tmp_path):
    """A first run over many new files reads them all (content ids, ffprobe) before the first is decoded: minutes
    of "loading ..." alone, and `status` said "0.00 h left, ETA unknown". Here ffprobe waits for the test (a
    slow disk), in a real process: its terminal says what it reads, status says the job is being planned."""
    from helpers import finish, start, wait_for_stderr

    short = sorted((c.path for c in clips if c.language == "en" and c.duration_s < 4), key=lambda p: p.name)[:3]
    out, bin_dir, release = tmp_path / "job", tmp_path / "bin", tmp_path / "release"
    bin_dir.mkdir()
    (bin_dir / "ffprobe").write_text(
        f'#!/bin/sh\nwhile [ ! -e {release} ]; do sleep 0.1; done\nexec {shutil.which("ffprobe")} "$@"\n'
    )
    (bin_dir / "ffprobe").chmod(0o755)
    proc = start(
        out, short, cache_dir, None, args=["--model", "tiny.en"], env={"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    )
    try:
        said = wait_for_stderr(proc, "reading 3 inputs (ffprobe) before decoding: 0 done", timeout=120)
        assert "loading tiny.en" in said
        status = podscribe("status", str(out), cache_dir=cache_dir)
        assert status.returncode == 0, status.stderr
        assert re.search(r"planning: \S+ is reading the inputs \(ffprobe\): 0 of 3", status.stdout), status.stdout
        assert "ETA unknown" not in status.stdout and "h left" not in status.stdout, status.stdout
        assert "the ETA once the job is planned" in status.stdout, status.stdout
        assert "files: 0 done, 0 failed, 3 pending" in status.stdout, status.stdout
    finally:
        release.touch()
    code, stdout, stderr = finish(proc, timeout=300)
    assert code == 0 and "done: 3" in stdout, stdout + stderr
    assert re.search(r"read 3 inputs \(ffprobe\) in \d+ s", stderr), stderr
    assert not list((out / "workers").glob("*.planning")), "its planning record was left behind"
    after = podscribe("status", str(out), cache_dir=cache_dir).stdout
    assert "planning" not in after and "0.00 h left" in after, after


def test_a_fresh_job_whose_planning_fails_leaves_no_job_dir(clips, cache_dir, tmp_path, monkeypatch):
    """A run that fails before writing anything leaves nothing behind (JobDir.locked): the planning record
    (workers/HOST-PID.planning) must not keep a job dir that holds nothing else."""
    from pipeline.job import run

    def broken(*_args, **_kwargs):
        raise OSError("the disk went away while planning")

    monkeypatch.setattr(run, "job_config", broken)  # before anything is written into the job dir
    jfk = next(c.path for c in clips if c.path.name == "jfk.flac")
    out = tmp_path / "job"
    result = podscribe("transcribe", "--out", str(out), "--model", "tiny.en", "-q", str(jfk), cache_dir=cache_dir)
    assert result.returncode != 0 and "the disk went away" in result.stderr, result.stdout + result.stderr
    assert not out.exists(), sorted(str(p.relative_to(out)) for p in out.rglob("*"))
