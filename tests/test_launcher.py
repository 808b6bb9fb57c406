"""The launcher's one stop policy (job/stop.py), with real signals sent to this process: what the CLI, each --workers
child and the watched child do on a first and a second signal; and its one summary merge. (That a run's batch in
hand is saved on a stop is proven in real processes: test_resume.py, test_scale.py.)"""

import multiprocessing
import os
import signal
import time

import pytest

from pipeline.facts import errors
from pipeline.job.stop import StopPolicy


def _send(sig) -> None:
    os.kill(os.getpid(), sig)
    time.sleep(0.05)  # a signal is handled between bytecodes: let it land


def test_a_first_signal_asks_for_a_stop_and_a_second_stops_at_once():
    told = []
    with StopPolicy(grace_s=0, tell=told.append) as policy:
        _send(signal.SIGINT)
        assert policy.event.is_set() and policy.exit_code == errors.EXIT_SIGINT
        assert told and "again to stop at once" in told[0]
        with pytest.raises(KeyboardInterrupt):
            _send(signal.SIGTERM)  # of any kind


def test_sigterm_allows_the_batch_its_grace_then_stops_and_a_run_that_ended_in_time_cancels_the_timer():
    with StopPolicy(grace_s=0.3, tell=lambda _: None) as policy:
        _send(signal.SIGTERM)
        assert policy.event.is_set() and policy.exit_code == errors.EXIT_SIGTERM
        with pytest.raises(KeyboardInterrupt):
            time.sleep(2)  # the batch took longer than its grace
    with StopPolicy(grace_s=0.3, tell=lambda _: None):
        _send(signal.SIGTERM)
    time.sleep(0.5)  # ended within the grace: restore cancelled the timer, nothing is raised here


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP")
def test_a_lost_terminal_stops_like_sigterm():
    with StopPolicy(grace_s=5, tell=lambda _: None) as policy:
        _send(signal.SIGHUP)
        assert policy.event.is_set() and policy.exit_code == errors.EXIT_SIGHUP


def test_a_child_ignores_what_the_terminal_sends_the_group_and_stops_on_its_own_sigterm():
    """Ctrl-C reaches the parent and its children at once; the parent forwards its stop. Were the child to count
    the group's signal too, the forwarded stop would be its second and drop its batch."""
    shared = multiprocessing.get_context("spawn").Event()  # as --workers shares it
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    policy = StopPolicy(shared, grace_s=0, tell=lambda _: None).install(child=True)
    try:
        _send(signal.SIGINT)
        _send(signal.SIGHUP)
        assert not shared.is_set() and policy.signum is None
        _send(signal.SIGTERM)
        assert shared.is_set()
        with pytest.raises(KeyboardInterrupt):
            _send(signal.SIGTERM)
    finally:
        policy.restore()
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_a_launch_s_summary_counts_each_file_once_whichever_worker_or_pass_met_it(tmp_path):
    """The one summary merge (job/summary.py): workers of one launch planned the same job, so the files they found
    done are counted once; the launcher's last pass finds the launch's own files done, which are not "already
    done" to the user; files the workers finished for each other are in their counts, not "by others". A file
    decoded in the watched child is part of its worker's own work: everything adds."""
    from pipeline.job.summary import JobSummary

    a = JobSummary(tmp_path, done=2, already_done=3, by_others=1, failures=[("x.mp3", "unreadable")])
    b = JobSummary(tmp_path, done=1, already_done=3, by_others=2, failures=[("x.mp3", "unreadable")])
    last = JobSummary(tmp_path, done=1, already_done=6, subtitles_left=False)
    launch = JobSummary.of_launch(tmp_path, [a, b], last)
    assert (launch.done, launch.already_done, launch.by_others, launch.failures) == (4, 3, 0, [("x.mp3", "unreadable")])

    worker = JobSummary(tmp_path, done=1, already_done=2)
    worker.merge(JobSummary(tmp_path, done=1, already_done=1, decoded=[(60.0, 6.0)]), same_plan=False)
    assert (worker.done, worker.already_done, worker.decoded) == (2, 3, [(60.0, 6.0)])
