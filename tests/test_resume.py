"""Jobs that survive the night: kill -9 and resume, a second run joining as a worker, configuration changes,
failed inputs, Ctrl-C. The runs that are killed, signalled or frozen are real processes; a run nothing interrupts
(a rerun, a refused configuration, a worker beside a frozen one) is a CLI run in this process (helpers.run_here)."""

from __future__ import annotations

import os
import random
import signal
import struct
import time
from collections import Counter

import pyarrow.dataset as ds

from helpers import decoded_after_persisted, finish, lines, podscribe, run_here, start, tables, wait_for_progress
from pipeline.facts.errors import EXIT_CONFIG_CHANGED, EXIT_SIGTERM

# Where each of the six stopped runs is stopped: the signal, and the run's own first event it follows (then a random
# 0-0.1 s: inside that step). Each phase gets both signals; the first kill follows the first saved batch of a file of
# four pieces, so a kill lands inside a file; no run does more than a piece or two of the small archive's nine.
STOPS = [
    (signal.SIGKILL, "persisted"),
    (signal.SIGTERM, "decoded"),  # what systemd, docker and Kubernetes send: a clean stop
    (signal.SIGKILL, "claimed"),
    (signal.SIGTERM, "persisted"),
    (signal.SIGKILL, "decoded"),
    (signal.SIGTERM, "claimed"),
]


def _wait_for_event(proc, trace, event: str, seen: int, timeout: float = 300) -> None:
    """Until this run's first ``event`` trace line (the lines after the ``seen`` ones of earlier runs)."""
    deadline = time.monotonic() + timeout
    while not any(x.startswith(f"{event} ") for x in lines(trace, claims=True, reads=True)[seen:]):
        assert proc.poll() is None, f"the run ended before its first {event}: no work was left to interrupt"
        assert time.monotonic() < deadline, f"no {event} event"
        time.sleep(0.01)


def test_kill_9_and_sigterm_at_random_moments_then_resume_equals_an_uninterrupted_run(
    small_archive, small_reference, cache_dir, tmp_path
):
    """Six runs of one job, each stopped at a random moment of one phase of its work (STOPS): three SIGKILL, three
    SIGTERM. A run nothing stops then finishes the job to the tables of an uninterrupted run: no persisted piece
    decoded again, a kill inside a file, no partial piece left behind."""
    out, trace = tmp_path / "job", tmp_path / "trace.txt"
    rng = random.Random(4)
    kills, terms = 0, 0
    for sig, event in STOPS:
        seen = len(lines(trace, claims=True, reads=True))
        proc = start(out, small_archive, cache_dir, trace)
        _wait_for_event(proc, trace, event, seen)
        time.sleep(rng.uniform(0.0, 0.1))
        proc.send_signal(sig)
        if sig == signal.SIGTERM:
            assert proc.wait(timeout=120) in (EXIT_SIGTERM, 0)
            terms += 1
        else:
            proc.wait()
            kills += 1
    code, stdout, stderr = run_here(out, small_archive, cache_dir, trace)  # nothing stops it: in this process
    assert code == 0, stderr
    assert kills >= 3 and terms >= 3
    assert tables(out) == small_reference
    persisted, decoded_again, runners_per_file = set(), [], {}
    for line in lines(trace):
        event, file_id, piece, pid = line.split()
        if event == "persisted":
            persisted.add((file_id, piece))
            runners_per_file.setdefault(file_id, set()).add(pid)
        elif (file_id, piece) in persisted:
            decoded_again.append((file_id, piece))
    assert not decoded_again, f"pieces decoded again after they were persisted: {decoded_again}"
    assert any(len(pids) > 1 for pids in runners_per_file.values()), "no kill landed inside a file"
    decodes = Counter(tuple(line.split()[1:3]) for line in lines(trace) if line.startswith("decoded"))
    assert len(decodes) == len(small_reference["pieces"])
    assert not (out / "partial").exists() or not any((out / "partial").iterdir()), "partial pieces left behind"


