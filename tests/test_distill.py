"""``podscribe distill``: a trained draft drafts for its main model and never changes its tokens; training
resumes after a kill to the very weights of an uninterrupted run; bad SOURCEs are refused with nothing written.

Mechanics only: the main model is a tiny random Whisper (4 decoder layers, base's tokenizer: no base weights) saved as a
Transformers dir, the audio real clips. Every training run is a real process (the CLI)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from helpers import REPO, TRACED, podscribe, tiny_random_models, write_wav
from pipeline.audio import media
from pipeline.decode.generate import Generator, log_mel
from pipeline.facts.runtime import pick_runtime
from pipeline.models.draft import DRAFT_KEY, apply_draft_vocab, layer_choice, reduced_vocab
from pipeline.models.load import load_models

FAST = ["--steps", "4", "--batch-size", "2", "--eval-every", "4", "--holdout", "0.25", "--compute-type", "float32"]


def _saved_main(base_vocabulary, folder: Path, seed: int) -> Path:
    models = tiny_random_models(base_vocabulary, seed, layers=4)
    models.main.generation_config.max_length = 24  # short rows: a random model talks until the limit
    models.main.save_pretrained(folder)
    models.processor.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_main(base_vocabulary, tmp_path_factory) -> Path:
    return _saved_main(base_vocabulary, tmp_path_factory.mktemp("tiny-main"), 11)


@pytest.fixture(scope="module")
def clip_dir(english_human, tmp_path_factory) -> Path:
    """Four short real clips (four files: one held out)."""
    folder = tmp_path_factory.mktemp("clips")
    for clip in sorted(english_human, key=lambda c: (c.duration_s, c.path.name))[:4]:
        (folder / clip.path.name).symlink_to(clip.path)
    return folder


def _distill(sources, out: Path, main: Path, cache: Path, *extra: str) -> subprocess.CompletedProcess:
    return podscribe(
        "distill", *map(str, sources), "--out", str(out), "--main", str(main), *FAST, *extra, cache_dir=cache
    )


@pytest.fixture(scope="module")
def dataset_dir(clip_dir, tmp_path_factory) -> Path:
    """The same clips as an audiofolder dataset (``datasets.load_dataset("audiofolder")``)."""
    folder = tmp_path_factory.mktemp("audiofolder")
    names = []
    for clip in sorted(clip_dir.iterdir()):
        (folder / clip.name).symlink_to(clip.resolve())
        names.append(clip.name)
    (folder / "metadata.csv").write_text("file_name,note\n" + "".join(f"{n},x\n" for n in names))
    return folder


@pytest.fixture(scope="module")
def drafts(tiny_main, clip_dir, dataset_dir, tmp_path_factory) -> dict[str, Path]:
    """A plain draft trained on audio files (and a file ffmpeg cannot read: skipped, named, the run goes on), a
    trimmed one on the same clips as a dataset, a few steps each."""
    root = tmp_path_factory.mktemp("drafts")
    junk = root / "notes.mp3"
    junk.write_text("not audio")
    out = {}
    for name, sources, extra in (("plain", [clip_dir, junk], []), ("trimmed", [dataset_dir], ["--vocab", "40"])):
        proc = _distill(sources, root / name, tiny_main, root / "cache", *extra)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "tokens per main call" in proc.stdout and '"train_pieces": 3' in proc.stdout
        assert (f"skipped {junk}: ffmpeg could not decode" in proc.stderr) == (name == "plain")
        assert "Loading weights" not in proc.stderr, "transformers' weight-loading bar on the terminal"
        out[name] = root / name
    out["cache"] = root / "cache"
    return out


@pytest.fixture(scope="module")
def pieces(english_human) -> list[np.ndarray]:
    clips = sorted(english_human, key=lambda c: c.path.name)[:8]
    return [media.decode(c.path)[: 30 * media.SAMPLE_RATE] for c in clips]


def _tokens(models, pieces, batch: int, use_assistant: bool):
    g = Generator(models, use_assistant=use_assistant)
    feats = log_mel(models.processor.feature_extractor, pieces, "cpu", torch.float32)
    out = []
    for i in range(0, len(pieces), batch):
        out += g.generate(feats[i : i + batch], [g.prompt("en")] * len(pieces[i : i + batch]))
    return out


def test_reduced_vocab_is_the_most_used_text_tokens_then_the_lowest_ids_then_every_special():
    counts = {12: 5, 3: 3, 15: 3, 9: 1, 22: 4}  # 22 is a special token (eot = 20): never counted as text
    specials = list(range(20, 25))
    assert reduced_vocab(counts, 3, 25, eot=20) == [3, 12, 15] + specials  # ties by id
    assert reduced_vocab(counts, 6, 25, eot=20) == [0, 1, 3, 9, 12, 15] + specials  # topped up from id 0
    assert reduced_vocab(counts, 100, 25, eot=20) == list(range(25))  # room for every text token
    assert reduced_vocab(counts, None, 25, eot=20) is None


@pytest.mark.parametrize("kind", ["plain", "trimmed"])
def test_distilled_draft_loads_as_assistant_and_keeps_main_tokens(drafts, tiny_main, pieces, kind):
    models = load_models(str(tiny_main), str(drafts[kind]), pick_runtime("cpu", "float32"), drafts["cache"])
    draft = models.assistant
    assert type(draft).__name__ == "WhisperForCausalLM" and draft.config.decoder_layers == 2
    info = getattr(draft.config, DRAFT_KEY)
    assert info["layers"] == layer_choice(4, 2) == [0, 3]
    if kind == "trimmed":
        assert draft.proj_out.weight.shape[0] == len(info["vocab"]) < 2000 < draft.config.vocab_size
    else:
        assert getattr(draft, "draft_vocab_ids", None) is None and info["vocab"] is None
    plain = _tokens(models, pieces, 8, use_assistant=False)
    for batch in (1, 3, 8):
        ours = _tokens(models, pieces, batch, use_assistant=True)
        assert [g.tokens for g in ours] == [g.tokens for g in plain], f"{kind}, batch {batch}: token ids differ"
        assert sum(g.stats.drafted for g in ours) > 0 and sum(g.stats.accepted for g in ours) > 0
    listed = podscribe("models", "list", cache_dir=drafts["cache"]).stdout
    assert str(drafts[kind]) in listed


def test_trimmed_draft_that_cannot_say_the_main_tokens_still_gives_them(drafts, tiny_main, pieces):
    """Planted: a draft whose vocabulary is the special and timestamp tokens plus 3 text tokens the main model
    does not use, so every text token it proposes is wrong and the main model's are outside its vocabulary."""
    models = load_models(str(tiny_main), "none", pick_runtime("cpu", "float32"), drafts["cache"])
    plain = _tokens(models, pieces, 4, use_assistant=False)
    used = {t for g in plain for t in g.tokens}
    eot = models.tokens.eot
    spare = [t for t in range(100, 1000) if t not in used][:3]
    from transformers import WhisperForCausalLM

    draft = WhisperForCausalLM.from_pretrained(drafts["plain"]).eval()
    setattr(draft.config, DRAFT_KEY, {"vocab": sorted(spare + list(range(eot, draft.config.vocab_size)))})
    draft = apply_draft_vocab(draft)
    models.assistant, models.assistant_name = draft, "planted"
    outside = {t for t in used if t < eot}
    assert outside and not outside & set(draft.draft_vocab_ids.tolist())
    for batch in (1, 3, 8):
        ours = _tokens(models, pieces, batch, use_assistant=True)
        assert [g.tokens for g in ours] == [g.tokens for g in plain], f"batch {batch}: token ids differ"
        drafted, accepted = sum(g.stats.drafted for g in ours), sum(g.stats.accepted for g in ours)
        assert drafted > accepted


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(folder / "model.safetensors")


