"""Nothing lost, nothing hung: the ordinary accidents of a night-long job, in real processes.

Each test builds the bad situation (colliding files, a FIFO, an unmounted input, a damaged
table, a full disk, a read-only folder, odd names, signals) and asserts what the user sees
(exit code, message) and that no finished result was lost or rewritten.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from helpers import REPO, ffmpeg, podscribe, start, write_wav
from pipeline.audio import media
from pipeline.decode import DecodeOptions
from pipeline.facts.errors import (
    EXIT_CONFIG_CHANGED,
    EXIT_DAMAGED_STATE,
    EXIT_SIGHUP,
    EXIT_SIGTERM,
    EXIT_STORAGE,
    EXIT_USAGE,
)
from pipeline.job.config import JobOptions
from pipeline.job.run import run
from pipeline.storage.identity import identify, legacy_fingerprint

TINY = ["--model", "tiny.en", "-q"]


def files_rows(out: Path) -> dict[str, dict]:
    return {r["file_id"]: r for r in ds.dataset(out / "files").to_table().to_pylist()}


def snapshot(out: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for table in ("files", "segments", "pieces") for p in (out / table).glob("*.parquet")}


def job_options(out: Path, **kw) -> JobOptions:
    return JobOptions(out_dir=out, decode=DecodeOptions(language="en"), progress=False, **kw)


@pytest.fixture(scope="module")
def speech(clips, tmp_path_factory) -> dict[str, Path]:
    """Short real speech in a few containers, 16 kHz mono."""
    d = tmp_path_factory.mktemp("speech")
    by_name = {c.path.name: c.path for c in clips}
    out = {}
    for name, src in (("jfk", "jfk.flac"), ("left", "stereo_diarization_left.wav"), ("libri", "2412-153948-0000.flac")):
        out[name] = d / f"{name}.wav"
        ffmpeg("-i", str(by_name[src]), "-ac", "1", "-ar", "16000", str(out[name]))
    return out


# -- what identifies an input ---------------------------------------------------------------


def test_recordings_that_share_size_start_and_end_are_different_inputs(speech, tiny_en_models, tmp_path):
    """Same length, same 4 s of silence at both ends (more than the old 64 KiB windows), other speech."""
    silence = np.zeros(4 * media.SAMPLE_RATE, np.float32)
    a, b = media.decode(speech["jfk"]), media.decode(speech["libri"])
    n = min(len(a), len(b))
    one = write_wav(tmp_path / "one.wav", np.concatenate([silence, a[:n], silence]))
    two = write_wav(tmp_path / "two.wav", np.concatenate([silence, b[:n], silence]))
    assert one.stat().st_size == two.stat().st_size
    assert legacy_fingerprint(one) == legacy_fingerprint(two), "the construction collides under the old ids"
    assert identify(one)[0].file_id != identify(two)[0].file_id
    summary = run([str(one), str(two)], job_options(tmp_path / "job"), models=tiny_en_models)
    assert summary.done == 2
    segments = ds.dataset(tmp_path / "job" / "segments").to_table().to_pylist()
    text = {Path(s["path"]).name: "" for s in segments}
    for s in segments:
        text[Path(s["path"]).name] += s["text"]
    assert "fellow americans" in text["one.wav"].lower() and "americans" not in text["two.wav"].lower()


def test_identical_copies_keep_every_path_and_each_gets_its_subtitles(speech, tiny_en_models, tmp_path):
    for folder in ("a", "b", "c"):
        (tmp_path / folder).mkdir()
    shutil.copy(speech["jfk"], tmp_path / "a" / "ep.wav")
    shutil.copy(speech["jfk"], tmp_path / "b" / "ep.wav")
    shutil.copy(speech["left"], tmp_path / "a" / "other.wav")
    out = tmp_path / "job"
    inputs = [str(tmp_path / "a" / "ep.wav"), str(tmp_path / "b" / "ep.wav"), str(tmp_path / "a" / "other.wav")]
    summary = run(inputs, job_options(out, subtitles=["srt"]), models=tiny_en_models)
    assert (summary.done, summary.copies) == (2, 1)
    rows = files_rows(out)
    assert sorted(len(r["paths"]) for r in rows.values()) == [1, 2]
    subtitles = sorted(p.name for p in (out / "subtitles").iterdir() if not p.name.startswith("."))
    assert len(subtitles) == 3 and "other.srt" in subtitles, subtitles
    ep = [p for p in (out / "subtitles").iterdir() if p.name.startswith("ep-")]
    assert len(ep) == 2 and ep[0].read_text() == ep[1].read_text() != ""
    # a third copy later: recorded, nothing decoded again
    shutil.copy(speech["jfk"], tmp_path / "c" / "ep copy.wav")
    summary = run(
        [*inputs, str(tmp_path / "c" / "ep copy.wav")], job_options(out, subtitles=["srt"]), models=tiny_en_models
    )
    assert (summary.done, summary.already_done) == (0, 2)
    assert sorted(len(r["paths"]) for r in files_rows(out).values()) == [1, 3]
    assert (out / "subtitles" / "ep copy.srt").read_text() == ep[0].read_text()


def test_a_missing_input_keeps_its_finished_transcript(speech, cache_dir, tmp_path):
    episode = tmp_path / "share" / "episode.wav"
    episode.parent.mkdir()
    shutil.copy(speech["jfk"], episode)
    out = tmp_path / "job"
    assert podscribe("transcribe", *TINY, "--out", str(out), str(episode), cache_dir=cache_dir).returncode == 0
    before = snapshot(out)
    episode.rename(tmp_path / "elsewhere.wav")  # the share is unmounted
    result = podscribe("transcribe", *TINY, "--out", str(out), str(episode), cache_dir=cache_dir)
    assert "missing (earlier results kept): 1" in result.stdout and "file not found" in result.stderr
    assert snapshot(out) == before
    assert [r["status"] for r in files_rows(out).values()] == ["done"]
    status = podscribe("status", str(out), cache_dir=cache_dir)
    assert "1 done, 0 failed, 0 pending" in status.stdout and "missing" in status.stdout
    (tmp_path / "elsewhere.wav").rename(episode)  # mounted again: nothing to do
    result = podscribe("transcribe", *TINY, "--out", str(out), str(episode), cache_dir=cache_dir)
    assert "already done: 1" in result.stdout and snapshot(out) == before


def test_outputs_follow_the_umask(speech, cache_dir, tmp_path):
    from pipeline.storage.atomic import _file_mode

    out = tmp_path / "job"
    before = os.umask(0o027)  # a process's own umask, as a shell sets it; the CLI runs in this process
    _file_mode.cache_clear()  # read once per process: as a fresh process would, from the umask it was started with
    try:
        result = podscribe("transcribe", *TINY, "--subtitles", "srt", "--out", str(out), str(speech["jfk"]),
                           cache_dir=cache_dir)  # fmt: skip
    finally:
        os.umask(before)
        _file_mode.cache_clear()
    assert result.returncode == 0, result.stderr
    written = [p for p in out.rglob("*") if p.is_file() and p.name != ".lock"]
    assert len(written) >= 5
    assert {stat.S_IMODE(p.stat().st_mode) for p in written} == {0o640}


# -- hangs and signals ----------------------------------------------------------------------


def test_a_fifo_among_the_inputs_is_a_failed_row_not_a_hang(speech, cache_dir, tmp_path):
    fifo = tmp_path / "stream.mp3"
    os.mkfifo(fifo)
    out = tmp_path / "job"
    result = podscribe("transcribe", *TINY, "--out", str(out), str(fifo), str(speech["jfk"]), cache_dir=cache_dir)
    assert result.returncode == 0 and "done: 1, failed: 1" in result.stdout
    failed = [r for r in files_rows(out).values() if r["status"] == "failed"]
    assert "FIFO" in failed[0]["error"] and failed[0]["path"] == str(fifo)


def _start(out: Path, inputs: list[Path], cache_dir: Path, trace: Path, *extra: str, env: dict | None = None):
    return start(out, inputs, cache_dir, trace, *extra, args=TINY, env=env)


def _wait_for_trace(proc, trace: Path, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not (trace.exists() and trace.read_text().strip()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.05)


@pytest.mark.parametrize(
    "sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, EXIT_SIGTERM), (signal.SIGHUP, EXIT_SIGHUP)]
)
def test_a_signal_stops_a_job_of_short_files_between_files(sig, code, clips, cache_dir, tmp_path):
    """Each file is one piece: before, the stop flag was only read inside a file, so nothing stopped. Files of
    one piece share batches (two here): the batch in hand is finished and written, then the job stops. SIGHUP (a
    terminal or ssh session gone) ended the process at once, its batch lost."""
    shorts = sorted((c for c in clips if c.language == "en" and c.duration_s < 12), key=lambda c: c.path.name)[:8]
    inputs = []
    for i, clip in enumerate(shorts):
        inputs.append(tmp_path / f"short{i}{clip.path.suffix}")
        shutil.copy(clip.path, inputs[-1])
    out, trace = tmp_path / "job", tmp_path / "trace.txt"
    proc = _start(out, inputs, cache_dir, trace, "--batch-size", "2", env={"PODSCRIBE_STOP_GRACE_S": "120"})
    _wait_for_trace(proc, trace)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == code, stderr
    assert "Rerun the same command to resume" in stderr
    done = len(list((out / "files").glob("*.parquet")))
    assert 1 <= done < len(set(identify(p)[0].file_id for p in inputs)), "the job went on after the signal"


# -- names ------------------------------------------------------------------------------------


def test_names_ffmpeg_would_misread_work(speech, cache_dir, tmp_path):
    shutil.copy(speech["jfk"], tmp_path / "S01E01:Pilot.wav")
    shutil.copy(speech["left"], tmp_path / "-intro.wav")
    result = podscribe(
        "transcribe", *TINY, "--out", "job", "--", "S01E01:Pilot.wav", "-intro.wav", cache_dir=cache_dir, cwd=tmp_path
    )
    assert result.returncode == 0 and "done: 2, failed: 0" in result.stdout, result.stderr
    status = podscribe("status", str(tmp_path / "job"), cache_dir=cache_dir)  # from another folder
    assert "2 done, 0 failed, 0 pending" in status.stdout, status.stdout
    assert all(Path(p).is_absolute() for p in json.loads((tmp_path / "job" / "job.json").read_text())["inputs"])


# -- damaged state ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def finished(speech, cache_dir, tmp_path_factory) -> tuple[Path, list[Path]]:
    inputs = [speech["jfk"], speech["left"]]
    out = tmp_path_factory.mktemp("finished") / "job"
    # int8, which a rerun resumes with: a row's bits at any batch height on every CPU. A test that damages one
    # input decodes it again alone, where this run decoded it beside the other; on an AMX CPU `auto` is bfloat16,
    # whose scores follow the batch in their last bits (docs/compute-types.md, "What is exact where").
    result = podscribe(
        "transcribe", *TINY, "--compute-type", "int8", "--out", str(out), *map(str, inputs), cache_dir=cache_dir
    )
    assert result.returncode == 0, result.stderr
    return out, inputs


@pytest.fixture
def finished_job(finished, tmp_path) -> tuple[Path, list[Path]]:
    """A copy of one finished two-file job for each test to damage."""
    out, inputs = finished
    shutil.copytree(out, tmp_path / "job", symlinks=True)
    return tmp_path / "job", inputs


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize("table", ["files", "segments"])
def test_a_damaged_table_is_reported_then_set_aside_and_its_input_decoded_again(table, finished_job, cache_dir):
    out, inputs = finished_job
    victim = identify(inputs[0])[0].file_id
    good = {p: b for p, b in snapshot(out).items() if victim not in p.name}
    _truncate(out / table / f"{victim}.parquet")
    status = podscribe("status", str(out), cache_dir=cache_dir)
    assert status.returncode == 0 and "Traceback" not in status.stderr
    assert f"{victim}.parquet" in status.stdout and "rerun the job" in status.stdout
    export = podscribe("export", str(out), "--format", "srt", cache_dir=cache_dir)
    assert export.returncode == EXIT_DAMAGED_STATE and f"{victim}.parquet" in export.stderr
    assert "Traceback" not in export.stderr and (out / "subtitles" / f"{inputs[1].stem}.srt").is_file()
    result = podscribe("transcribe", *TINY, "--out", str(out), *map(str, inputs), cache_dir=cache_dir)
    assert result.returncode == 0 and "done: 1, failed: 0, already done: 1" in result.stdout, result.stderr
    assert list((out / "damaged" / table).iterdir()), "the damaged table is kept aside"
    assert all(snapshot(out)[p] == b for p, b in good.items()), "the other input's tables were rewritten"
    assert pq.read_table(out / table / f"{victim}.parquet").num_rows > 0


def _damage_inside(path: Path, how: str) -> None:
    """Bytes changed in the middle of a table, its footer intact (reading the metadata still works): ``pages``,
    a run of bytes of the data pages scrambled; ``a value``, one word of the transcript replaced in place by
    others of its length (it still decodes, as other text)."""
    data = bytearray(path.read_bytes())
    pages_end = len(data) - pq.read_metadata(path).serialized_size - 8
    if how == "pages":
        middle = pages_end // 2
        data[middle - 16 : middle + 16] = bytes(b ^ 0x5A for b in data[middle - 16 : middle + 16])
    else:
        word = max(pq.read_table(path).column("text")[0].as_py().split(), key=len).encode()
        changed = bytes(data[:pages_end]).replace(word, b"X" * len(word))
        assert changed != bytes(data[:pages_end])
        data[:pages_end] = changed
    path.write_bytes(bytes(data))
    assert pq.read_metadata(path).num_rows > 0, "the footer no longer reads: not the damage meant here"


@pytest.mark.parametrize(
    "table, how", [("segments", "pages"), ("segments", "a value"), ("pieces", "pages"), ("pieces", "truncated")]
)
def test_a_table_damaged_inside_with_its_footer_intact_is_noticed_and_its_input_decoded_again(
    table, how, finished_job, cache_dir
):
    """A done file's segments or pieces with damaged data pages but an intact footer: status counts the file
    pending and names the table, export writes nothing from it (never garbage), and the rerun moves the table
    to damaged/ and decodes the file again, to the same tables."""
    out, inputs = finished_job
    victim = identify(inputs[0])[0].file_id
    path = out / table / f"{victim}.parquet"
    original = pq.read_table(path).to_pylist()
    good = {p: b for p, b in snapshot(out).items() if victim not in p.name}
    _truncate(path) if how == "truncated" else _damage_inside(path, how)
    status = podscribe("status", str(out), cache_dir=cache_dir)
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
    assert "1 done, 0 failed, 1 pending" in status.stdout and f"{victim}.parquet" in status.stdout, status.stdout
    if table == "segments":
        export = podscribe("export", str(out), "--format", "srt", cache_dir=cache_dir)
        assert export.returncode == EXIT_DAMAGED_STATE and f"{victim}.parquet" in export.stderr, export.stderr
        assert not (out / "subtitles" / f"{inputs[0].stem}.srt").exists(), "subtitles from a damaged table"
    result = podscribe("transcribe", *TINY, "--out", str(out), *map(str, inputs), cache_dir=cache_dir)
    assert result.returncode == 0 and "done: 1, failed: 0, already done: 1" in result.stdout, result.stderr
    assert list((out / "damaged" / table).iterdir()), "the damaged table is kept aside"
    assert all(snapshot(out)[p] == b for p, b in good.items()), "the other input's tables were rewritten"
    assert pq.read_table(path).to_pylist() == original
    assert "1 pending" not in podscribe("status", str(out), cache_dir=cache_dir).stdout


def test_a_damaged_checkpoint_is_dropped_and_its_pieces_decoded_again(speech, tiny_en_models, tmp_path):
    reference = tmp_path / "reference"
    run([str(speech["jfk"])], job_options(reference), models=tiny_en_models)
    out = tmp_path / "job"
    partial = out / "partial" / identify(speech["jfk"])[0].file_id / "batch-000000.parquet"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"PAR1 half a checkpoint")
    summary = run([str(speech["jfk"])], job_options(out), models=tiny_en_models)
    assert summary.done == 1 and summary.failed == 0
    strip = lambda rows: [
        {k: v for k, v in r.items() if k not in ("wall_s", "realtime_factor", "finished_at")} for r in rows
    ]  # noqa: E731
    for table in ("files", "segments"):
        assert strip(ds.dataset(out / table).to_table().to_pylist()) == strip(
            ds.dataset(reference / table).to_table().to_pylist()
        )


WRONG_TYPES = {"config": {"models": "tiny.en", "decode": 3}, "inputs": 5, "config_hash": 7}


@pytest.mark.parametrize("damage", ["garbage", "not an object", "wrong types", "a number for a name", "deleted"])
def test_a_lost_job_json_is_rebuilt_when_the_results_match_and_refused_when_not(damage, finished_job, cache_dir):
    out, inputs = finished_job
    job_json = out / "job.json"
    record = json.loads(job_json.read_text())
    record["config"]["models"]["runtime"] = 5  # its hash unchanged: only the type is wrong
    if damage == "deleted":
        job_json.unlink()
    else:
        damaged = {"garbage": "{ half", "not an object": "[1, 2]", "wrong types": json.dumps(WRONG_TYPES)}
        job_json.write_text(damaged.get(damage) or json.dumps(record))
    status = podscribe("status", str(out), cache_dir=cache_dir)
    assert status.returncode == 0 and "Traceback" not in status.stderr and "2 done" in status.stdout
    other = podscribe(
        "transcribe", *TINY, "--language", "en", "--out", str(out), *map(str, inputs), cache_dir=cache_dir
    )
    assert other.returncode == EXIT_CONFIG_CHANGED and "another configuration" in other.stderr, other.stderr
    same = podscribe("transcribe", *TINY, "--out", str(out), *map(str, inputs), cache_dir=cache_dir)
    assert same.returncode == 0 and "already done: 2" in same.stdout, same.stderr
    assert json.loads(job_json.read_text())["config"]["decode"]["language"] is None


def test_a_plain_file_where_the_workers_folder_should_be_is_named_with_exit_5(finished_job, cache_dir):
    out, inputs = finished_job
    shutil.rmtree(out / "workers", ignore_errors=True)
    (out / "workers").write_text("not a folder")
    result = podscribe("transcribe", *TINY, "--out", str(out), *map(str, inputs), cache_dir=cache_dir)
    assert result.returncode == EXIT_DAMAGED_STATE and "Traceback" not in result.stderr, result.stderr
    assert f"{out / 'workers'} is in the way" in result.stderr


# -- environment errors: one line, their own exit code, nothing left behind ---------------------------


def test_bad_arguments_answer_at_once_with_exit_2_and_leave_nothing(speech, cache_dir, tmp_path):
    afile = tmp_path / "a-file"
    afile.write_text("x")
    job = tmp_path / "job.toml"
    job.write_text(f'inputs = ["{speech["jfk"]}"]\nsubtitles = [1]\nout = "{tmp_path / "j"}"\n')
    cases = {
        "out under a file": ["transcribe", "--out", str(afile / "job"), str(speech["jfk"])],
        "log file in a missing folder": [
            "transcribe",
            "--out",
            str(tmp_path / "j"),
            "--log-file",
            str(tmp_path / "nope" / "log.txt"),
            str(speech["jfk"]),
        ],
        "dtype": ["transcribe", "--dtype", "foo", "--out", str(tmp_path / "j"), str(speech["jfk"])],
        "device": ["transcribe", "--device", "foo", "--out", str(tmp_path / "j"), str(speech["jfk"])],
        "subtitles in a job file": ["run", str(job)],
        "unknown model": [
            "transcribe",
            "--model",
            "someone/no-such-whisper",
            "--out",
            str(tmp_path / "j"),
            str(speech["jfk"]),
        ],
    }
    for name, args in cases.items():
        result = podscribe(*args, cache_dir=cache_dir)
        assert result.returncode == EXIT_USAGE, (name, result.stderr)
        assert "Traceback" not in result.stderr, name
        assert not (tmp_path / "j").exists(), f"{name}: a job dir was left behind"
    assert "cannot be reached" in result.stderr and "Installed: tiny.en, base" in result.stderr  # what to use instead


def test_importing_the_cli_loads_neither_torch_nor_transformers():
    probe = "import sys, pipeline.cli; print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO)
    assert result.stdout.strip() == "[]"


@pytest.fixture
def tmpfs(tmp_path):
    """A small filesystem of our own: mounted where the machine allows it (root, CAP_SYS_ADMIN)."""
    mounted = []

    def mount(name: str, options: str) -> Path:
        where = tmp_path / name
        where.mkdir()
        if (
            subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True).returncode
            != 0
        ):
            pytest.skip("cannot mount a tmpfs here (needs root)")
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_a_read_only_out_dir_is_a_usage_error(speech, cache_dir, tmpfs):
    ro = tmpfs("ro", "ro,size=1m")
    result = podscribe("transcribe", *TINY, "--out", str(ro / "job"), str(speech["jfk"]), cache_dir=cache_dir)
    assert result.returncode == EXIT_USAGE and "Read-only file system" in result.stderr, result.stderr


def test_a_full_disk_stops_cleanly_and_the_job_resumes_when_space_is_freed(speech, cache_dir, tmpfs):
    disk = tmpfs("disk", "size=2m")
    out = disk / "job"
    filler = disk / "filler"
    inputs = [str(speech["jfk"]), str(speech["left"]), str(speech["libri"])]
    with open(filler, "wb") as f:  # leave ~40 KiB: the job dir starts, the tables do not all fit
        try:
            f.write(b"\0" * (2 * 1024 * 1024 - 40 * 1024))
        except OSError:
            pass
    full = podscribe("transcribe", *TINY, "--out", str(out), *inputs, cache_dir=cache_dir)
    assert full.returncode == EXIT_STORAGE, full.stderr
    assert "cannot write" in full.stderr and "Traceback" not in full.stderr
    assert not [p for p in out.rglob("*.tmp")], "temp files left behind"
    filler.unlink()
    again = podscribe("transcribe", *TINY, "--out", str(out), *inputs, cache_dir=cache_dir)
    assert again.returncode == 0, again.stderr
    assert sorted(r["status"] for r in files_rows(out).values()) == ["done"] * 3


# -- truncated files and extra streams -----------------------------------------------------------


def test_truncated_files_keep_what_decodes_and_say_so(speech, cache_dir, tmp_path):
    src = str(speech["libri"])
    made = {"cbr.mp3": ["-b:a", "64k", "-write_xing", "0"], "vbr.mp3": ["-q:a", "4"], "cut.wav": []}
    for name, args in made.items():
        whole = tmp_path / f"whole-{name}"
        ffmpeg("-i", src, *args, str(whole))
        data = whole.read_bytes()
        (tmp_path / name).write_bytes(data[: len(data) // 2 + 101])
    out = tmp_path / "job"
    result = podscribe("transcribe", *TINY, "--out", str(out), *(str(tmp_path / n) for n in made), cache_dir=cache_dir)
    assert result.returncode == 0 and f"done: {len(made)}, failed: 0" in result.stdout, result.stderr
    whole_s = media.probe(speech["libri"]).duration_s
    for row in files_rows(out).values():
        assert row["status"] == "done" and row["n_words"] > 3, row
        assert row["warnings"] and "truncated" in row["warnings"], row
        assert 0.35 * whole_s < row["duration_s"] < 0.65 * whole_s
    assert result.stderr.count("truncated") >= len(made)


def test_a_second_audio_stream_is_named_in_a_warning(speech, cache_dir, tmp_path):
    mp4 = tmp_path / "two tracks.mp4"
    ffmpeg(
        "-i",
        str(speech["jfk"]),
        "-i",
        str(speech["left"]),
        "-map",
        "0:a",
        "-map",
        "1:a",
        "-c:a",
        "aac",
        "-metadata:s:a:1",
        "language=deu",
        str(mp4),
    )
    out = tmp_path / "job"
    result = podscribe("transcribe", *TINY, "--out", str(out), str(mp4), cache_dir=cache_dir)
    assert result.returncode == 0, result.stderr
    (row,) = files_rows(out).values()
    assert "2 audio streams" in row["warnings"] and "deu" in row["warnings"]
    assert "country" in " ".join(ds.dataset(out / "segments").to_table().column("text").to_pylist()).lower()


def test_a_job_dir_from_before_whole_content_ids_keeps_its_results(speech, tiny_en_models, tmp_path, monkeypatch):
    """Rows made with the old 16-digit ids and relative paths are adopted, not decoded again."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(speech["jfk"], tmp_path / "ep.wav")
    out = tmp_path / "job"
    run(["ep.wav"], job_options(out), models=tiny_en_models)
    new_id = identify(tmp_path / "ep.wav")[0].file_id
    old_id = legacy_fingerprint(tmp_path / "ep.wav")
    for table in ("files", "segments", "pieces"):  # what podscribe 0.1 wrote
        rows = pq.read_table(out / table / f"{new_id}.parquet").to_pylist()
        for r in rows:
            r.update(file_id=old_id, **({"path": "ep.wav"} if "path" in r else {}))
            if table == "files":
                r.update(paths=None, config_hash=None)
        schema = pq.read_schema(out / table / f"{new_id}.parquet")
        (out / table / f"{new_id}.parquet").unlink()
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), out / table / f"{old_id}.parquet")
    (out / "fingerprints.json").unlink()
    before = {p.name: p.read_bytes() for p in (out / "segments").iterdir()}
    summary = run(["ep.wav"], job_options(out), models=tiny_en_models)
    assert (summary.done, summary.already_done) == (0, 1)
    assert {p.name: p.read_bytes() for p in (out / "segments").iterdir()} == before
    (row,) = files_rows(out).values()
    assert row["file_id"] == old_id and row["paths"] == [str(tmp_path / "ep.wav")]


