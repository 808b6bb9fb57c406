"""Progress: audio seconds shown as h:mm:ss, a job of many short files ends at 100% (no overshoot, no
negative ETA), a file bar never passes its total."""

from __future__ import annotations

import io

from pipeline import progress


def test_clock():
    assert progress.clock(0) == "0:00:00" and progress.clock(59.6) == "0:01:00"
    assert progress.clock(3725) == "1:02:05" and progress.clock(-3) == "0:00:00"


def test_a_job_of_many_short_files_ends_at_its_total():
    durations = [6.1234 + 0.01 * i for i in range(49)]  # each would round up to 0.002 h
    sink = io.StringIO()
    with progress.job_bar(sum(durations), True, file=sink, mininterval=0) as bar:
        for d in durations:
            bar.advance(d)
        assert abs(bar.n - sum(durations)) < 1e-6
        shown = str(bar)
    assert "100%" in shown and "0:05:12/0:05:12 of audio" in shown, shown
    assert "-" not in shown.split("[")[1], shown  # no negative ETA


def test_a_file_bar_never_passes_its_total():
    sink = io.StringIO()
    with progress.file_bar("episode.mp3", 61.0, True, file=sink, mininterval=0) as bar:
        for piece_s in (30.02, 30.02, 1.01):  # the pieces sum past the probed duration
            bar.advance(piece_s)
        assert bar.n == 61.0
        assert "100%" in str(bar) and "0:01:01/0:01:01" in str(bar)
