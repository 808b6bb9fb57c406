"""Whisper users' conventions: -o/-f output files, --language names and auto, unsupported decoding flags,
language per segment."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds
import pytest
import srt
import webvtt

from helpers import REPO, podscribe, write_wav
from pipeline.audio import media
from pipeline.decode import DecodeOptions
from pipeline.job.config import JobOptions
from pipeline.job.run import run

TINY = ["--model", "tiny.en", "-q"]


@pytest.fixture(scope="module")
def jfk(clips) -> Path:
    return next(c.path for c in clips if c.path.name == "jfk.flac")


def test_output_dir_and_formats_like_whisper_without_overwrites(jfk, clips, cache_dir, tmp_path):
    other = next(c.path for c in clips if c.path.name == "stereo_diarization_left.wav")
    for folder, src in (("a", jfk), ("b", other)):
        (tmp_path / folder).mkdir()
        shutil.copy(src, tmp_path / folder / f"ep{src.suffix}")
    shutil.copy(jfk, tmp_path / "speech.flac")
    result = podscribe(
        "transcribe",
        *TINY,
        "-f",
        "all",
        "-o",
        "out",
        "a/ep.flac",
        "b/ep.wav",
        "speech.flac",
        cache_dir=cache_dir,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out"
    jobs = list((out / "podscribe-manifests").iterdir())  # one job per configuration
    assert len(jobs) == 1 and (jobs[0] / "files").is_dir(), "without --out the manifests go beside the files"
    stems = {p.stem for p in out.iterdir() if p.is_file()}
    assert "speech" in stems and len(stems) == 3, stems  # the two ep.* got distinct names
    assert "shares its name" in result.stderr
    for stem in stems:
        text = (out / f"{stem}.txt").read_text()
        cues = list(srt.parse((out / f"{stem}.srt").read_text()))
        vtt = webvtt.read(str(out / f"{stem}.vtt"))
        doc = json.loads((out / f"{stem}.json").read_text())
        rows = [line.split("\t") for line in (out / f"{stem}.tsv").read_text().splitlines()]
        assert rows[0] == ["start", "end", "text"] and len(rows) > 1
        assert all(int(a) <= int(b) for a, b, _ in rows[1:])  # integer milliseconds
        assert text.strip() and cues and len(vtt.captions) == len(cues) and doc["segments"]
        assert all(isinstance(seg["flags"], list) and "language" in seg for seg in doc["segments"])
    jfk_stems = [s for s in stems if "country" in (out / f"{s}.txt").read_text().lower()]
    assert len(jfk_stems) == 2, "the copy in a/ and speech.flac both carry JFK"


def test_export_writes_tsv_like_whisper(jfk, cache_dir, tmp_path):
    job = tmp_path / "job"
    assert podscribe("transcribe", *TINY, "--out", str(job), str(jfk), cache_dir=cache_dir).returncode == 0
    result = podscribe("export", str(job), "-f", "tsv", "-o", str(tmp_path / "subs"), cache_dir=cache_dir)
    assert result.returncode == 0, result.stderr
    lines = (tmp_path / "subs" / "jfk.tsv").read_text().splitlines()
    assert lines[0] == "start\tend\ttext" and lines[1].split("\t")[0].isdigit()


def test_language_accepts_auto_and_names_and_refuses_unknown_ones_before_loading(jfk, cache_dir, tmp_path):
    bad = podscribe(
        "transcribe", *TINY, "--language", "klingon", "--out", str(tmp_path / "bad"), str(jfk), cache_dir=cache_dir
    )
    assert bad.returncode == 2 and "en (english)" in bad.stderr and not (tmp_path / "bad").exists()
    for value, recorded in (("auto", None), ("English", "en")):
        out = tmp_path / value
        result = podscribe("transcribe", *TINY, "--language", value, "--out", str(out), str(jfk), cache_dir=cache_dir)
        assert result.returncode == 0 and "done: 1" in result.stdout, result.stderr
        assert json.loads((out / "job.json").read_text())["config"]["decode"]["language"] == recorded


@pytest.mark.parametrize("flag", ["--beam_size", "--beam-size", "--best_of", "--temperature"])
def test_whisper_decoding_flags_get_a_clear_answer(flag, cache_dir, tmp_path):
    result = podscribe("transcribe", flag, "5", "--out", str(tmp_path / "j"), "x.mp3", cache_dir=cache_dir)
    assert result.returncode == 2 and "not supported" in result.stderr and "greedily" in result.stderr
    assert "Did you mean" not in result.stderr


def test_version(cache_dir, tmp_path):
    result = podscribe("--version", cache_dir=cache_dir)
    assert result.returncode == 0 and "podscribe" in result.stdout
    # the distribution's name as a module too, from any folder (the installed package, not the checkout's folder)
    module = subprocess.run(
        [sys.executable, "-m", "podscribe", "--version"], cwd=tmp_path, capture_output=True, text=True
    )
    assert module.returncode == 0 and module.stdout == result.stdout, module.stderr


# A process that ends through the CLI's quick exit: a thread still working, an idle executor's worker, a
# multiprocessing child, an atexit handler and stdout still in its buffer (a pipe is block-buffered).
ENDING = """
import atexit, sys
from pathlib import Path
out = Path(sys.argv[1])
atexit.register(lambda: (out / "atexit").write_text(f"child ended {child.exitcode}"))  # first: runs last
import multiprocessing, threading, time
from concurrent.futures import ThreadPoolExecutor
from pipeline.cli.console import leave
def late(): time.sleep(0.3); (out / "thread").write_text("done")
threading.Thread(target=late).start()
ThreadPoolExecutor(1).submit(int).result()  # its worker waits for more work, never shut down
child = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(0.3,))
child.start()
sys.stdout.write("all of it")
leave(eval(sys.argv[2]))
"""


def buffered() -> dict:
    """This environment with stdout block-buffered to a pipe or file, as a user's is (the tests may run unbuffered)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