def test_a_second_signal_stops_at_once_and_the_job_still_resumes(speech, cache_dir, tmp_path):
    long = tmp_path / "long.wav"
    ffmpeg(
        "-i",
        str(speech["jfk"]),
        "-i",
        str(speech["libri"]),
        "-i",
        str(speech["left"]),
        "-filter_complex",
        "concat=n=3:v=0:a=1",
        str(long),
    )
    out, trace = tmp_path / "job", tmp_path / "trace.txt"
    proc = _start(
        out,
        [long],
        cache_dir,
        trace,
        "--batch-size",
        "1",
        "--min-piece",
        "3",
        "--max-piece",
        "6",
        env={"PODSCRIBE_STOP_GRACE_S": "600"},
    )
    _wait_for_trace(proc, trace)
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_SIGTERM and "Traceback" not in stderr, stderr
    assert not list(out.rglob("*.tmp"))
    again = podscribe(
        "transcribe",
        *TINY,
        "--batch-size",
        "1",
        "--min-piece",
        "3",
        "--max-piece",
        "6",
        "--out",
        str(out),
        str(long),
        cache_dir=cache_dir,
    )
    assert again.returncode == 0 and "done: 1" in again.stdout, again.stderr


def test_a_copy_that_changes_leaves_the_row_while_a_new_copy_joins_it(speech, tiny_en_models, tmp_path):
    a, b, c = (tmp_path / name for name in ("a.wav", "b.wav", "c.wav"))
    shutil.copy(speech["jfk"], a)
    shutil.copy(speech["jfk"], b)
    out = tmp_path / "job"
    run([str(a), str(b)], job_options(out), models=tiny_en_models)
    shutil.copy(speech["left"], b)  # b now holds other content
    shutil.copy(speech["jfk"], c)  # c is a new copy of a
    summary = run([str(a), str(b), str(c)], job_options(out), models=tiny_en_models)
    assert (summary.done, summary.already_done, summary.copies) == (1, 1, 1)
    paths = {r["file_id"]: r["paths"] for r in files_rows(out).values()}
    assert paths[identify(a)[0].file_id] == [str(a), str(c)] and paths[identify(b)[0].file_id] == [str(b)]