def test_killed_training_resumes_to_the_same_weights(tiny_main, clip_dir, tmp_path):
    extra = ["--steps", "6", "--checkpoint-every", "2", "--eval-every", "100"]
    whole = _distill([clip_dir], tmp_path / "whole", tiny_main, tmp_path / "cache", *extra)
    assert whole.returncode == 0, whole.stderr[-3000:]
    trace = tmp_path / "trace"
    env = {
        **os.environ,
        "PODSCRIBE_CACHE": str(tmp_path / "cache"),
        "PYTHONPATH": os.environ["PYTHONPATH"],
        "PODSCRIBE_TRACE": str(trace),
    }
    cmd = [
        sys.executable,
        str(TRACED),
        "distill",
        str(clip_dir),
        "--out",
        str(tmp_path / "killed"),
        "--main",
        str(tiny_main),
        *FAST,
        *extra,
    ]
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while not (trace.exists() and "checkpoint - 4 " in trace.read_text()):  # killed on its own checkpoint event
        assert proc.poll() is None, "training ended before its second checkpoint"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "killed" / "model.safetensors").exists()
    resumed = _distill([clip_dir], tmp_path / "killed", tiny_main, tmp_path / "cache", *extra)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from step 4" in resumed.stderr
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "killed")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # and it did train: the weights moved from the main model's layers they were made of
    main = load_file(tiny_main / "model.safetensors")
    assert not torch.equal(a["model.decoder.layers.1.fc1.weight"], main["model.decoder.layers.3.fc1.weight"])