@pytest.mark.parametrize("code, status", [("3", 3), ("None", 0), ("'stopped: a message'", 1)])
def test_the_quick_exit_ends_a_process_as_the_interpreter_would(code, status, tmp_path):
    run = subprocess.run(
        [sys.executable, "-c", ENDING, str(tmp_path), code],
        cwd=REPO,
        env=buffered(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == status, run.stderr
    assert run.stdout == "all of it"
    assert (tmp_path / "thread").read_text() == "done"  # joined before the end
    assert (tmp_path / "atexit").read_text() == "child ended 0"  # multiprocessing's own handler joined it first
    assert ("stopped: a message" in run.stderr) == (status == 1)


def test_the_quick_exit_says_when_the_end_of_the_output_was_not_written(tmp_path):
    """stdout to a file that may not grow past 1 KiB (a full disk, as the process sees it): the buffered rest fails
    at the end, and the process says so and exits 120, as the interpreter's own end does; not a quiet 0."""
    import resource

    code = "import sys; from pipeline.cli.console import leave; sys.stdout.write('x' * 5000); leave(0)"
    with open(tmp_path / "out", "w") as out:
        run = subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO,
            env=buffered(),
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024)),
        )
    assert run.returncode == 120, run.stderr
    assert "the end of its output was not written" in run.stderr
    assert (tmp_path / "out").stat().st_size == 1024


@pytest.fixture(scope="module")
def english_then_german(clips, tmp_path_factory) -> tuple[Path, float]:
    """English (23.7 s) then German (15.2 s) after a 3 s pause: two pieces, one language each."""
    by_name = {c.path.name: c.path for c in clips}
    pause = lambda s: np.zeros(int(s * media.SAMPLE_RATE), np.float32)  # noqa: E731
    parts = [
        media.decode(by_name["jfk.flac"]),
        pause(1.0),
        media.decode(by_name["2412-153948-0000.flac"]),
        pause(3.0),
        media.decode(by_name["gaenswein15.mp3"]),
    ]
    mixed = write_wav(tmp_path_factory.mktemp("mixed") / "en-de.wav", np.concatenate(parts))
    return mixed, (len(parts[0]) + len(parts[1]) + len(parts[2])) / media.SAMPLE_RATE


