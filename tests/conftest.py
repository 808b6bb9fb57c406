"""Shared fixtures: the real speech clips, offline Whisper weights, tiny random Whisper models.

Converted models are cached in ``.cache/test-models`` under the repo (created here),
so only the first run pays for the conversion.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds
import pytest
import torch

from helpers import ffmpeg, finish, start, tables, with_assistant, write_wav
from pipeline import audio
from pipeline.decode import DecodeOptions
from pipeline.models.load import Models, load_models, quantized_self_draft
from pipeline.runner import JobOptions, run
from pipeline.runtime import pick_runtime

REPO = Path(__file__).resolve().parents[1]
SPEECH = Path(os.environ.get("PODSCRIBE_SPEECH_DIR", REPO.parent / "shared" / "speech"))
CACHE = REPO / ".cache" / "test-models"


@dataclass
class Clip:
    path: Path
    text: str
    duration_s: float
    ref_type: str
    language: str
    raw: dict


def _clips() -> list[Clip]:
    index = SPEECH / "references.jsonl"
    if not index.is_file():
        return []
    out = []
    for line in index.read_text().splitlines():
        r = json.loads(line)
        out.append(Clip(SPEECH / r["audio"], r["text"], r["duration_s"], r["ref_type"], r["language"], r))
    return out


@pytest.fixture(scope="session")
def clips() -> list[Clip]:
    found = _clips()
    if not found:
        if os.environ.get("CI"):
            pytest.fail(f"speech clips not found at {SPEECH} (set PODSCRIBE_SPEECH_DIR)")
        pytest.skip(f"speech clips not found at {SPEECH} (set PODSCRIBE_SPEECH_DIR)")
    return found


@pytest.fixture(scope="session")
def english_human(clips) -> list[Clip]:
    return [c for c in clips if c.language == "en" and c.ref_type == "human"]


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    return CACHE


@pytest.fixture(scope="session")
def runtime():
    torch.manual_seed(0)
    return pick_runtime("cpu", "float32")  # the equivalence tests compare float32 arithmetic


@pytest.fixture(scope="session")
def base_models(cache_dir, runtime) -> Models:
    return load_models("base", "none", runtime, cache_dir)


@pytest.fixture(scope="session")
def tiny_en_models(cache_dir, runtime) -> Models:
    return load_models("tiny.en", "none", runtime, cache_dir)


@pytest.fixture(scope="session")
def base_self_int8(base_models) -> Models:
    return with_assistant(base_models, quantized_self_draft(base_models.main), "self-int8")


@pytest.fixture(scope="session")
def long_form(english_human, tmp_path_factory):
    """~3 minutes of the English clips joined with pauses of 0.4-2.0 s into one mp3."""
    folder = tmp_path_factory.mktemp("long")
    rng = np.random.default_rng(7)
    parts, spans, texts, pos = [], [], [], 0
    for clip in sorted(english_human, key=lambda c: c.path.name):
        samples = audio.decode(clip.path)
        gap = np.zeros(int(rng.uniform(0.4, 2.0) * audio.SAMPLE_RATE), np.float32)
        parts += [samples, gap]
        spans.append((pos / audio.SAMPLE_RATE, (pos + len(samples)) / audio.SAMPLE_RATE))
        texts.append(clip.text)
        pos += len(samples) + len(gap)
        if pos > 180 * audio.SAMPLE_RATE:
            break
    wav = write_wav(folder / "long.wav", np.concatenate(parts))
    mp3 = folder / "long.mp3"
    ffmpeg("-i", str(wav), "-b:a", "96k", str(mp3))
    return mp3, spans, " ".join(texts)


@pytest.fixture(scope="session")
def long_form_job(base_models, long_form, tmp_path_factory):
    mp3, _, _ = long_form
    out = tmp_path_factory.mktemp("job")
    options = JobOptions(
        out_dir=out,
        decode=DecodeOptions(language="en", word_timestamps=True),
        progress=False,
        subtitles=["srt", "vtt", "txt", "json"],
    )
    summary = run([str(mp3)], options, models=base_models)
    assert summary.done == 1
    files = ds.dataset(out / "files").to_table().to_pylist()
    segments = sorted(ds.dataset(out / "segments").to_table().to_pylist(), key=lambda r: r["segment"])
    return files[0], segments, out


def _archive(clips, folder: Path, one_s: float, two_s: float) -> list[Path]:
    """Three inputs in three containers: gb0 cut to ``one_s`` (mp3), apollo11 cut to ``two_s`` (m4a), jfk (flac)."""
    by_name = {c.path.name: c.path for c in clips}
    one = folder / "episode one.mp3"
    ffmpeg("-i", str(by_name["gb0.wav"]), "-t", str(one_s), str(one))
    two = folder / "apollo 11.m4a"
    ffmpeg("-i", str(by_name["apollo11.mp3"]), "-t", str(two_s), "-c:a", "aac", str(two))
    three = folder / "jfk.flac"
    three.write_bytes(by_name["jfk.flac"].read_bytes())
    return [one, two, three]


@pytest.fixture(scope="session")
def archive(clips, tmp_path_factory) -> list[Path]:
    return _archive(clips, tmp_path_factory.mktemp("archive"), 70, 60)


def _reference(inputs: list[Path], cache_dir: Path, folder: Path) -> dict:
    """The tables of an uninterrupted single-process run (tests/helpers.JOB_ARGS)."""
    code, stdout, stderr = finish(start(folder / "job", inputs, cache_dir))
    assert code == 0, stderr
    return tables(folder / "job")


@pytest.fixture(scope="session")
def reference(archive, cache_dir, tmp_path_factory) -> dict:
    return _reference(archive, cache_dir, tmp_path_factory.mktemp("reference"))


@pytest.fixture(scope="session")
def small_archive(clips, tmp_path_factory) -> list[Path]:
    """The archive at about a third of its length: for the several-worker tests, which run it many times."""
    return _archive(clips, tmp_path_factory.mktemp("small-archive"), 26, 21)


@pytest.fixture(scope="session")
def small_reference(small_archive, cache_dir, tmp_path_factory) -> dict:
    return _reference(small_archive, cache_dir, tmp_path_factory.mktemp("small-reference"))


# The fast tier: `pytest -m "not model"` runs the pure functions (seconds). A test is in the slow tier when it
# loads Whisper weights (real or tiny random) or runs the CLI, which it can only do through these fixtures.
MODEL_FIXTURES = {
    "base_models",
    "tiny_en_models",
    "base_self_int8",
    "long_form",
    "long_form_job",
    "cache_dir",
    "runtime",
    "archive",
    "reference",
    "small_archive",
    "small_reference",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.model)
