"""What a death means (real processes, tiny.en): a run killed whole is no evidence against a file, however often;
a file that really kills the process decoding it ends as a failed row, its checkpoints kept, the others done."""

from __future__ import annotations

import os
import signal
import time

import pyarrow.dataset as ds

from helpers import close, ffmpeg, finish, lines, run_here, start, tables
from pipeline.facts.errors import EXIT_SIGTERM
from pipeline.storage.identity import identify


def _pids_alive(trace) -> list[str]:
    alive = []
    for pid in {line.split()[3] for line in lines(trace, claims=True, reads=True)}:
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            continue
        alive.append(pid)
    return alive


def _wait_gone(trace, timeout: float = 30) -> list[str]:
    deadline = time.monotonic() + timeout
    while (alive := _pids_alive(trace)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def test_whole_run_kills_past_max_attempts_before_the_first_saved_batch_then_a_rerun_give_the_uninterrupted_tables(
    small_archive, small_reference, cache_dir, tmp_path
):
    """The laptop lid, the reboot, the scheduler's time limit: the only worker is killed (SIGKILL) each time it
    has claimed the file, before it saved a batch, once more than --max-attempts. Nothing is counted against the
    file: the rerun decodes it, to the tables of a run never interrupted, and no process of a killed run goes on
    decoding."""
    out, trace = tmp_path / "job", tmp_path / "trace.txt"
    episode, attempts = small_archive[:1], ("--max-attempts", "2")  # one file: every kill lands on it
    for kill in range(3):
        proc = start(out, episode, cache_dir, trace, *attempts)
        claimed = len([x for x in lines(trace, claims=True) if x.startswith("claimed")])
        while len([x for x in lines(trace, claims=True) if x.startswith("claimed")]) == claimed:
            assert proc.poll() is None, f"run {kill} ended before claiming a file: {proc.communicate()}"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert not _wait_gone(trace), "a process of the killed run goes on"
    events = [x.split() for x in lines(trace, claims=True)]
    assert not [x for x in events if x[0] == "persisted"], "a kill landed after a saved batch: not the worst moment"
    assert [int(x[2]) for x in events if x[0] == "claimed"] == [0, 1, 2], "each claim counts the kills before it"
    code, stdout, stderr = run_here(out, episode, cache_dir, trace, *attempts)  # after the kills: in this process
    assert code == 0 and "done: 1, failed: 0" in stdout, stdout + stderr
    (file_id,) = [r["file_id"] for r in small_reference["files"] if r["path"] == str(episode[0])]
    assert close(tables(out), {k: [r for r in rows if r["file_id"] == file_id] for k, rows in small_reference.items()})


def test_a_file_that_kills_the_process_decoding_it_fails_alone_with_its_checkpoints_kept(
    small_archive, small_reference, cache_dir, tmp_path
):
    """A planted crash at one piece (SIGKILL, as the OOM killer would): the run dies with it. The rerun decodes
    the other files first, then the suspect alone in a watched child, which dies again at the same piece: after
    --max-attempts such deaths the file is a failed row, its saved batch kept, and the job ends normally.
    --retry-failed (the crash gone) resumes from that batch to the uninterrupted tables."""
    out, trace = tmp_path / "job", tmp_path / "trace.txt"
    poison = small_archive[0]  # 26 s: pieces of 5-10 s, one per batch; piece 0 is saved before the crash
    crash = {"PODSCRIBE_CRASH": f"{poison.name}:1"}
    poison_id = identify(poison)[0].file_id
    code, stdout, stderr = finish(start(out, small_archive, cache_dir, trace, env=crash))
    assert code == -signal.SIGKILL, stdout + stderr  # longest first: the whole run died on it
    code, stdout, stderr = finish(start(out, small_archive, cache_dir, trace, "--max-attempts", "2", env=crash))
    assert code == 0 and "done: 2, failed: 1" in stdout, stdout + stderr
    rows = {r["path"]: r for r in ds.dataset(out / "files").to_table().to_pylist()}
    assert rows[str(poison)]["status"] == "failed"
    assert "killed the process 2 times" in rows[str(poison)]["error"], rows[str(poison)]["error"]
    assert all(rows[str(p)]["status"] == "done" for p in small_archive[1:])
    assert (out / "partial" / poison_id / "batch-000000.parquet").exists(), "its checkpoints were not kept"
    events = [x.split() for x in lines(trace, claims=True)]
    second_run = events[next(i for i, x in enumerate(events) if x[0] == "claimed" and x[1] != poison_id) :]
    assert [x[1] for x in second_run if x[0] == "claimed"][-1] == poison_id, "the suspect was not decoded last"
    assert not _wait_gone(trace)
    code, stdout, stderr = run_here(out, small_archive, cache_dir, trace, "--retry-failed")  # the crash gone
    assert code == 0 and "done: 1, failed: 0" in stdout, stdout + stderr
    assert close(tables(out), small_reference)
    persisted_0 = [x for x in lines(trace) if x.split()[:3] == ["decoded", poison_id, "0"]]
    assert len(persisted_0) == 1, "the kept checkpoint was decoded again"


def _kill_at_claim(out, inputs, cache_dir, trace, extra, claimed_id, sig=signal.SIGKILL) -> tuple[int, str, str]:
    """A run of the job, sent ``sig`` as soon as it claims ``claimed_id`` (the job's own event, not a sleep)."""
    before = len([x for x in lines(trace, claims=True) if x.startswith("claimed")])
    proc = start(out, inputs, cache_dir, trace, *extra)
    while not [x for x in lines(trace, claims=True) if x.startswith("claimed")][before:]:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    while not any(x.split()[1] == claimed_id for x in lines(trace, claims=True)[before:] if x.startswith("claimed")):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(sig)
    return finish(proc)


def test_a_suspect_decoded_alone_gets_its_outputs_at_once_under_the_jobs_names(small_archive, cache_dir, tmp_path):
    """Two files a run died on (each the file in hand when a whole run was killed): the third run decodes them
    last, alone, in its watched child. The first one's outputs are written as soon as it is done, as every other
    file's, under the job's names (another input shares its stem), so a stop during the second suspect does not
    leave the first without its subtitles."""
    from pipeline.outputs.names import output_names

    other = tmp_path / "other" / "episode one.flac"  # the stem of small_archive[0]: the names must tell them apart
    other.parent.mkdir()
    ffmpeg("-i", str(small_archive[2]), "-t", "10", str(other))
    inputs = [*small_archive, other]
    out, trace, extra = tmp_path / "job", tmp_path / "trace.txt", ("-f", "txt")
    first, second = (identify(p)[0].file_id for p in small_archive[:2])  # 26 s, 21 s: the longest, decoded first
    for suspect in (first, second):  # each run decodes the files no run died on first: the second one, then
        code, stdout, stderr = _kill_at_claim(out, inputs, cache_dir, trace, extra, suspect)
        assert code == -signal.SIGKILL, stdout + stderr
    code, stdout, stderr = _kill_at_claim(out, inputs, cache_dir, trace, extra, second, signal.SIGTERM)
    assert code == EXIT_SIGTERM, stdout + stderr  # stopped while its child decodes the second suspect
    rows = {r["file_id"]: r for r in ds.dataset(out / "files").to_table().to_pylist()}
    assert rows[first]["status"] == "done" and second not in rows
    names = output_names(map(str, inputs))
    written = sorted(p.name for p in (out / "subtitles").glob("*.txt"))
    assert written == sorted(f"{names[str(p)]}.txt" for p in [small_archive[0], *small_archive[2:], other]), written
    assert (out / "subtitles" / f"{names[str(small_archive[0])]}.txt").read_text().strip(), written