def _segment_languages(base_models, mixed: Path, out: Path, **decode) -> list[dict]:
    summary = run(
        [str(mixed)], JobOptions(out_dir=out, progress=False, decode=DecodeOptions(**decode)), models=base_models
    )
    assert summary.done == 1
    return ds.dataset(out / "segments").to_table().to_pylist() if (out / "segments").is_dir() else []


def test_each_segment_carries_its_pieces_language(english_then_german, base_models, tmp_path):
    mixed, english_end = english_then_german
    segments = _segment_languages(base_models, mixed, tmp_path / "job")
    for s in segments:
        assert s["language"] == ("en" if s["end_s"] <= english_end + 0.5 else "de"), s
    assert {s["language"] for s in segments} == {"en", "de"}
    (row,) = ds.dataset(tmp_path / "job" / "files").to_table().to_pylist()
    assert row["language"] == "en"


def test_prompt_and_hotwords_reach_the_job_and_are_part_of_its_configuration(jfk, cache_dir, tmp_path):
    out = tmp_path / "job"
    args = ["transcribe", *TINY, "--out", str(out), str(jfk)]
    first = podscribe(
        *args,
        "--initial-prompt",
        "The inaugural address.",
        "--hotwords",
        "Americans",
        "--vad-threshold",
        "0.5",
        cache_dir=cache_dir,
    )
    assert first.returncode == 0, first.stderr
    decode = json.loads((out / "job.json").read_text())["config"]["decode"]
    assert (decode["initial_prompt"], decode["hotwords"], decode["vad_threshold"]) == (
        "The inaugural address.",
        "Americans",
        0.5,
    )
    assert "country" in " ".join(ds.dataset(out / "segments").to_table().column("text").to_pylist()).lower()
    changed = podscribe(
        *args,
        "--initial-prompt",
        "The inaugural address.",
        "--hotwords",
        "Kennedy",
        "--vad-threshold",
        "0.5",
        cache_dir=cache_dir,
    )
    assert changed.returncode == 4 and "hotwords" in changed.stderr


def test_language_mode_file_locks_and_languages_restrict_detection(english_then_german, base_models, tmp_path):
    mixed, _ = english_then_german
    # German decoded as English fails Whisper's checks: its second chances (most of this test's time otherwise)
    # change no piece's language, which is all this test reads
    first_pass = {"fallback_beams": 0, "coverage": False}
    locked = _segment_languages(base_models, mixed, tmp_path / "file", language_mode="file", **first_pass)
    assert {s["language"] for s in locked} == {"en"}, "the file's first speech is English: all of it is"
    restricted = _segment_languages(base_models, mixed, tmp_path / "restricted", languages=("en", "nl"), **first_pass)
    assert {s["language"] for s in restricted} <= {"en", "nl"} and "en" in {s["language"] for s in restricted}


def test_no_vad_transcribes_a_voice_the_vad_does_not_hear(jfk, base_models, tmp_path):
    """JFK at twice the speed, an octave up (a voice outside Silero's range, like singing over a track):
    the VAD gate drops it; --no-vad lets Whisper transcribe it."""
    samples = media.decode(jfk)
    fast = np.interp(np.arange(0, len(samples), 2.0), np.arange(len(samples)), samples).astype(np.float32)
    clip = write_wav(tmp_path / "chipmunk.wav", fast)
    gated = _segment_languages(base_models, clip, tmp_path / "vad", language="en")
    assert gated == []
    ungated = _segment_languages(base_models, clip, tmp_path / "no-vad", language="en", vad=False)
    assert "your country" in " ".join(s["text"] for s in ungated).lower()


