"""One job, several workers: claims, death counts, status arithmetic (fast), and real processes — two
workers, a worker killed mid-file, a poison file, `accelerate launch`, Ray actors (tiny.en)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from helpers import JOB_ARGS, REPO, TRACED, close, decoded_after_persisted, finish, lines, run_here, start, tables
from pipeline.cli.status import JobStatus, busy_seconds
from pipeline.facts.errors import EXIT_SIGINT, EXIT_SIGTERM, DamagedState
from pipeline.storage import workers
from pipeline.storage.identity import identify

# -- fast: the pieces of the protocol ------------------------------------------------------------------------


def test_a_claimed_file_cannot_be_claimed_twice_and_is_free_again_when_released(tmp_path):
    first = workers.claim(tmp_path, "f1", persisted_batches=0)
    assert first is not None and first.deaths == 0
    assert workers.claim(tmp_path, "f1", 0) is None, "a file held by a worker was claimed again"
    assert workers.held_claims(tmp_path) == ["f1"]
    other = workers.claim(tmp_path, "f2", 0)
    assert other is not None
    other.finish()
    other.release()
    first.release()
    assert workers.held_claims(tmp_path) == []
    again = workers.claim(tmp_path, "f1", 0)
    assert again is not None
    again.release()


def test_something_else_in_a_lock_s_place_is_damaged_state_named_not_a_traceback(tmp_path):
    """A plain file where ``workers/`` or ``claims/`` should be, a folder named like a claim's lock."""
    (tmp_path / "workers").write_text("x")
    with pytest.raises(DamagedState, match=f"{tmp_path / 'workers'} is in the way.*folder of locks"):
        workers.Registration(tmp_path).__enter__()
    (tmp_path / "claims").write_text("x")
    with pytest.raises(DamagedState, match="claims is in the way"):
        workers.claim(tmp_path, "f1", 0)
    (tmp_path / "claims").unlink()
    (tmp_path / "claims" / "f1.lock").mkdir(parents=True)
    with pytest.raises(DamagedState, match="f1.lock is in the way.*lock file"):
        workers.claim(tmp_path, "f1", 0)
    assert workers.held_claims(tmp_path) == [] and not workers.suspect(tmp_path, "f1")


def test_every_death_makes_a_suspect_only_witnessed_deaths_at_one_place_count_and_a_clean_end_takes_the_claim_back(
    tmp_path,
):
    for expected in (0, 1, 2):  # each claim released without finish/give_back is a process that died
        held = workers.claim(tmp_path, "f", persisted_batches=3)
        assert held.deaths == expected and held.witnessed == 0
        held.release()
    assert workers.suspect(tmp_path, "f")
    held = workers.claim(tmp_path, "f", persisted_batches=4)  # it saved a batch, then died: still a suspect
    assert held.deaths == 3
    assert held.died_alone(4) == 1 and held.died_alone(4) == 2  # its watched child died twice at one place
    assert held.died_alone(5) == 1  # the child saved a batch before dying: a new series
    held.release()
    held = workers.claim(tmp_path, "f", 5)
    assert held.witnessed == 1 and held.deaths == 7  # released without an end: the try under way died too
    held.give_back()  # Ctrl-C, a full disk: the worker lived
    held.release()
    held = workers.claim(tmp_path, "f", 5)
    assert held.deaths == 7
    held.finish()
    held.release()
    assert not (tmp_path / "claims" / "f.json").exists() and not workers.suspect(tmp_path, "f")


def test_live_workers_are_the_registered_ones_whose_lock_is_held(tmp_path):
    with workers.Registration(tmp_path) as me:
        assert workers.live_workers(tmp_path) == [me.path.stem]
        assert workers.live_workers(tmp_path, besides=me.path) == []
    assert workers.live_workers(tmp_path) == []
    dead = tmp_path / "workers" / "gone-1.lock"
    dead.write_text("{}")  # a worker that died: its file is there, its lock is not
    assert workers.live_workers(tmp_path) == []
    with workers.Registration(tmp_path):
        assert not dead.exists(), "a dead worker's registration is cleaned up by the next one"