def test_a_second_run_joins_as_a_worker_and_a_frozen_one_keeps_only_its_own_file(
    small_archive, small_reference, cache_dir, tmp_path
):
    """The frozen worker is a process of its own (it holds its claim and registration as the OS sees them); the
    runs beside it and after its death are this process's: another process's locks are what they meet."""
    out, trace = tmp_path / "job", tmp_path / "trace.txt"
    first = start(out, small_archive, cache_dir, trace)
    assert wait_for_progress(first, trace, 0)
    first.send_signal(signal.SIGSTOP)  # frozen mid-file, however fast this machine is: it holds that file
    code, stdout, stderr = run_here(out, small_archive, cache_dir, None, "--language", "en")
    assert code == EXIT_CONFIG_CHANGED and "language: None -> 'en'" in stderr, "another configuration must not join"
    code, stdout, stderr = run_here(out, small_archive, cache_dir)
    assert code == 0 and "done: 2" in stdout and "being decoded by other workers: 1" in stdout, stdout + stderr
    status = podscribe("status", str(out), cache_dir=cache_dir)
    assert "workers: 1 at work, decoding 1 files" in status.stdout, status.stdout
    first.send_signal(signal.SIGKILL)  # the OS drops its locks: nothing stays stuck
    first.wait()
    code, stdout, stderr = run_here(out, small_archive, cache_dir)
    assert code == 0 and "done: 1, failed: 0, already done: 2" in stdout, stdout + stderr
    assert tables(out) == small_reference


def test_a_worker_that_joins_asking_for_no_outputs_writes_the_job_s_recorded_ones_as_its_files_finish(
    small_archive, cache_dir, tmp_path
):
    """Every worker of a job writes a finished file's outputs as the job records them (job.json's outputs), not as
    its own command asked: a joiner without --subtitles adopts the job's, and the files it finishes get them at
    once, while the first worker (frozen here) is still at work, not only when the last worker ends the job."""
    out, trace = tmp_path / "job", tmp_path / "trace.txt"
    first = start(out, small_archive, cache_dir, trace, "--subtitles", "txt")
    assert wait_for_progress(first, trace, 0)
    first.send_signal(signal.SIGSTOP)  # holds its file, and the job's end
    try:
        code, stdout, stderr = run_here(out, small_archive, cache_dir, trace)
        assert code == 0 and "done: 2" in stdout and "being decoded by other workers: 1" in stdout, stdout + stderr
        events = [line.split() for line in trace.read_text().splitlines()]
        mine = {f for event, f, _, pid in events if event == "persisted" and pid == str(os.getpid())}
        written = {f for event, f, _, pid in events if event == "written" and pid == str(os.getpid())}
        assert len(mine) == 2 and written == mine, "the joiner's files waited for the job's end"
        assert len(list((out / "subtitles").glob("*.txt"))) == 2
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()


def test_changed_configuration_is_refused_unless_restarted(small_archive, cache_dir, tmp_path):
    out, jfk = tmp_path / "job", small_archive[2:]
    assert run_here(out, jfk, cache_dir)[0] == 0
    code, stdout, stderr = run_here(out, jfk, cache_dir, None, "--language", "en", "--batch-size", "3")
    assert code == EXIT_CONFIG_CHANGED and "another configuration" in stderr and "language: None -> 'en'" in stderr
    assert "batch_size" not in stderr  # speed only: every batch size gives the same tokens
    code, stdout, stderr = run_here(out, jfk, cache_dir, None, "--batch-size", "3")
    assert code == 0 and "already done: 1" in stdout
    code, stdout, stderr = run_here(out, jfk, cache_dir, None, "--language", "en", "--restart")
    assert code == 0 and "done: 1, failed: 0, already done: 0" in stdout


def test_a_job_resumed_is_compared_on_what_the_user_asked_not_on_defaults_nobody_touched(
    small_archive, cache_dir, tmp_path
):
    """A job made with subtitles, run again without -f to add an episode, was refused over word timestamps the
    user never set; the README's sequence (--out, then the same --out with --subtitles) hit the reverse. What was
    not asked for is the job's own; what was asked for differently is still refused, named."""
    one, two = small_archive[2:], small_archive[2:] + small_archive[1:2]
    words, plain = tmp_path / "words", tmp_path / "plain"
    assert run_here(words, one, cache_dir, None, "-f", "srt")[0] == 0
    code, stdout, stderr = run_here(words, two, cache_dir)  # a new episode, no -f
    assert code == 0 and "done: 1, failed: 0, already done: 1" in stdout, stderr
    code, _, stderr = run_here(words, one, cache_dir, None, "--no-word-timestamps")  # asked: refused
    assert code == EXIT_CONFIG_CHANGED and "word_timestamps: True -> False" in stderr, stderr
    assert run_here(plain, one, cache_dir)[0] == 0
    code, stdout, stderr = run_here(plain, one, cache_dir, None, "--subtitles", "srt")  # (-q: the note still shows)
    assert code == 0 and "already done: 1" in stdout and "decoded without word timestamps" in stderr, stderr
    assert (plain / "subtitles" / f"{one[0].stem}.srt").read_text().strip()