def test_an_input_renamed_over_while_it_is_decoded_is_decoded_as_its_new_content_and_the_old_id_stays_clean(
    small_archive, small_reference, cache_dir, tmp_path
):
    """`ep.mp3` renamed over (another episode) after its first checkpoint: its row under the old content id held
    the new audio's transcript, and with the original put back the next run said "already done" and kept it.
    Nothing of it is kept under the old id; the new content is decoded under its own, and the run says so; the
    original, put back, is decoded as itself. Both transcripts equal an uninterrupted run's (the same pieces)."""
    from helpers import finish, lines, run_here

    episode, other = small_archive[0], small_archive[1]
    path, trace, out = tmp_path / "in" / "ep.mp3", tmp_path / "trace", tmp_path / "job"
    path.parent.mkdir()
    shutil.copy(episode, path)
    old_id, new_id = identify(episode)[0].file_id, identify(other)[0].file_id
    proc = start(out, [path], cache_dir, trace)
    while not any(x.startswith("persisted") for x in lines(trace)):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    swap = tmp_path / "in" / ".swap"
    shutil.copy(other, swap)
    os.replace(swap, path)  # renamed over, as a sync tool or `mv` does
    code, stdout, stderr = finish(proc)
    assert code == 0 and "done: 1, failed: 0" in stdout and "its content changed after it was planned" in stderr, (
        stdout + stderr
    )
    assert f"changed {old_id}" in trace.read_text()
    assert set(files_rows(out)) == {new_id} and not (out / "partial" / old_id).exists()

    def texts(tables: dict, file_id: str) -> list[str]:
        return [s["text"] for s in tables["segments"] if s["file_id"] == file_id]

    from helpers import tables

    assert texts(tables(out), new_id) == texts(small_reference, new_id)
    shutil.copy(episode, swap)
    os.replace(swap, path)  # the original back
    code, stdout, stderr = run_here(out, [path], cache_dir)
    assert code == 0 and "done: 1, failed: 0, already done: 0" in stdout, stdout + stderr
    assert texts(tables(out), old_id) == texts(small_reference, old_id)