def _job(main: Path, clip: Path, out: Path, cache: Path) -> Path:
    proc = podscribe(
        "transcribe",
        str(clip),
        "--out",
        str(out),
        "--model",
        str(main),
        "--assistant",
        "none",
        "--compute-type",
        "float32",
        "--fallback-beams",
        "0",
        "-q",
        cache_dir=cache,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_bad_sources_exit_2_and_write_nothing(base_vocabulary, tiny_main, clip_dir, tmp_path):
    cache = tmp_path / "cache"
    clip = sorted(clip_dir.iterdir())[0]
    empty = tmp_path / "empty"
    empty.mkdir()
    job = _job(tiny_main, clip, tmp_path / "job", cache)
    unfinished = tmp_path / "unfinished"  # a job killed before its file finished: job.json, no files row
    unfinished.mkdir()
    (unfinished / "job.json").write_text((job / "job.json").read_text())
    other_main = _saved_main(base_vocabulary, tmp_path / "other-main", 12)
    silent = write_wav(tmp_path / "hum.wav", 0.05 * np.sin(np.arange(16000 * 8) * 2 * np.pi * 120 / 16000))
    cases = {
        "empty": ([empty], tiny_main, "empty folder"),
        "unfinished": ([unfinished], tiny_main, "no finished files"),
        "other main": ([job], other_main, "another main model"),
        "no speech": ([silent], tiny_main, "no speech"),
    }
    for name, (sources, main, message) in cases.items():
        out = tmp_path / f"out-{name.replace(' ', '-')}"
        proc = _distill(sources, out, main, cache)
        assert proc.returncode == 2, f"{name}: {proc.returncode} {proc.stderr[-2000:]}"
        assert message in proc.stderr, f"{name}: {proc.stderr[-2000:]}"
        assert not out.exists(), f"{name}: something was written"
    # the finished job of the right main model is a good SOURCE (its pieces, decoded once more)
    ok = _distill([job], tmp_path / "from-job", tiny_main, cache, "--holdout", "0")
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert (tmp_path / "from-job" / "model.safetensors").is_file()


def test_auto_weighs_the_newest_draft_made_for_these_weights(drafts, tiny_main, base_vocabulary, tmp_path):
    runtime = pick_runtime("cpu", "float32")
    models = load_models(str(tiny_main), "auto", runtime, drafts["cache"])
    assert models.auto and models.assistant_name == str(drafts["trimmed"])
    assert models.assistant.draft_vocab_ids is not None
    other = _saved_main(base_vocabulary, tmp_path / "other-main", 12)  # other weights: no draft of its own
    assert load_models(str(other), "auto", runtime, drafts["cache"]).assistant_name == "self-int8"
