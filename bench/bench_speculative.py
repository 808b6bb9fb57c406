"""Speculative decoding, measured in one run: transformers' generate vs podscribe's own loop.

    .venv/bin/python -m bench.bench_speculative [--speech ../shared/speech] [--quick] [--assistant self-int8]

Inputs: the human-referenced English clips of the shared speech set (one piece
each) and a ~3-minute long-form file joined from them with pauses, cut into
pieces by podscribe's cutter. Main model `base` fp32 on CPU; assistant the int8
self-draft unless told otherwise. For each configuration: the encoder phase
(timed per batch size) and the decoder phase (the generation itself, encoder
output given) apart, the ratio of each to transformers' main-alone generate at
batch 1, the ratio of the decoder phase to podscribe's own main-alone loop at the
same batch size, tokens per main-model forward call, WER, and whether every
token id equals transformers' main-alone output (it must: "yes" everywhere).
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from bench.common import SPEECH, english_clips, long_form
from pipeline.audio import media
from pipeline.decode.generate import Generator
from pipeline.decode.hf_generate import hf_generate
from pipeline.facts.metrics import wer
from pipeline.facts.runtime import pick_runtime
from pipeline.models.load import Models, load_assistant, load_models

SIZES = (1, 2, 4, 8)


def encode(models: Models, features: torch.Tensor, size: int) -> tuple[torch.Tensor, float]:
    start, parts = time.perf_counter(), []
    with torch.inference_mode():
        for i in range(0, features.shape[0], size):
            parts.append(models.main.get_encoder()(features[i : i + size]).last_hidden_state)
    return torch.cat(parts), time.perf_counter() - start


def run_hf(models: Models, features, encoded, size: int, assistant=None):
    start, out = time.perf_counter(), []
    for i in range(0, features.shape[0], size):
        part = slice(i, i + size)
        out += hf_generate(
            models.main, features[part], ["en"] * features[part].shape[0], True, assistant, encoded[part]
        )
    wall = time.perf_counter() - start
    main_calls = sum(calls[0] for _, _, calls in out) if assistant is not None else None
    return wall, [t for t, _, _ in out], main_calls


def run_ours(models: Models, features, encoded, size: int, speculative: bool):
    generator = Generator(models, use_assistant=speculative)
    prompt = generator.prompt("en")
    start, out = time.perf_counter(), []
    for i in range(0, features.shape[0], size):
        part = slice(i, i + size)
        out += generator.generate(features[part], [prompt] * features[part].shape[0], encoded[part])
    wall = time.perf_counter() - start
    return wall, [g.tokens for g in out], sum(g.stats.main_calls for g in out)


def measure(label: str, models: Models, pieces: list[np.ndarray], refs: list[str], joined: bool) -> None:
    features = models.processor.feature_extractor(
        pieces, sampling_rate=media.SAMPLE_RATE, return_tensors="pt"
    ).input_features
    encoded, enc_s = {}, {}
    for size in SIZES:
        encoded[size], enc_s[size] = encode(models, features, size)
    tok = models.processor.tokenizer

    def text(tokens: list[list[int]]) -> list[str]:
        texts = [tok.decode(t, skip_special_tokens=True).strip() for t in tokens]
        return [" ".join(texts)] if joined else texts

    plain = models.with_assistant(None, None)
    rows = []
    wall, reference, _ = run_hf(plain, features, encoded[1], 1)
    n_tokens = sum(len(t) + 1 for t in reference)
    rows.append(("transformers generate, main alone", 1, wall, reference, n_tokens, None))
    wall, tokens, calls = run_hf(plain, features, encoded[4], 4)
    rows.append(("transformers generate, main alone", 4, wall, tokens, None, None))
    wall, tokens, calls = run_hf(models, features, encoded[1], 1, models.assistant)
    rows.append((f"transformers assisted ({models.assistant_name})", 1, wall, tokens, calls, None))
    own_plain = {}
    for size in SIZES:
        wall, tokens, calls = run_ours(models, features, encoded[size], size, False)
        own_plain[size] = wall
        rows.append(("podscribe loop, main alone", size, wall, tokens, calls, size))
    for size in SIZES:
        wall, tokens, calls = run_ours(models, features, encoded[size], size, True)
        rows.append((f"podscribe speculative ({models.assistant_name})", size, wall, tokens, calls, size))

    hf_dec = rows[0][2]
    hf_e2e = hf_dec + enc_s[1]
    audio_s = sum(len(p) for p in pieces) / media.SAMPLE_RATE
    print(f"\n## {label}: {len(pieces)} pieces, {audio_s:.0f} s of audio, {n_tokens} tokens (with end of text)\n")
    print(
        "| configuration | batch | encoder s | decoder s | decoder vs hf bs1 | end-to-end vs hf bs1 "
        "| decoder vs own main alone, same batch | tokens / main call | WER | same tokens |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, size, wall, tokens, calls, own in rows:
        same = "yes" if tokens == reference else "NO"
        per_call = f"{n_tokens / calls:.2f}" if calls else "1.00" if "main alone" in name else "-"
        vs_own = f"{own_plain[own] / wall:.2f}x" if own else "-"
        print(
            f"| {name} | {size} | {enc_s[size]:.2f} | {wall:.2f} | {hf_dec / wall:.2f}x | "
            f"{hf_e2e / (wall + enc_s[size]):.2f}x | {vs_own} | {per_call} | {wer(refs, text(tokens)):.2%} | {same} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speech", type=Path, default=SPEECH)
    parser.add_argument("--quick", action="store_true", help="12 clips only, no long-form")
    parser.add_argument("--model", default="base")
    parser.add_argument("--assistant", default="self-int8")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import transformers

    transformers.logging.set_verbosity_error()
    runtime = pick_runtime("cpu")
    base = load_models(args.model, "none", runtime)
    draft = load_assistant(args.assistant, base.main, base.processor, runtime)
    models = dataclasses.replace(base, runtime=runtime).with_assistant(draft, args.assistant)
    print(
        f"model {args.model}, assistant {args.assistant}, torch threads {torch.get_num_threads()}, "
        f"CPU: {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores"
    )

    clips = english_clips(args.speech, 12 if args.quick else 0)
    measure("shared English clips", models, [media.decode(c.path) for c in clips], [c.text for c in clips], False)
    if not args.quick:
        with tempfile.TemporaryDirectory(prefix="podscribe-bench-") as folder:
            mp3, joined = long_form(clips, Path(folder))
            pieces = [p.samples for p in media.pieces(mp3)]
            measure("3-minute long-form file", models, pieces, [" ".join(joined.texts)], True)


if __name__ == "__main__":
    main()