def test_ctrl_c_while_the_model_loads_makes_no_job_dir(speech, cache_dir, tmp_path):
    """Ctrl-C in the first seconds still loaded the model, made the job dir and went on to plan."""
    out, trace = tmp_path / "job", tmp_path / "trace"
    proc = start(out, [speech["jfk"]], cache_dir, trace, args=["--model", "base"])  # no -q: it says "loading"
    from helpers import wait_for_stderr

    seen = wait_for_stderr(proc, "loading")
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130 and "Rerun the same command to resume" in stderr, seen + stderr
    assert not out.exists() and not trace.exists(), "it went on after the stop"


def test_a_conversion_killed_midway_leaves_no_partial_model_in_the_cache(speech, cache_dir, tmp_path):
    """A SIGKILL during a model's first conversion left its temporary folder (76 MB for tiny.en) in the cache for
    good. The next conversion removes the folders of conversions whose process is gone. (A cache of its own: the
    shared one has tiny.en converted already.)"""
    from helpers import run_here

    own_cache, out = tmp_path / "cache", tmp_path / "job"
    proc = start(out, [speech["jfk"]], own_cache, None, args=TINY)
    deadline = time.monotonic() + 300
    while not list(own_cache.glob("models/*.partial-*")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.005)
    proc.kill()
    proc.wait()
    assert list(own_cache.glob("models/*.partial-*")), "the kill came after the conversion"
    code, stdout, stderr = run_here(out, [speech["jfk"]], own_cache, None, args=TINY)
    assert code == 0 and "done: 1" in stdout, stderr
    assert not list(own_cache.glob("models/*.partial-*")) and list(own_cache.glob("models/*/model.safetensors"))