def _row(end: datetime, wall_s: float, audio_s: float, worker: str) -> dict:
    return {"finished_at": end.isoformat(timespec="seconds"), "wall_s": wall_s, "duration_s": audio_s, "worker": worker}


def test_two_workers_double_the_job_rate_and_halve_the_eta():
    t0 = datetime(2026, 12, 1, tzinfo=timezone.utc)
    rows = [
        _row(t0 + timedelta(seconds=100), 100, 1000, "a:1"),
        _row(t0 + timedelta(seconds=200), 100, 1000, "a:1"),
        _row(t0 + timedelta(seconds=110), 110, 1100, "b:2"),
        _row(t0 + timedelta(seconds=200), 90, 900, "b:2"),
    ]
    assert busy_seconds(rows) == 200  # the union of the decode intervals, not their sum (400)
    assert busy_seconds([_row(t0, 10, 1, "a"), _row(t0 + timedelta(seconds=30), 10, 1, "a")]) == 20  # a gap
    st = JobStatus(
        root=REPO, audio_done_s=4000, wall_s=400, busy_s=busy_seconds(rows), audio_left_s=4000, workers_active=2
    )
    assert st.throughput == pytest.approx(10.0) and st.job_throughput == pytest.approx(20.0)
    assert st.eta_s == pytest.approx(200.0), "two workers at 10x each finish 4000 s of audio in 200 s"
    st.workers_active = 0
    assert st.eta_s == pytest.approx(400.0)


def test_a_ray_worker_that_cannot_see_the_job_dir_says_so(tmp_path):
    from pipeline.facts.errors import UsageProblem
    from pipeline.job.config import JobOptions
    from pipeline.job.engines import RayWorker

    worker = RayWorker([], JobOptions(out_dir=tmp_path / "job"), ".reach-0123")  # the driver's marker is not here
    with pytest.raises(UsageProblem, match="not reachable from the Ray worker.*mounts at the same path"):
        worker.run()


# -- real processes ----------------------------------------------------------------------------------------


def _decoders(trace) -> dict[tuple[str, str], list[str]]:
    """(file, piece) -> the pids that decoded it."""
    found: dict[tuple[str, str], list[str]] = {}
    for line in lines(trace):
        event, file_id, piece, pid = line.split()
        if event == "decoded":
            found.setdefault((file_id, piece), []).append(pid)
    return found


