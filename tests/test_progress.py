"""Progress: audio seconds shown as h:mm:ss, a job of many short files ends at 100% (no overshoot, no
negative ETA), a file bar never passes its total."""

from __future__ import annotations

import io

from pipeline.job import progress


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


def _worker(planned_s: float, decoded: list[tuple[str, float]]) -> None:
    """What the runner (job/) does with its bars: a job bar over what it planned, a file bar for each file it decodes (in
    30 s pieces), a line at a second chance, the job bar advanced by each file it finished."""
    with progress.job_bar(planned_s, True) as job:
        for name, seconds in decoded:
            with progress.file_bar(name, seconds, True) as bar:
                left = seconds
                while left > 0:
                    bar.advance(min(30.0, left))
                    left -= 30.0
                progress.say(f"{name}: piece 1 at its second chance", True)
            job.advance(seconds)


def test_workers_that_forward_their_bars_are_drawn_by_one_board():
    """A --workers child or a Ray actor draws nothing: its bars are events, and the process that owns the terminal
    draws every worker's with the same bars: one job bar over all their files (the largest plan: a worker that
    started later plans what is left), one file bar per worker, their lines above."""
    files = [("a.mp3", 95.0), ("b.mp3", 61.5), ("c.mp3", 30.25)]
    events: list[tuple] = []
    try:
        progress.forward(events.append, 1)
        _worker(186.75, files[:2])
        progress.forward(events.append, 2)
        _worker(30.25, files[2:])
    finally:
        progress.forward(None)
    assert events[0] == ("job", 1, 186.75) and ("say", 2, "c.mp3: piece 1 at its second chance") in events
    sink = io.StringIO()
    board = progress.Board(True, file=sink, mininterval=0)
    for event in events:
        board.handle(event)
        if event[0] == "file_advance":
            assert board.files[event[1]].n <= board.files[event[1]].total
    assert board.slots == {1: 1, 2: 2}, "a file bar a worker"
    assert board.job.n == board.job.total == 186.75
    final = str(board.job)
    board.close()
    assert "100%" in final and "0:03:07/0:03:07 of audio" in final, final
    assert "c.mp3: piece 1 at its second chance" in sink.getvalue()


def test_a_board_told_the_job_is_complete_ends_at_its_total_and_never_goes_past_it():
    """A worker killed between writing its file's row and sending its seconds leaves the job bar short of a finished
    job: the process that drew it completes it once the job dir says nothing is left (engines.py)."""
    sink = io.StringIO()
    board = progress.Board(True, file=sink, mininterval=0)
    board.handle(("job", 1, 58.0))
    board.handle(("job_advance", 1, 26.0))  # the killed worker's 11 s never came
    board.handle(("job", 2, 21.0))  # its restart planned what was left
    board.handle(("job_advance", 2, 21.0))
    assert board.job.n == 47.0 and board.short()
    board.complete()
    board.complete()
    assert board.job.n == board.job.total == 58.0 and not board.short()
    board.close()
    board.complete()  # after close: nothing drawn under the run's last words
    assert board.job.n == 58.0