def test_status_reads_each_table_s_pages_once_and_verify_reads_them_all_again(finished_job, cache_dir):
    """Every plan and every `status` read every done table whole: for an archive that is a read of the archive.
    A table that read whole once is remembered by its stat and checked by its footer after that. Damage no stat
    shows (bytes rotting below the file system: here its stamp is written as the damaged file's) goes unseen by a
    plain `status`, which is the proof no page was read; `status --verify` reads every page, names it and forgets
    it, and the next run sets it aside and decodes that input again."""
    from pipeline.storage.verified import Verified

    out, inputs = finished_job
    (out / "verified.json").unlink()
    rerun = podscribe("transcribe", *TINY, "--out", str(out), *map(str, inputs), cache_dir=cache_dir)
    assert "already done: 2" in rerun.stdout, rerun.stderr
    victim = identify(inputs[0])[0].file_id
    path = out / "segments" / f"{victim}.parquet"
    remembered = json.loads((out / "verified.json").read_text())  # the plan read each table once and kept that
    assert remembered[f"segments/{victim}"] == Verified.stamp(path) and f"pieces/{victim}" in remembered
    _damage_inside(path, "pages")
    remembered[f"segments/{victim}"] = Verified.stamp(path)
    (out / "verified.json").write_text(json.dumps(remembered))
    plain = podscribe("status", str(out), cache_dir=cache_dir)
    assert "2 done, 0 failed, 0 pending" in plain.stdout, plain.stdout
    assert json.loads((out / "verified.json").read_text()) == remembered, "a plain status wrote the job dir"
    checked = podscribe("status", str(out), "--verify", cache_dir=cache_dir)
    assert checked.returncode == 0 and "1 done, 0 failed, 1 pending" in checked.stdout, checked.stdout
    assert f"{victim}.parquet" in checked.stdout
    assert f"segments/{victim}" not in json.loads((out / "verified.json").read_text()), "found damaged, still kept"
    repaired = podscribe("transcribe", *TINY, "--out", str(out), *map(str, inputs), cache_dir=cache_dir)
    assert "done: 1, failed: 0, already done: 1" in repaired.stdout, repaired.stderr
    assert list((out / "damaged" / "segments").iterdir()), "the damaged table is kept aside"