def _wait_for_two_decoders(procs, trace, timeout: float = 600) -> set[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = {pid for pids in _decoders(trace).values() for pid in pids}
        if len(pids) >= 2:
            return pids
        assert all(p.poll() is None for p in procs), "a worker ended before both decoded"
        time.sleep(0.05)
    raise AssertionError("two workers never decoded at the same time")


def test_workers_option_decodes_every_piece_once_and_equals_a_single_process_run(
    small_archive, small_reference, cache_dir, tmp_path
):
    out, trace = tmp_path / "job", tmp_path / "trace.txt"
    code, stdout, stderr = finish(start(out, small_archive, cache_dir, trace, "--workers", "2"))
    assert code == 0 and "done: 3, failed: 0" in stdout, stdout + stderr
    decoders = _decoders(trace)
    assert all(len(pids) == 1 for pids in decoders.values()), "a piece was decoded twice"
    assert len(decoders) == len(small_reference["pieces"])
    assert len({pids[0] for pids in decoders.values()}) == 2, "one worker did everything"
    first_claim = next(x for x in lines(trace, claims=True) if x.startswith("claimed")).split()[1]
    assert first_claim == identify(small_archive[0])[0].file_id, "the longest file goes first"
    assert close(tables(out), small_reference)
    assert {r["worker"].split(":")[1] for r in ds.dataset(out / "files").to_table().to_pylist()} == {
        pids[0] for pids in decoders.values()
    }, "files rows name the worker that wrote them"
    # the same on the finished job: one worker checks it (two loaded a model each, to do nothing)
    loud = [a for a in JOB_ARGS if a != "-q"]  # each model load says "loading"
    code, stdout, stderr = finish(start(out, small_archive, cache_dir, None, "--workers", "2", args=loud))
    assert code == 0 and "already done: 3" in stdout and stderr.count("loading ") == 1, stdout + stderr


def test_sigterm_to_a_workers_run_stops_every_worker_after_its_batch_in_hand(small_archive, cache_dir, tmp_path):
    out, trace = tmp_path / "job", tmp_path / "trace.txt"
    proc = start(out, small_archive, cache_dir, trace, "--workers", "2")
    _wait_for_two_decoders([proc], trace)
    proc.send_signal(signal.SIGTERM)  # systemd and docker signal the main process only
    code, stdout, stderr = finish(proc, timeout=120)
    assert code == EXIT_SIGTERM and "Rerun the same command to resume" in stderr, stdout + stderr
    _each_worker_saved_its_batch_in_hand(out, trace)


def test_ctrl_c_at_a_terminal_stops_every_worker_after_its_batch_in_hand(small_archive, cache_dir, tmp_path):
    """Ctrl-C reaches the whole foreground process group: each worker finishes and saves its batch in hand (the
    parent's forwarded stop is not a second signal to the children), and none outlives the run."""
    out, trace = tmp_path / "job", tmp_path / "trace.txt"
    proc = start(out, small_archive, cache_dir, trace, "--workers", "2", session=True)
    _wait_for_two_decoders([proc], trace)
    os.killpg(proc.pid, signal.SIGINT)
    code, stdout, stderr = finish(proc)
    assert code == EXIT_SIGINT and "Rerun the same command to resume" in stderr, stdout + stderr
    _each_worker_saved_its_batch_in_hand(out, trace)


def _each_worker_saved_its_batch_in_hand(out, trace) -> None:
    """Both workers decoded, every batch either one decoded was persisted, and none outlived the run."""
    events = lines(trace)
    decoded = {tuple(x.split()[1:3]) for x in events if x.startswith("decoded")}
    persisted = {tuple(x.split()[1:3]) for x in events if x.startswith("persisted")}
    assert len({x.split()[3] for x in events}) == 2
    assert decoded and decoded <= persisted, "a worker dropped its batch in hand"
    assert not workers.live_workers(out), "a worker outlived the run"


def test_killing_the_parent_of_workers_leaves_no_child_decoding(small_archive, cache_dir, tmp_path):
    out, trace = tmp_path / "job", tmp_path / "trace.txt"
    proc = start(out, small_archive, cache_dir, trace, "--workers", "2")
    pids = _wait_for_two_decoders([proc], trace)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 30
    while (alive := [p for p in pids if _alive(int(p))]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive, "a worker goes on decoding after its parent was killed"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_worker_killed_mid_file_loses_nothing_while_another_goes_on(
    small_archive, small_reference, cache_dir, tmp_path
):
    out, trace = tmp_path / "job", tmp_path / "trace.txt"
    procs = [start(out, small_archive, cache_dir, trace) for _ in range(2)]  # two runs of one job: two workers
    pids = _wait_for_two_decoders(procs, trace)
    victim = next(p for p in procs if str(p.pid) in pids)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    survivor = next(p for p in procs if p is not victim)
    code, stdout, stderr = finish(survivor)
    assert code == 0, stderr
    code, stdout, stderr = run_here(out, small_archive, cache_dir, trace)  # the rerun finishes what is left
    assert code == 0 and "failed: 0" in stdout, stdout + stderr
    assert close(tables(out), small_reference)
    assert not decoded_after_persisted(trace), "a persisted batch was decoded again"


def test_accelerate_launch_runs_ranks_as_workers_of_one_job(small_archive, small_reference, cache_dir, tmp_path):
    out, trace = tmp_path / "job", tmp_path / "trace.txt"
    env = {**os.environ, "PODSCRIBE_CACHE": str(cache_dir), "PODSCRIBE_TRACE": str(trace)}
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        str(TRACED),
        "transcribe",
        "--out",
        str(out),
        *JOB_ARGS,
        "--",
        *map(str, small_archive),
    ]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    decoders = _decoders(trace)
    assert all(len(pids) == 1 for pids in decoders.values()) and len(decoders) == len(small_reference["pieces"])
    assert len({pids[0] for pids in decoders.values()}) == 2, "one rank did everything"
    assert close(tables(out), small_reference)


def _one_renderer(out, inputs, stderr: str) -> None:
    """The workers' bars are drawn by the process that started them: one job bar over every file (100%, the job's
    whole audio) and a file bar for each file, whoever decoded it."""
    from pipeline.job.progress import clock

    whole = clock(sum(r["duration_s"] for r in ds.dataset(out / "files").to_table().to_pylist()))
    assert "job: 100%" in stderr and f"{whole}/{whole} of audio" in stderr, stderr[-3000:]
    assert all(f"{path.name}: " in stderr for path in inputs), stderr[-3000:]


def test_ray_actors_share_a_job_and_a_killed_actor_loses_nothing(small_archive, small_reference, cache_dir, tmp_path):
    """Two Ray actors decode one job; one is killed mid-file and Ray restarts it: nothing persisted is decoded
    again, the tables are a single process's, and the driver's bars (Ray's driver once showed none) still show
    the whole job from one renderer. Each file's outputs are written by the actor that finished it, as it
    finished (as --workers children do; actors once wrote none and the driver wrote all at the end, with its own
    options), into an -o folder every actor can reach, and recorded in job.json for the job's end."""
    pytest.importorskip("ray")
    out, trace, subtitles = tmp_path / "job", tmp_path / "trace.txt", tmp_path / "subtitles"
    args = [a for a in JOB_ARGS if a != "-q"]  # the bars are tested too
    extra = ("--engine", "ray", "--workers", "2", "--subtitles", "txt", "-o", str(subtitles))
    proc = start(out, small_archive, cache_dir, trace, *extra, args=args)
    pids = _wait_for_two_decoders([proc], trace, timeout=300)
    os.kill(int(sorted(pids)[0]), signal.SIGKILL)  # one actor's process, mid-file
    code, stdout, stderr = finish(proc, timeout=600)
    assert code == 0 and "failed: 0" in stdout, stdout + stderr[-3000:]
    # (its word timings, which --subtitles turns on, are the only difference from the reference's tables)
    assert close(tables(out)["pieces"], small_reference["pieces"]), "the restarted actor finished the job"
    assert not decoded_after_persisted(trace), "a persisted batch was decoded again"
    decoded = Counter(_decoders(trace))
    assert set(decoded) == {(r["file_id"], str(r["piece"])) for r in small_reference["pieces"]}
    _one_renderer(out, small_archive, stderr)
    events = [line.split() for line in trace.read_text().splitlines()]
    written = {file_id: pid for event, file_id, _, pid in events if event == "written"}
    claimed = {(file_id, pid) for event, file_id, _, pid in events if event == "claimed"}
    assert set(written) == {r["file_id"] for r in small_reference["files"]}, "a file's outputs waited for the end"
    # the actor holding the file's claim when it finished, not the driver: the restarted actor may finish a file
    # whose batches the killed one had all saved, decoding nothing of it (seen once the actors started faster)
    assert all((file_id, pid) in claimed for file_id, pid in written.items()), (
        "outputs written by another process than the actor that finished them"
    )
    assert sorted(p.stem for p in subtitles.glob("*.txt")) == sorted(p.stem for p in small_archive)
    assert json.loads((out / "job.json").read_text())["outputs"]["subtitles"] == ["txt"]
    assert not list(subtitles.glob(".reach-*")) and not list(out.glob(".reach-*"))


def test_two_workers_on_one_piece_clips_decode_each_file_once(english_human, cache_dir, tmp_path):
    """Cross-file batches claim every file they take, and a file another worker finished while it was held is
    not decoded again when it is claimed later: with --workers 2 each of 16 short clips is decoded exactly once
    (counted from the job's own trace), and every one is done. The next group's audio is read ahead only once
    it is held: both workers read (ffmpeg + VAD) every clip before claiming it."""
    clips = sorted((c for c in english_human if c.duration_s < 6), key=lambda c: c.path.name)[:16]
    out, trace = tmp_path / "job", tmp_path / "trace.txt"
    args = ["--model", "tiny.en", "--language", "en", "--batch-size", "4", "-q"]
    code, stdout, stderr = finish(start(out, [c.path for c in clips], cache_dir, trace, "--workers", "2", args=args))
    assert code == 0 and "failed: 0" in stdout, stdout + stderr
    decodes = Counter(x.split()[1] for x in lines(trace) if x.startswith("decoded"))
    assert len(decodes) == len(clips) and set(decodes.values()) == {1}, decodes
    assert len(ds.dataset(out / "files").to_table()) == len(clips)
    readers = {}  # each file's audio read (ffmpeg + VAD) by one worker only: the one that holds it
    for _, file_id, _, pid in (x.split() for x in lines(trace, reads=True) if x.startswith("read ")):
        readers.setdefault(file_id, set()).add(pid)
    assert len(readers) == len(clips) and all(len(pids) == 1 for pids in readers.values()), readers


def test_local_workers_show_the_whole_job_s_progress_from_one_renderer(clips, cache_dir, tmp_path):
    """`--workers 2` showed only the first process's own files; now the bars of the whole job (Ray's actors: the
    test above)."""
    two = [c.path for c in clips if c.path.name in ("jfk.flac", "stereo_diarization_left.wav")]
    args = ["--model", "tiny.en", "--language", "en"]  # no -q: the bars are what is tested
    code, stdout, stderr = finish(start(tmp_path / "job", two, cache_dir, None, "--workers", "2", args=args))
    assert code == 0 and "done: 2, failed: 0" in stdout, (stdout, stderr[-3000:])
    _one_renderer(tmp_path / "job", two, stderr)


def test_a_worker_killed_between_finishing_a_file_and_telling_it_leaves_the_job_bar_at_100(
    small_archive, small_reference, cache_dir, tmp_path
):
    """Bars are drawn from events, and a worker killed after its file's row was written but before it sent that
    file's seconds never sends them: the job bar of a finished job ended at 81% (the Ray test met it when its kill
    landed late). A `--workers` child killed right there: its file stays done (nothing of it decoded again), the
    last pass finishes the rest, and the job bar ends at the whole job."""
    out, trace = tmp_path / "job", tmp_path / "trace.txt"
    args = [a for a in JOB_ARGS if a != "-q"]  # the bars are tested
    env = {"PODSCRIBE_CRASH_AFTER": "finished"}
    code, stdout, stderr = finish(start(out, small_archive, cache_dir, trace, "--workers", "2", args=args, env=env))
    assert code == 0 and "failed: 0" in stdout, stdout + stderr[-3000:]
    marker = Path(f"{trace}.killed")
    assert marker.exists(), "the child finished no file (the parent took all three): nothing was tested"
    killed = marker.read_text()
    events = [x.split() for x in trace.read_text().splitlines()]
    assert any(e[0] == "finished" and e[3] == killed for e in events), "the child was not killed after a file"
    assert not decoded_after_persisted(trace), "the killed child's file was decoded again"
    assert close(tables(out), small_reference)
    _one_renderer(out, small_archive, stderr)
