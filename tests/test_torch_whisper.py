"""podscribe's own Whisper forward (models/torch_whisper.py) against transformers' on the same checkpoint: the same
bits out of the encoder and the teacher-forced pass, the same tokens and scores out of a whole decode, a
transformers twin that shares every module, and a CLI run that never imports transformers' modeling stack."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import REPO, tiny_random_models, write_wav
from pipeline.backend.hf_internals.twin import as_transformers
from pipeline.backend.quantize import quantize
from pipeline.decode import Transcriber
from pipeline.decode.forced import forced_hidden
from pipeline.decode.generate import encode
from pipeline.decode.hf_generate import hf_generate
from pipeline.decode.kv_cache import CrossKV
from pipeline.decode.options import DecodeOptions
from pipeline.facts.runtime import pick_runtime
from pipeline.models import load, registry, torch_whisper
from pipeline.models.registry import ResolvedModel

COMPUTE_TYPES = ("float32", "bfloat16", "int8")


@pytest.fixture(scope="module")
def speech_pieces(clips) -> list:
    from pipeline.audio import media

    by_name = {c.path.name: c for c in clips}
    return [media.decode(by_name[n].path) for n in ("jfk.flac", "LJ001-0001.wav", "1089-134686-0000.flac")]


@pytest.fixture(scope="module")
def checkpoint(base_vocabulary, tmp_path_factory):
    """A random Whisper saved as transformers saves one (safetensors, config, generation config, processor)."""
    folder = tmp_path_factory.mktemp("tiny-checkpoint")
    tiny_random_models(base_vocabulary, seed=7).main.save_pretrained(folder)
    base_vocabulary.processor.save_pretrained(folder)
    return folder


def _both(folder, compute_type: str):
    """(transformers' model, podscribe's) from ``folder``, as load_models makes them for ``compute_type``."""
    from transformers import WhisperForConditionalGeneration

    runtime = pick_runtime("cpu", compute_type)
    ref = ResolvedModel(str(folder), str(folder), "test")
    theirs = load._from_pretrained(WhisperForConditionalGeneration, ref, runtime)
    ours = torch_whisper.load(folder, runtime.dtype)
    if runtime.int8:
        quantize(theirs, "int8")
        quantize(ours, "int8")
    return theirs, ours


def test_the_checkpoint_loads_with_transformers_names_values_and_tied_projection(checkpoint):
    theirs, ours = _both(checkpoint, "float32")
    expected, got = theirs.state_dict(), ours.state_dict()
    assert sorted(got) == sorted(expected)
    for name, tensor in expected.items():
        assert got[name].dtype == tensor.dtype and torch.equal(got[name], tensor), name
    assert ours.proj_out.weight is ours.model.decoder.embed_tokens.weight
    for name in READ_CONFIG:
        assert getattr(ours.config, name, None) == getattr(theirs.config, name, None), name
    for name in READ_GENERATION:
        assert getattr(ours.generation_config, name, None) == getattr(theirs.generation_config, name, None), name


# what podscribe reads of a model's config and generation config (grep `config.` and `generation_config`)
READ_CONFIG = (
    *torch_whisper.CONFIG_DEFAULTS,
    "architectures",
)
READ_GENERATION = (
    *torch_whisper.GENERATION_DEFAULTS,
    "no_timestamps_token_id",
    "prev_sot_token_id",
    "is_multilingual",
    "lang_to_id",
    "task_to_id",
    "max_initial_timestamp_index",
    "alignment_heads",
    "return_timestamps",
)


def test_the_settings_defaults_are_transformers_own():
    from transformers import GenerationConfig, WhisperConfig

    config, generation = WhisperConfig(), GenerationConfig()
    for name, value in torch_whisper.CONFIG_DEFAULTS.items():
        assert getattr(config, name) == value, name
    for name, value in torch_whisper.GENERATION_DEFAULTS.items():
        assert getattr(generation, name) == value, name


@pytest.mark.identity
@pytest.mark.parametrize("compute_type", COMPUTE_TYPES)
def test_encoder_and_teacher_forced_pass_give_transformers_bits(checkpoint, compute_type):
    """The encoder (a row at a time and a batch) and the decoder pass over padded rows of uneven length — a
    one-token row too, where transformers' attention is not causal — with cross-attention keys/values projected
    by the pass itself and read from a ``CrossKV``."""
    theirs, ours = _both(checkpoint, compute_type)
    torch.manual_seed(1)
    features = torch.randn(3, 80, 3000).to(ours.dtype)
    with torch.inference_mode():
        encoded = encode(theirs, features)
        assert torch.equal(encode(ours, features), encoded)
        assert torch.equal(
            ours.get_encoder()(features).last_hidden_state, theirs.get_encoder()(features).last_hidden_state
        )
        for width in (1, 2, 19):
            ids = torch.randint(0, 51865, (3, width))
            ids[0, width // 2 :] = 50257  # a row padded with end-of-text
            cross = CrossKV.project(theirs, encoded)
            assert torch.equal(forced_hidden(ours, encoded, ids), forced_hidden(theirs, encoded, ids)), width
            assert torch.equal(forced_hidden(ours, encoded, ids, cross), forced_hidden(theirs, encoded, ids, cross))


def _models(main, vocabulary, compute_type: str) -> load.Models:
    ref = ResolvedModel("tiny", "tiny", "tiny")
    runtime = pick_runtime("cpu", compute_type)
    return load.Models(
        main=main, processor=vocabulary.processor, assistant=None, main_ref=ref, assistant_name=None, runtime=runtime
    )


@pytest.mark.identity
def test_a_random_whisper_decodes_to_transformers_tokens_scores_and_word_times(
    checkpoint, base_vocabulary, speech_pieces
):
    """The Transcriber's first pass end to end (no-speech probe, loop, scoring pass, word timings) in float32 and
    int8, every result the same: token ids and float bits. (Random weights fail Whisper's checks; their second
    chances would take minutes: real weights run them below.)"""
    options = DecodeOptions(language="en", word_timestamps=True, vad=False, coverage=False, fallback_beams=0)
    for compute_type in ("float32", "int8"):
        theirs, ours = _both(checkpoint, compute_type)
        expected = Transcriber(_models(theirs, base_vocabulary, compute_type), options).transcribe(speech_pieces)
        got = Transcriber(_models(ours, base_vocabulary, compute_type), options).transcribe(speech_pieces)
        assert got == expected, compute_type
        assert sum(len(r.tokens) for r in got) > 0


@pytest.mark.identity
def test_base_decodes_real_speech_to_transformers_tokens_scores_and_word_times(base_models, speech_pieces):
    """base through load_models (podscribe's forward) and through transformers' ``from_pretrained``, float32 and
    int8, the Transcriber's defaults with word timings: the same results bit for bit."""
    from transformers import WhisperForConditionalGeneration

    assert isinstance(base_models.main, torch_whisper.TorchWhisper)
    theirs = load._from_pretrained(WhisperForConditionalGeneration, base_models.main_ref, base_models.runtime)
    options = DecodeOptions(language="en", word_timestamps=True)
    for compute_type in ("float32", "int8"):
        pair = [base_models.main, theirs]
        if compute_type == "int8":
            pair = [quantize(copy.deepcopy(model), "int8") for model in pair]
        runtime = pick_runtime("cpu", compute_type)
        ours, transformers_ = (dataclasses.replace(base_models, main=m, runtime=runtime) for m in pair)
        expected = Transcriber(transformers_, options).transcribe(speech_pieces)
        got = Transcriber(ours, options).transcribe(speech_pieces)
        assert got == expected, compute_type
        assert all(r.tokens and r.segments[0].words for r in got)


def test_the_transformers_twin_shares_every_module_and_follows_quantization(checkpoint, base_vocabulary):
    _, ours = _both(checkpoint, "float32")
    twin = as_transformers(ours)
    assert as_transformers(ours) is twin and as_transformers(twin) is twin
    ours_params = {p.data_ptr() for p in ours.parameters()}
    assert {p.data_ptr() for p in twin.parameters()} == ours_params
    assert twin.proj_out is ours.proj_out and twin.model.encoder.layers[0].fc1 is ours.model.encoder.layers[0].fc1
    assert len(list(ours.modules())) == len(list(copy.deepcopy(ours).modules()))  # the twin is not a submodule

    quantize(ours, "int8")
    requantized = as_transformers(ours)
    assert requantized is not twin and requantized.proj_out is ours.proj_out
    assert type(requantized.model.decoder.layers[1].self_attn.q_proj).__name__ == "Int8Linear"


@pytest.mark.identity
def test_beam_search_through_the_twin_gives_transformers_tokens(checkpoint, base_vocabulary):
    theirs, ours = _both(checkpoint, "float32")
    torch.manual_seed(3)
    features = torch.randn(2, 80, 3000)
    with torch.inference_mode():
        expected = hf_generate(theirs, features, ["en", "en"], True, num_beams=3, max_new_tokens=12)
        got = hf_generate(ours, features, ["en", "en"], True, num_beams=3, max_new_tokens=12)
    assert [tokens for tokens, _, _ in got] == [tokens for tokens, _, _ in expected]


@pytest.mark.parametrize(
    "change",
    [{"activation_function": "relu"}, {"scale_embedding": True}, {"tie_word_embeddings": False}, {"model_type": "x"}],
)
def test_only_a_plain_whisper_checkpoint_is_computed_here(tmp_path, change):
    config = {
        "model_type": "whisper",
        "architectures": ["WhisperForConditionalGeneration"],
        "activation_function": "gelu",
    }
    assert not torch_whisper.loadable(tmp_path, config)  # no weights file
    (tmp_path / "model.safetensors").touch()
    assert not torch_whisper.loadable(tmp_path, config)  # no generation config
    (tmp_path / "generation_config.json").write_text("{}")
    assert torch_whisper.loadable(tmp_path, config)
    assert not torch_whisper.loadable(tmp_path, {**config, **change})
    assert not torch_whisper.loadable(tmp_path, {**config, "architectures": ["WhisperForCausalLM"]})


def test_weights_of_another_layout_load_through_transformers(checkpoint, tmp_path):
    """A checkpoint that looks plain but whose weights this module does not expect (an extra tensor) is still
    loaded, by transformers' loader, not refused."""
    import shutil

    from safetensors.torch import load_file, save_file

    folder = tmp_path / "extra"
    shutil.copytree(checkpoint, folder)
    weights = load_file(folder / "model.safetensors")
    save_file({**weights, "model.encoder.extra_scale": torch.ones(1)}, folder / "model.safetensors")
    with pytest.raises(ValueError, match="extra_scale"):
        torch_whisper.load(folder, torch.float32)
    models = load.load_models(str(folder), "none", pick_runtime("cpu", "float32"))
    assert not isinstance(models.main, torch_whisper.TorchWhisper)


def test_load_models_computes_a_local_checkpoint_here_and_a_draft_through_the_twin(checkpoint):
    runtime = pick_runtime("cpu", "float32")
    models = load.load_models(str(checkpoint), "none", runtime)
    assert isinstance(models.main, torch_whisper.TorchWhisper)
    drafted = load.load_models(str(checkpoint), "self-int8", runtime)
    assert isinstance(drafted.main, torch_whisper.TorchWhisper)
    draft_layer = drafted.assistant.model.decoder.layers[0].fc1
    assert type(draft_layer) is not torch.nn.Linear  # the self-int8 draft: torch's dynamic int8 of a copy
    assert drafted.main.model.decoder.layers[0].fc1 is not draft_layer


def hub_cache(root, source, repo: str = "openai/whisper-base", skip: tuple[str, ...] = ()):
    """A Hugging Face hub cache holding ``repo`` as the hub library lays it out (``refs/main`` naming a snapshot
    folder of links), its files those of the local checkpoint ``source`` but ``skip``; the snapshot folder."""
    folder = root / f"models--{repo.replace('/', '--')}"
    revision = "0123456789abcdef0123456789abcdef01234567"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(revision)
    snapshot = folder / "snapshots" / revision
    snapshot.mkdir(parents=True)
    for path in Path(source).iterdir():
        if path.is_file() and path.name not in skip:
            (snapshot / path.name).symlink_to(path)
    return snapshot


@pytest.mark.model
@pytest.mark.parametrize("model", ["base", "openai/whisper-base"])
def test_a_cli_run_never_imports_transformers(cache_dir, tmp_path, speech_pieces, model):
    """The start-up this module exists for, in a real process: `python -X importtime` lists every module imported;
    no module of transformers is among them (models/processor.py reads the tokenizer and features), nor torch's
    compiler or its distributed tensors (which transformers' modeling stack imported), nor faster-whisper's package
    (the VAD's model is run by audio/silero.py). A hub id whose model is in the hub's cache loads the same way, from
    its snapshot folder, offline."""
    wav = tmp_path / "speech.wav"
    write_wav(wav, speech_pieces[0][: 3 * 16000])
    env = {"PODSCRIBE_CACHE": str(cache_dir), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    if "/" in model:
        hub_cache(tmp_path / "hub", registry.resolve("base", cache_dir).location)
        env |= {"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "podscribe", "transcribe", str(wav), "--out", str(tmp_path / "j")]
        + ["--model", model],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    imported = set(re.findall(r"^import time:.*\|\s*([\w.]+)$", run.stderr, re.M))
    assert {"pipeline.models.torch_whisper", "torch", "tokenizers"} <= imported  # the log is complete
    assert not {m for m in imported if m.split(".")[0] == "transformers"}
    assert not {"torch._dynamo", "torch.distributed.tensor"} & imported
    # the VAD ran (onnxruntime) without faster-whisper's package and the PyAV and CTranslate2 it imports
    assert "onnxruntime" in imported
    assert not {m for m in imported if m.split(".")[0] in ("faster_whisper", "av", "ctranslate2")}


def test_a_hub_id_in_the_hub_cache_resolves_to_its_snapshot_where_it_is_whole(cache_dir, tmp_path, monkeypatch):
    """A hub id whose checkpoint the hub's cache holds whole (its JSON files, tokenizer and safetensors weights: one
    file, or an index and every shard) resolves to the snapshot folder, keeping the id as its fingerprint (a job's
    identity does not change); a partial snapshot or an index naming a missing shard leaves the id to
    ``from_pretrained``, which fetches what is missing."""
    import huggingface_hub.constants

    base = registry.resolve("base", cache_dir).location
    whole = hub_cache(tmp_path / "a", base)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "a"))
    ref = registry.resolve("openai/whisper-base", cache_dir)
    assert (Path(ref.location), ref.fingerprint, ref.name) == (whole, "openai/whisper-base", "openai/whisper-base")
    assert torch_whisper.loadable(ref.location, load._config(ref))

    for i, missing in enumerate(("generation_config.json", "tokenizer_config.json")):
        hub_cache(tmp_path / f"b{i}", base, skip=(missing,))
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / f"b{i}"))
        assert registry.resolve("openai/whisper-base", cache_dir).location == "openai/whisper-base"

    sharded = hub_cache(tmp_path / "c", base, skip=("model.safetensors",))
    (sharded / "model-00001-of-00001.safetensors").symlink_to(Path(base) / "model.safetensors")
    index = {"weight_map": {"model.encoder.conv1.weight": "model-00001-of-00001.safetensors"}}
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "c"))
    assert registry.resolve("openai/whisper-base", cache_dir).location == str(sharded)
    index["weight_map"]["proj_out.weight"] = "model-00002-of-00002.safetensors"  # not downloaded
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    assert registry.resolve("openai/whisper-base", cache_dir).location == "openai/whisper-base"
