"""Shared fixtures: the real speech clips, offline Whisper weights, tiny random Whisper models.

Converted models are cached in ``.cache/test-models`` under the repo (created here),
so only the first run pays for the conversion.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from helpers import with_assistant
from pipeline.models.load import Models, load_models, quantized_self_draft
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
    return pick_runtime("cpu")


@pytest.fixture(scope="session")
def base_models(cache_dir, runtime) -> Models:
    return load_models("base", "none", runtime, cache_dir)


@pytest.fixture(scope="session")
def tiny_en_models(cache_dir, runtime) -> Models:
    return load_models("tiny.en", "none", runtime, cache_dir)


@pytest.fixture(scope="session")
def base_self_int8(base_models) -> Models:
    return with_assistant(base_models, quantized_self_draft(base_models.main), "self-int8")


