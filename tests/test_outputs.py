"""Outputs: a worker joining a job must ask for the subtitles its workers write (or none), since the last one to
finish writes what they agreed on; the output folder is checked before any decoding; an output that cannot be
written for its own name fails alone, named."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

from helpers import lines, podscribe, run_here, start
from pipeline import outputs, workers
from pipeline.cues import CueRules
from pipeline.errors import EXIT_CONFIG_CHANGED, EXIT_USAGE, ConfigChanged


def test_outputs_of_workers_join_when_one_side_asks_for_none_and_refuse_when_they_differ(tmp_path):
    srt = outputs.spec(["srt"], tmp_path / "a", CueRules())
    assert outputs.join(srt, None, tmp_path) == srt and outputs.join(None, srt, tmp_path) == srt
    assert outputs.join(srt, outputs.spec(["srt"], tmp_path / "a", CueRules()), tmp_path) == srt
    for other in (outputs.spec(["vtt"], tmp_path / "a", CueRules()), outputs.spec(["srt"], tmp_path / "b", CueRules())):
        try:
            outputs.join(srt, other, tmp_path)
        except ConfigChanged as exc:
            assert "same options" in str(exc)
        else:
            raise AssertionError(f"{other} joined {srt}")


def test_a_joining_worker_with_other_subtitles_is_refused_and_the_first_ones_stay(small_archive, cache_dir, tmp_path):
    out, trace = tmp_path / "job", tmp_path / "trace.txt"
    first = start(out, small_archive, cache_dir, trace, "--subtitles", "srt", "-o", str(tmp_path / "srt"))
    while not any(x.startswith("decoded") for x in lines(trace)):
        assert first.poll() is None, first.communicate()
        time.sleep(0.05)
    assert workers.live_workers(out)
    code, stdout, stderr = run_here(
        out, small_archive, cache_dir, None, "--subtitles", "vtt", "-o", str(tmp_path / "vtt")
    )
    assert code == EXIT_CONFIG_CHANGED and "--subtitles" in stderr and "-o/--output-dir" in stderr, stdout + stderr
    recorded = json.loads((out / "job.json").read_text())["outputs"]
    assert recorded["subtitles"] == ["srt"] and recorded["output_dir"] == str(tmp_path / "srt")
    first.send_signal(signal.SIGTERM)
    first.wait()


def test_a_read_only_output_folder_is_found_before_any_decoding(clips, cache_dir, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        jfk = next(c.path for c in clips if c.path.name == "jfk.flac")
        trace = tmp_path / "trace.txt"
        out = tmp_path / "job"
        args = ["--model", "tiny.en", "-q", "--subtitles", "srt", "-o", str(ro), str(jfk)]
        result = podscribe(
            "transcribe", "--out", str(out), *args, cache_dir=cache_dir, env={"PODSCRIBE_TRACE": str(trace)}
        )
        assert result.returncode == EXIT_USAGE and "subtitles cannot be written into" in result.stderr, result.stderr
        assert not lines(trace), "it decoded before finding out"
    finally:
        subprocess.run(["umount", "-l", str(ro)], capture_output=True)


def test_an_output_that_cannot_be_written_for_its_name_fails_alone_and_is_named(clips, cache_dir, tmp_path):
    """An input name of 252 bytes (its output's temporary name is past the file system's 255) fails only its own
    output, named; a folder that holds the other output's name is not podscribe's file: kept, the new version
    beside it (outputs.py). The job goes on and exits 0."""
    inputs = sorted((c.path for c in clips if c.language == "en" and c.duration_s < 4), key=lambda p: p.name)[:2]
    long = tmp_path / "in" / ("x" * 248 + inputs[0].suffix)
    long.parent.mkdir()
    long.write_bytes(inputs[0].read_bytes())
    subs = tmp_path / "subs"
    (subs / f"{inputs[1].stem}.srt").mkdir(parents=True)  # a folder with the output's name
    result = podscribe(
        "transcribe",
        "--out",
        str(tmp_path / "job"),
        "--model",
        "tiny.en",
        "-q",
        "--subtitles",
        "srt",
        "-o",
        str(subs),
        str(long),
        str(inputs[1]),
        cache_dir=cache_dir,
    )
    assert result.returncode == 0 and "done: 2, failed: 0" in result.stdout, result.stdout + result.stderr
    assert f"{long.stem}.srt cannot be written" in result.stderr, result.stderr
    assert (subs / f"{inputs[1].stem}.new.srt").is_file() and f"{inputs[1].stem}.new.srt" in result.stderr


def test_outputs_renamed_when_a_name_collision_first_appears_leave_no_stale_file_but_keep_an_edited_one(
    clips, cache_dir, tmp_path
):
    """Run 1 transcribes a/show.wav: show.srt and show.txt. Run 2 adds b/show.wav (the same stem) to the job:
    both inputs now get collision names, so run 1's show.srt would belong to neither; it is gone. show.txt, which
    a person edited in between, is kept, and the run says so."""
    sources = sorted((c.path for c in clips if c.language == "en" and c.duration_s < 4), key=lambda p: p.name)[:2]
    a, b = tmp_path / "a" / "show.wav", tmp_path / "b" / "show.wav"
    for src, dst in ((sources[0], a), (sources[1], b)):
        dst.parent.mkdir()
        dst.write_bytes(src.read_bytes())
    out, subs = tmp_path / "job", tmp_path / "job" / "subtitles"
    args = ("transcribe", "--out", str(out), "--model", "tiny.en", "-q", "--subtitles", "srt,txt")
    first = podscribe(*args, str(a), cache_dir=cache_dir)
    assert first.returncode == 0 and sorted(p.name for p in subs.iterdir()) == [".podscribe", "show.srt", "show.txt"]
    edited = (subs / "show.txt").read_text() + "\nchecked by a person\n"
    (subs / "show.txt").write_text(edited)
    second = podscribe(*args, str(a), str(b), cache_dir=cache_dir)
    assert second.returncode == 0 and "done: 1, failed: 0, already done: 1" in second.stdout, second.stderr
    names = outputs.output_names([str(a), str(b)])
    assert names[str(a)] != "show" != names[str(b)]
    expected = {f"{names[str(p)]}.{ext}" for p in (a, b) for ext in ("srt", "txt")}
    assert {p.name for p in subs.iterdir()} == {".podscribe", "show.txt", *expected}, "a stale output stayed"
    assert (subs / "show.txt").read_text() == edited and f"kept: {subs / 'show.txt'}" in second.stderr


def test_an_input_renamed_in_its_outputs_leaves_its_old_files_only_where_a_person_changed_them(tmp_path):
    """The rule alone: files written for an input under the name it had are removed when its outputs are written
    under a new one; an edited one is kept (and listed); another input's file, or another format's, is not touched."""
    folder = outputs.OutputDir(tmp_path)
    folder.write(
        {"show.srt": b"1", "show.txt": b"t", "show.vtt": b"v"},
        sources={
            "show.srt": ("/a/show.wav", "srt"),
            "show.txt": ("/a/show.wav", "txt"),
            "show.vtt": ("/a/show.wav", "vtt"),
        },
    )
    folder.write({"other.srt": b"o"}, sources={"other.srt": ("/b/other.wav", "srt")})
    (tmp_path / "show.txt").write_bytes(b"edited")
    written = folder.write(
        {"show-1.srt": b"1", "show-1.txt": b"t"},
        sources={"show-1.srt": ("/a/show.wav", "srt"), "show-1.txt": ("/a/show.wav", "txt")},
    )
    names = sorted(p.name for p in tmp_path.iterdir() if p.is_file())
    assert names == ["other.srt", "show-1.srt", "show-1.txt", "show.txt", "show.vtt"], names
    assert written.kept == [(tmp_path / "show.txt", tmp_path / "show-1.txt")]
    assert (tmp_path / "show.txt").read_bytes() == b"edited"
