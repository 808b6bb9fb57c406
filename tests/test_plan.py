"""Fast tests (no model) of the runner's pure parts: a file's language, input identity, copies."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from pipeline.audio.media import SAMPLE_RATE, Piece
from pipeline.decode.review import file_language, segment_flags
from pipeline.facts.records import PieceResult, RawSegment
from pipeline.job.inputs import expand_inputs
from pipeline.storage.identity import Fingerprints, identify


def _piece(index: int, seconds: float) -> Piece:
    return Piece(index, index * 30 * SAMPLE_RATE, None, int(seconds * SAMPLE_RATE))


def _result(language: str, spoken: list[tuple[float, float]], skipped: str | None = None) -> PieceResult:
    return PieceResult(segments=[RawSegment(a, b, "words") for a, b in spoken], language=language, skipped=skipped)


def test_a_files_language_is_the_one_with_the_most_speech_not_the_most_pieces():
    done = [
        (_piece(0, 29), _result("en", [(0, 14), (14.5, 28.5)])),
        (_piece(1, 8), _result("de", [(0, 6)])),
        (_piece(2, 7), _result("de", [(0.5, 6.5)])),
    ]
    assert file_language(done) == "en"
    done.append((_piece(3, 30), _result("de", [(0, 20)])))
    assert file_language(done) == "de"


def test_skipped_pieces_and_pieces_without_segments_weigh_as_they_should():
    done = [(_piece(0, 30), _result("cy", [], skipped="no_voice")), (_piece(1, 5), _result("en", []))]
    assert file_language(done) == "en"  # no segments: the piece's length counts; skipped pieces never
    assert file_language([(_piece(0, 30), _result("cy", [], skipped="silence"))]) is None


def test_identity_reads_content_and_never_blocks_on_a_fifo(tmp_path):
    a, b = tmp_path / "a.wav", tmp_path / "b.wav"
    a.write_bytes(b"\0" * 100_000 + b"A" + b"\0" * 100_000)
    b.write_bytes(b"\0" * 100_000 + b"B" + b"\0" * 100_000)
    assert identify(a)[0].file_id != identify(b)[0].file_id  # same size, same first and last 64 KiB
    fifo = tmp_path / "pipe.mp3"
    os.mkfifo(fifo)
    result = []
    worker = threading.Thread(target=lambda: result.append(identify(fifo)[0]), daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert result and not result[0].readable and "FIFO" in result[0].problem
    missing = identify(tmp_path / "gone.mp3")[0]
    assert not missing.readable and missing.file_id.startswith("x")


def test_fingerprints_hash_again_only_what_changed(tmp_path):
    a = tmp_path / "a.wav"
    a.write_bytes(b"one")
    cache = Fingerprints(tmp_path / "fingerprints.json")
    first = cache.identify(a).file_id
    cache.save()
    cache = Fingerprints(tmp_path / "fingerprints.json")
    assert cache.identify(a).file_id == first and not cache.changed  # from the cache: not read again
    time.sleep(0.01)
    a.write_bytes(b"two")
    assert cache.identify(a).file_id != first


def test_a_damaged_fingerprints_record_is_hashed_again_not_a_traceback(tmp_path):
    a, b = tmp_path / "a.wav", tmp_path / "b.wav"
    a.write_bytes(b"one")
    b.write_bytes(b"two")
    record = tmp_path / "fingerprints.json"
    good = Fingerprints(record)
    want = good.identify(a).file_id, good.identify(b).file_id
    good.save()
    entries = json.loads(record.read_text())
    entries[str(a)] = 5
    entries[str(b)] = entries[str(b)][:3] + ["x", None]
    entries["/c.wav"] = {"size": 1}
    record.write_text(json.dumps(entries))
    damaged = Fingerprints(record)
    assert (damaged.identify(a).file_id, damaged.identify(b).file_id) == want and damaged.changed


def test_inputs_are_absolute_and_a_path_given_twice_is_one_input(tmp_path, monkeypatch):
    (tmp_path / "show").mkdir()
    (tmp_path / "show" / "ep1.mp3").write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    refs = expand_inputs(["show/ep1.mp3", str(tmp_path / "show" / "ep1.mp3"), "show"])
    assert [r.path for r in refs] == [tmp_path / "show" / "ep1.mp3"]
    assert all(Path(r.path).is_absolute() for r in refs)


def test_inputs_given_with_dot_dot_are_the_paths_their_rows_keep(tmp_path, monkeypatch):
    from pipeline.storage.manifest import row_paths

    (tmp_path / "in").mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "in" / "ep.wav").write_bytes(b"x")
    monkeypatch.chdir(tmp_path / "run")
    refs = expand_inputs(["../in/ep.wav", "../in/*.wav", "../gone/ep.wav"])
    assert [str(r.path) for r in refs] == [str(tmp_path / "in" / "ep.wav"), str(tmp_path / "gone" / "ep.wav")]
    assert [str(r.path) for r in refs] == row_paths({"paths": ["../in/ep.wav", "../gone/ep.wav"]})
    # a link before the `..`: its resolved path, not the short form (which would be another file)
    (tmp_path / "in" / "sub").mkdir()
    (tmp_path / "in" / "sub" / "x.wav").write_bytes(b"y")
    (tmp_path / "run" / "deep").symlink_to(tmp_path / "in" / "sub")
    assert expand_inputs(["deep/../sub/x.wav"])[0].path == tmp_path / "in" / "sub" / "x.wav"


def test_segments_are_flagged_from_their_pieces_own_signals():
    from pipeline.decode import DecodeOptions

    options = DecodeOptions()
    clean = PieceResult(language="en", no_speech_prob=0.01, avg_logprob=-0.2, compression_ratio=1.4)
    assert segment_flags(clean, "en", options) == []
    odd = PieceResult(language="de", no_speech_prob=0.7, avg_logprob=-1.3, compression_ratio=3.1)
    assert segment_flags(odd, "en", options) == ["no_speech", "low_logprob", "loop", "language"]
    strict = DecodeOptions(logprob_threshold=-0.1)
    assert segment_flags(clean, "en", strict) == ["low_logprob"]


def test_the_cli_and_the_job_dir_import_without_fcntl():
    """Windows has no fcntl: transcribe and export must still import (the lock falls back to msvcrt)."""
    import subprocess
    import sys

    probe = "import sys; sys.modules['fcntl'] = None; import pipeline.storage.manifest, pipeline.cli, pipeline.outputs.export"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1]
    )
    assert result.returncode == 0, result.stderr


def test_a_job_made_before_an_option_existed_resumes_with_the_old_behaviour_and_names_it_otherwise(tmp_path):
    from dataclasses import asdict

    import pytest

    from pipeline.audio.media import CutOptions
    from pipeline.decode import DecodeOptions
    from pipeline.facts.errors import ConfigChanged
    from pipeline.job.config import ADDED, SPEED_ONLY
    from pipeline.storage.manifest import JobDir

    def config(decode: DecodeOptions, cut: CutOptions, before_added: bool = False) -> dict:
        out = {"decode": asdict(decode), "cut": asdict(cut)}
        if before_added:
            for dotted in ADDED:
                section, key = dotted.split(".")
                del out[section][key]
        return out

    job = JobDir(tmp_path / "job")
    job.write_job(config(DecodeOptions(), CutOptions(), before_added=True), [])
    recorded = job.read_job()
    as_before = DecodeOptions(coverage=False, fallback_beams=0)
    cut_before = CutOptions(prefer_s=15.0)
    job.check_config(config(as_before, cut_before), SPEED_ONLY, recorded, ADDED)  # the old behaviour: goes on
    with pytest.raises(ConfigChanged, match=r"decode\.coverage: False -> True.*decode\.fallback_beams: 0 -> 5"):
        job.check_config(config(DecodeOptions(), cut_before), SPEED_ONLY, recorded, ADDED)
    with pytest.raises(ConfigChanged, match=r"cut\.prefer_s: 15\.0 -> 20\.0"):
        job.check_config(config(as_before, CutOptions()), SPEED_ONLY, recorded, ADDED)
    with pytest.raises(ConfigChanged, match="min_s"):
        job.check_config(config(as_before, CutOptions(min_s=20.0, prefer_s=15.0)), SPEED_ONLY, recorded, ADDED)

    # the job's own check says what to type: a night's job after an upgrade changed a default
    from pipeline.job.config import check_config

    with pytest.raises(ConfigChanged, match=r"To resume it as it was made: --prefer-piece 15\.$"):
        check_config(job, config(as_before, CutOptions()), [])
    with pytest.raises(ConfigChanged, match=r"as it was made: --prefer-piece 15 --no-coverage --fallback-beams 0\.$"):
        check_config(job, config(DecodeOptions(), CutOptions()), [])
    with pytest.raises(ConfigChanged) as refused:  # a path no flag sets: no half a command
        check_config(job, {**config(as_before, cut_before), "models": {"model": "tiny.en"}}, [])
    assert "as it was made" not in str(refused.value)


def test_the_job_package_loads_neither_torch_nor_transformers_when_imported():
    """`podscribe status`, --dry-run and --help import the job's modules: none of them may load torch (seconds)."""
    import pkgutil
    import subprocess
    import sys

    import pipeline.job

    names = [
        "pipeline.cli.status",
        *(f"pipeline.job.{m.name}" for m in pkgutil.iter_modules(pipeline.job.__path__)),
    ]
    probe = f"import sys; import {', '.join(names)}; print(sorted({{'torch', 'transformers'}} & set(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=Path(__file__).parents[1]
    )
    assert len(names) > 10 and result.stdout.strip() == "[]", (names, result.stdout, result.stderr)


def test_a_file_touched_under_a_job_is_hashed_once_and_a_file_rewritten_is_caught(tmp_path):
    """A checkpoint asks whether the file still holds what was claimed: a touch (same bytes, new mtime) is hashed
    once and its new stat remembered, not hashed again at every later checkpoint; new bytes give their new id."""
    from pipeline.job.inputs import InputRef
    from pipeline.job.plan import Task
    from pipeline.storage.identity import identify

    path = tmp_path / "ep.wav"
    path.write_bytes(b"one" * 1000)
    ident, key = identify(path)
    task = Task(ident.file_id, [InputRef(path)], stat_key=key)
    assert task.changed() is None and task.stat_key == key
    os.utime(path, ns=(0, 10**9))
    assert task.changed() is None and task.stat_key != key and task.stat_key == identify(path)[1]
    path.write_bytes(b"two" * 1000)
    assert task.changed() == identify(path)[0].file_id
