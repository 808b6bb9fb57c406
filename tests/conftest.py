"""Shared fixtures: the real speech clips, offline Whisper weights, tiny random Whisper models.

Converted models are cached in ``.cache/test-models`` under the repo (created here),
so only the first run pays for the conversion.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from pipeline import audio
from pipeline.models.load import Models, decoder_only_assistant, load_models, quantized_self_draft
from pipeline.models.registry import ResolvedModel
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


def with_assistant(models: Models, assistant, name: str) -> Models:
    return Models(models.main, models.processor, assistant, models.main_ref, name, models.runtime)


@pytest.fixture(scope="session")
def base_self_int8(base_models) -> Models:
    return with_assistant(base_models, quantized_self_draft(base_models.main), "self-int8")


def tiny_random_models(base: Models, seed: int, layers: int = 2, d_model: int = 64) -> Models:
    """A random Whisper with base's tokenizer and generation config: real mechanics, no real weights."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    torch.manual_seed(seed)
    config = WhisperConfig(
        vocab_size=base.main.config.vocab_size, d_model=d_model, encoder_layers=layers, decoder_layers=layers,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=2 * d_model,
        decoder_ffn_dim=2 * d_model, num_mel_bins=80, max_source_positions=1500, max_target_positions=448,
        decoder_start_token_id=base.main.config.decoder_start_token_id, pad_token_id=base.main.config.pad_token_id,
        eos_token_id=base.main.config.eos_token_id, bos_token_id=base.main.config.bos_token_id,
    )
    model = WhisperForConditionalGeneration(config).eval()
    model.generation_config = copy.deepcopy(base.main.generation_config)
    model.generation_config.alignment_heads = [[layers - 1, 0]]
    ref = ResolvedModel(f"random-{seed}", f"random-{seed}", f"random-{seed}")
    return Models(model, base.processor, None, ref, None, base.runtime)


def ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", *args], check=True)


def write_wav(path: Path, samples: np.ndarray) -> Path:
    """Write float32 16 kHz mono samples as a wav through ffmpeg."""
    proc = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "f32le", "-ar", str(audio.SAMPLE_RATE),
                           "-ac", "1", "-i", "pipe:", str(path)], input=samples.astype(np.float32).tobytes(),
                          check=True)
    assert proc.returncode == 0
    return path