def test_whisper_underscore_flags_and_verbose_after_the_subcommand(jfk, cache_dir, tmp_path):
    result = podscribe(
        "transcribe", "--model", "tiny.en", "-q", "--output_format", "srt,txt", "--output_dir", "out",
        "--batch_size", "2", "--compute_type", "int8", "--max_line_width", "30", "--word_timestamps",
        "--model_dir", str(cache_dir), "-v", str(jfk), cache_dir=cache_dir, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "INFO done" in result.stderr  # -v after the subcommand
    cues = list(srt.parse((tmp_path / "out" / "jfk.srt").read_text()))
    assert cues and max(len(line) for c in cues for line in c.content.splitlines()) <= 30
    assert (tmp_path / "out" / "jfk.txt").read_text().strip()


def test_whisper_model_names_offline_and_urls_are_answered_before_anything_loads(jfk, cache_dir, tmp_path):
    offline = {"HF_HUB_OFFLINE": "1"}
    for name in ("small", "large-v3"):
        result = podscribe("transcribe", "--model", name, "-o", "out", str(jfk), cache_dir=cache_dir, cwd=tmp_path,
                           env=offline)  # fmt: skip
        assert result.returncode == 2 and f"openai/whisper-{name}" in result.stderr, result.stderr
        assert "Installed: tiny.en, base" in result.stderr and "Traceback" not in result.stderr
    url = podscribe("transcribe", "--model", "https://example.com/model.bin", "-o", "out", str(jfk),
                    cache_dir=cache_dir, cwd=tmp_path)  # fmt: skip
    assert url.returncode == 2 and "is a URL" in url.stderr
    url = podscribe("transcribe", "--model", "tiny.en", "-o", "out", "https://example.com/ep.mp3",
                    cache_dir=cache_dir, cwd=tmp_path)  # fmt: skip
    assert url.returncode == 2 and "is a URL" in url.stderr and "curl" in url.stderr
    assert not (tmp_path / "out").exists()


def test_hub_names_and_an_unreachable_hub_never_wait_for_dns(monkeypatch):
    import socket
    import threading

    from pipeline.models import registry

    assert registry.hub_id("large") == registry.hub_id("large-v3") == "openai/whisper-large-v3"
    assert registry.hub_id("small.en") == "openai/whisper-small.en" and registry.hub_id("base") == "base"
    assert registry.hub_id("turbo") == "openai/whisper-large-v3-turbo"
    never = threading.Event()
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)

    def hangs(*_args, **_kwargs):  # a resolver that waits (until the test ends)
        never.wait()
        raise OSError("gave up")

    monkeypatch.setattr(socket, "create_connection", hangs)
    monkeypatch.setattr(registry, "_cached", lambda repo: False)
    with pytest.raises(registry.ModelUnavailable, match="openai/whisper-medium.*cannot be reached"):
        registry.check_name("medium")
    never.set()


def test_whisper_verbose_true_and_false_are_the_flag_and_its_absence(jfk, tmp_path):
    """openai-whisper takes `--verbose True|False`: the value was read as an input (`False` as a missing file) or,
    before the subcommand, as a command name."""
    import logging

    from click.testing import CliRunner

    from pipeline.cli import main
    from pipeline.cli.group import whisper_booleans

    assert whisper_booleans(["-v", "a.mp3"]) == ["-v", "a.mp3"]
    assert whisper_booleans(["--verbose", "False", "a.mp3", "--", "--verbose", "True"]) == [
        "a.mp3",
        "--",
        "--verbose",
        "True",
    ]
    root = logging.getLogger()
    before = root.level
    try:
        for args, debug in (
            (["transcribe", "--verbose", "True"], True),
            (["--verbose", "False", "transcribe"], False),
            (["transcribe", "--verbose=False"], False),
        ):
            root.setLevel(logging.WARNING)
            dry = [*args, "--model", "tiny.en", "--dry-run", "-o", str(tmp_path), str(jfk)]
            result = CliRunner().invoke(main, dry, catch_exceptions=False)
            assert result.exit_code == 0, (args, result.output)
            assert "1 inputs" in result.output and "cannot be read" not in result.output, (args, result.output)
            assert (root.level == logging.DEBUG) == debug, args
    finally:
        root.setLevel(before)