def test_a_file_read_ahead_whose_batch_does_not_form_is_read_again_for_its_own_run(english_human, cache_dir, tmp_path):
    """Four one-piece files at --batch-size 2: the second pair is read while the first decodes. One of that
    pair announces 3 s but holds no audio, so no batch across files forms and the other one decodes alone:
    from a fresh read, not the read-ahead the failed batch used up (that made it a failed row, "decodes to no
    audio samples"). It ends as a batch-1 run ends; the empty file is a failed row that says why."""
    clips = sorted((c for c in english_human if 4 < c.duration_s < 20), key=lambda c: -c.duration_s)[:3]
    empty = tmp_path / "announces 3 s.wav"  # a WAV header for 3 s of 16 kHz 16-bit mono, and no samples
    size = 3 * 16000 * 2
    fmt = struct.pack("<IHHIIHH", 16, 1, 1, 16000, 32000, 2, 16)
    empty.write_bytes(b"RIFF" + struct.pack("<I", 36 + size) + b"WAVEfmt " + fmt + b"data" + struct.pack("<I", size))
    inputs = [c.path for c in clips] + [empty]
    args = ["--model", "tiny.en", "--language", "en", "-q"]
    alone, grouped = tmp_path / "alone", tmp_path / "grouped"
    code, _, stderr = run_here(alone, inputs[:3], cache_dir, None, "--batch-size", "1", args=args)
    assert code == 0, stderr
    trace = tmp_path / "grouped.txt"
    code, stdout, stderr = run_here(grouped, inputs, cache_dir, trace, "--batch-size", "2", args=args)
    assert "done: 3, failed: 1" in stdout, stdout + stderr
    events = [line.split()[:2] for line in lines(trace, claims=True, reads=True)]
    third = [i for i, (event, _) in enumerate(events) if event == "claimed"][2]
    assert ["opened", events[third][1]] in events[:third], f"the third file was not read ahead: {events}"
    assert _transcripts(grouped) == _transcripts(alone)
    failed = [r for r in tables(grouped)["files"] if r["status"] == "failed"]
    assert len(failed) == 1 and "no audio samples" in failed[0]["error"], failed


def test_the_next_long_file_is_read_while_the_last_batch_of_the_one_before_decodes(
    small_archive, small_reference, cache_dir, tmp_path
):
    """Three files of several pieces each (batch 1: a piece is a batch): each file's audio is opened as the last
    batch of the file before starts, not after it (its first batch waited on ffmpeg and the VAD) and not sooner
    (held all that time, it would be kept from a worker idle at the job's tail). The tables are the same.
    The order is that of the ``opened`` event, told on the decoding thread; when the reading thread's first piece
    comes out depends on how busy the machine is (CI once saw it after the last batch of tiny.en)."""
    trace = tmp_path / "trace.txt"
    code, _, stderr = run_here(tmp_path / "job", small_archive, cache_dir, trace)
    assert code == 0, stderr
    events = [line.split()[:2] for line in lines(trace, claims=True, reads=True)]
    claimed = [file_id for event, file_id in events if event == "claimed"]
    assert len(claimed) == 3
    for before, file_id in zip(claimed, claimed[1:]):
        decoded = [i for i, e in enumerate(events) if e == ["decoded", before]]
        opened = events.index(["opened", file_id])
        assert len(decoded) > 1 and decoded[-2] < opened < decoded[-1], (before, file_id, events)
        assert opened < events.index(["read", file_id]), (file_id, events)
    assert tables(tmp_path / "job") == small_reference


def test_failed_inputs_are_kept_retried_on_request_and_redone_when_fixed(small_archive, cache_dir, tmp_path):
    out = tmp_path / "job"
    broken = tmp_path / "episode two.mp3"
    broken.write_bytes(b"")
    inputs = [small_archive[2], broken]
    code, stdout, _ = run_here(out, inputs, cache_dir)
    assert code == 0 and "done: 1, failed: 1" in stdout
    code, stdout, _ = run_here(out, inputs, cache_dir)
    assert "already done: 1, failed earlier (not retried): 1" in stdout
    code, stdout, stderr = run_here(out, inputs, cache_dir, None, "--retry-failed")
    assert "failed: 1" in stdout and "file is empty" in stderr
    broken.write_bytes(small_archive[0].read_bytes())  # fixed: new content, new id, the old failed row goes
    code, stdout, _ = run_here(out, inputs, cache_dir)
    assert code == 0 and "done: 1, failed: 0, already done: 1" in stdout
    rows = ds.dataset(out / "files").to_table().to_pylist()
    assert sorted(r["status"] for r in rows) == ["done", "done"]


