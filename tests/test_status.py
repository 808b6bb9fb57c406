"""`podscribe status` counts each input once, keeps a half-done file in sight, and never runs ffprobe."""

from __future__ import annotations

import json
import os
import re

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
    from pipeline.audio import AudioInfo
    from pipeline.probes import ProbeCache

    info = AudioInfo(61.5, "mp3", "mp3", ("two audio streams",), (("title", "Ep. 1"), ("date", "2024")))
    kept = ProbeCache(tmp_path)
    kept.put("abc", info)
    kept.save()
    assert ProbeCache(tmp_path).get("abc") == info
