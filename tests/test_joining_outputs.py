"""A worker joining a job must ask for the subtitles its workers write (or none): the last one to finish writes
what they agreed on, so a joiner with other --subtitles / -o can no longer replace the first worker's outputs."""

from __future__ import annotations

import json
import signal
import time

from helpers import finish, lines, start
from pipeline import outputs, workers
from pipeline.errors import EXIT_CONFIG_CHANGED, ConfigChanged
from pipeline.export import CueRules


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
    code, stdout, stderr = finish(
        start(out, small_archive, cache_dir, None, "--subtitles", "vtt", "-o", str(tmp_path / "vtt"))
    )
    assert code == EXIT_CONFIG_CHANGED and "--subtitles" in stderr and "-o/--output-dir" in stderr, stdout + stderr
    recorded = json.loads((out / "job.json").read_text())["outputs"]
    assert recorded["subtitles"] == ["srt"] and recorded["output_dir"] == str(tmp_path / "srt")
    first.send_signal(signal.SIGTERM)
    first.wait()