def test_ctrl_c_finishes_the_batch_in_hand_and_exits_cleanly(small_archive, cache_dir, tmp_path):
    out, trace = tmp_path / "job", tmp_path / "trace.txt"
    proc = start(out, small_archive, cache_dir, trace)
    assert wait_for_progress(proc, trace, 0)
    proc.send_signal(signal.SIGINT)
    code, stdout, stderr = finish(proc, timeout=120)
    assert code == 130 and "Rerun the same command to resume" in stderr
    events = lines(trace)
    decoded = {tuple(x.split()[1:3]) for x in events if x.startswith("decoded")}
    persisted = {tuple(x.split()[1:3]) for x in events if x.startswith("persisted")}
    assert decoded and decoded == persisted, "a decoded piece was not persisted"
    status = podscribe("status", str(out), cache_dir=cache_dir)
    assert status.returncode == 0 and "pending" in status.stdout and "h left" in status.stdout


def test_resuming_with_another_batch_size_decodes_no_persisted_piece_again(small_archive, cache_dir, tmp_path):
    out, trace = tmp_path / "job", tmp_path / "trace.txt"
    proc = start(out, small_archive[:1], cache_dir, trace)  # batch size 1: a checkpoint per piece
    while sum(line.startswith("persisted") for line in lines(trace)) < 2:
        assert wait_for_progress(proc, trace, len(lines(trace)))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    code, stdout, stderr = run_here(out, small_archive[:1], cache_dir, trace, "--batch-size", "3")
    assert code == 0 and "done: 1, failed: 0, already done: 0" in stdout, "killed after the file was done: " + stderr
    decoded_again = decoded_after_persisted(trace)
    assert not decoded_again, f"persisted pieces decoded again with another batch size: {decoded_again}"


def _transcripts(out) -> list[tuple]:
    return [(r["file_id"], r["segment"], r["text"], r["start_s"], r["end_s"]) for r in tables(out)["segments"]]


def test_one_piece_files_share_batches_and_a_kill_inside_one_loses_nothing(english_human, cache_dir, tmp_path):
    """Cross-file batches: six clips of one piece each at --batch-size 4 are claimed four at a time and decoded in
    one batch (the other two are read meanwhile), and their segments are exactly those of a run at --batch-size 1
    (a piece's tokens do not depend on the rows beside it). A worker killed inside such a batch leaves each of its
    files one death: the resumed run decodes those alone (a file that kills workers must not take others with it)
    to the same segments."""
    clips = sorted((c for c in english_human if c.duration_s < 20), key=lambda c: c.path.name)[:6]
    inputs = [c.path for c in clips]
    args = ["--model", "tiny.en", "--language", "en", "-q"]
    alone, grouped, resumed = tmp_path / "alone", tmp_path / "grouped", tmp_path / "resumed"
    code, _, stderr = run_here(alone, inputs, cache_dir, None, "--batch-size", "1", args=args)
    assert code == 0, stderr
    trace = tmp_path / "grouped.txt"
    code, stdout, stderr = run_here(grouped, inputs, cache_dir, trace, "--batch-size", "4", args=args)
    assert code == 0 and "done: 6" in stdout, stderr
    events = [line.split()[:2] for line in lines(trace, claims=True)]
    first = next(i for i, (event, _) in enumerate(events) if event == "decoded")
    assert [event for event, _ in events[:first]] == ["claimed"] * 4, events
    assert _transcripts(grouped) == _transcripts(alone)
    # the next group's two files are read while the first group decodes: before they are claimed
    events = [line.split()[:2] for line in lines(trace, claims=True, reads=True)]
    second = {file_id for event, file_id in events if event == "claimed"} - {file_id for _, file_id in events[:4]}
    second_claimed = next(i for i, (event, file_id) in enumerate(events) if event == "claimed" and file_id in second)
    assert {file_id for event, file_id in events[:second_claimed] if event == "opened"} >= second, events

    trace = tmp_path / "resumed.txt"
    proc = start(resumed, inputs, cache_dir, trace, "--batch-size", "4", args=args)
    while sum(line.startswith("claimed") for line in lines(trace, claims=True)) < 4:
        assert proc.poll() is None, "the run ended before it claimed a batch of files"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    code, stdout, stderr = run_here(resumed, inputs, cache_dir, trace, "--batch-size", "4", args=args)
    assert code == 0, stderr
    events = [line.split()[:3] for line in lines(trace, claims=True)]
    died_on = {file_id for event, file_id, deaths in events if event == "claimed" and deaths == "1"}
    assert died_on, "the kill landed after the batch was written: nothing to check"
    for i, (event, file_id, _) in enumerate(events):
        if event == "decoded" and file_id in died_on:  # alone: written before anything else is decoded
            assert events[i + 1][:2] == ["persisted", file_id], events
    assert _transcripts(resumed) == _transcripts(alone)
