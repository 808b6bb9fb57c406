"""A distilled draft for `base`, measured in one run: train it, then decode held-out long-form pieces with
`base` alone, `base` + `self-int8` and `base` + the trained draft, side by side.

    .venv/bin/python -m bench.bench_distill --train DIR_OR_FILE... --work /tmp/distill [--steps 300]
        [--draft DIR] [--longform ../shared/longform] [--pieces 24] [--sizes 1 2 4 8]

Training (`podscribe distill`'s own code, in process): on the audio given with --train (never the
evaluation set). --draft reuses a draft already trained instead. Evaluation: the long-form episodes cut
and gated as transcription cuts them (the first --pieces pieces with a voice, taken round-robin from the
episodes), `base` in the job's compute type (auto). Per mode and batch size: the decoder phase (podscribe's
loop, encoder output given: `Generator.generate`), tokens per main call, and whether every token id equals
`base` alone (it must). The draft/main step cost (one token, batch 1). End to end: the decode stage as a job
runs it (`Transcriber.transcribe`: features, encoder, probe, loop, scoring, fallbacks, coverage) on the same
pieces. Prints a table and writes it as JSON beside the draft.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import torch

from bench.common import LONGFORM
from pipeline.audio import media
from pipeline.backend.quantize import quantize
from pipeline.decode.generate import Generator, encode, log_mel
from pipeline.decode.kv_cache import KVCacheDecoder
from pipeline.decode.options import DecodeOptions
from pipeline.decode.transcriber import Transcriber
from pipeline.distill.evaluate import step_cost_ratio
from pipeline.distill.options import DistillOptions
from pipeline.distill.train import distill
from pipeline.facts.runtime import pick_runtime
from pipeline.models.load import Models, load_assistant, load_models, quantized_self_draft


def eval_pieces(longform: Path, n: int, transcriber: Transcriber) -> list:
    episodes = sorted(p for p in longform.iterdir() if p.suffix in (".mp3", ".m4a", ".ogg", ".wav", ".flac"))
    streams = [media.pieces(p) for p in episodes]
    out = []
    while len(out) < n and streams:
        for s in list(streams):
            piece = next(s, None)
            if piece is None:
                streams.remove(s)
                continue
            _, active = transcriber.gate([piece.samples])
            if active:
                out.append(piece.samples)
            if len(out) >= n:
                break
    return out


def decoder_phase(models: Models, features, encoded, size: int, use_assistant: bool):
    g = Generator(models, use_assistant=use_assistant)
    prompt = g.prompt("en")
    start, out = time.perf_counter(), []
    for i in range(0, features.shape[0], size):
        out += g.generate(features[i : i + size], [prompt] * features[i : i + size].shape[0], encoded[i : i + size])
    return time.perf_counter() - start, out


def end_to_end(models: Models, pieces, size: int, use_assistant: bool) -> float:
    t = Transcriber(models, DecodeOptions(batch_size=size, language="en"), use_assistant=use_assistant)
    start = time.perf_counter()
    for i in range(0, len(pieces), size):
        t.transcribe(pieces[i : i + size])
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", nargs="*", default=[])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--draft", type=Path, default=None, help="a draft already trained (no training)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--max-pieces", type=int, default=None)
    ap.add_argument("--vocab", default="full")
    ap.add_argument("--longform", type=Path, default=LONGFORM)
    ap.add_argument("--pieces", type=int, default=24)
    ap.add_argument("--sizes", type=int, nargs="*", default=[1, 2, 4, 8])
    ap.add_argument("--e2e-sizes", type=int, nargs="*", default=[4])
    ap.add_argument("--compute-type", default="auto")
    ap.add_argument("--device", default="cpu", help="cuda: the distil-shaped path on a GPU (self-int8 is CPU-only)")
    args = ap.parse_args()
    torch.manual_seed(0)
    report: dict = {}
    draft_dir = args.draft
    if draft_dir is None:
        draft_dir = args.work / "draft"
        opts = DistillOptions(
            steps=args.steps,
            vocab=None if args.vocab == "full" else int(args.vocab),
            max_pieces=args.max_pieces,
            language="en",
            eval_every=max(1, args.steps // 3),
            compute_type=args.compute_type,
            device=args.device,
        )
        t0 = time.perf_counter()
        result = distill(args.train, draft_dir, opts, echo=print, remember=False)  # a bench draft: not for jobs
        report["training"] = {
            "wall_s": round(time.perf_counter() - t0, 1),
            "label_s": round(result.label_s, 1),
            "train_s": round(result.train_s, 1),
            "steps": result.steps,
            "train_pieces": result.train_pieces,
            "vocab": result.vocab_size,
            "held_out": [e.describe() for e in result.evaluations],
        }
        print(json.dumps(report["training"], indent=1))
    # as load_models does: self-int8 and the drafts are made from the float weights, then take the compute type
    runtime = pick_runtime(args.device, args.compute_type)
    float_runtime = pick_runtime(args.device, "float32")
    base = load_models("base", "none", float_runtime)
    self_int8 = quantized_self_draft(base.main) if runtime.device.type == "cpu" else None
    trained = load_assistant(str(draft_dir), base.main, base.processor, float_runtime)
    if runtime.int8:
        quantize(base.main, "int8")
        quantize(trained, "int8")
    elif runtime.dtype != torch.float32:
        base.main.to(runtime.dtype)
        trained.to(runtime.dtype)
    base = dataclasses.replace(base, runtime=runtime)
    modes = {"base": base.with_assistant(None, None)}
    if self_int8 is not None:
        modes["self-int8"] = base.with_assistant(self_int8, "self-int8")
    modes["distilled"] = base.with_assistant(trained, str(draft_dir))
    drafts = [m for m in ("self-int8", "distilled") if m in modes]
    transcriber = Transcriber(modes["base"], DecodeOptions(language="en"))
    pieces = eval_pieces(args.longform, args.pieces, transcriber)
    seconds = sum(len(p) for p in pieces) / media.SAMPLE_RATE
    features = log_mel(base.processor.feature_extractor, pieces, runtime.device, runtime.dtype)
    t0 = time.perf_counter()
    with torch.inference_mode():
        encoded = encode(base.main, features)
    report["eval"] = {
        "pieces": len(pieces),
        "audio_s": round(seconds, 1),
        "encoder_s": round(time.perf_counter() - t0, 2),
        "runtime": runtime.describe(),
    }
    main_dec = KVCacheDecoder(base.main)
    prompt = Generator(modes["base"]).prompt("en")
    for name in drafts:
        ratio = step_cost_ratio(main_dec, KVCacheDecoder(modes[name].assistant, exact=False), encoded[0], prompt)
        report["eval"][f"step_cost_{name}"] = round(ratio, 3)
    rows = []
    for size in args.sizes:
        plain_s, plain = decoder_phase(modes["base"], features, encoded, size, False)
        row = {"batch": size, "base_s": round(plain_s, 2)}
        for name in drafts:
            wall, out = decoder_phase(modes[name], features, encoded, size, True)
            calls = sum(g.stats.main_calls for g in out)
            tokens = sum(len(g.tokens) for g in out) + sum(g.stats.passes for g in out)
            row[f"{name}_s"] = round(wall, 2)
            row[f"{name}_x"] = round(plain_s / wall, 2)
            row[f"{name}_tokens_per_call"] = round(tokens / calls, 2)
            row[f"{name}_same_tokens"] = [g.tokens for g in out] == [g.tokens for g in plain]
        rows.append(row)
        print(json.dumps(row), flush=True)
    report["decoder_phase"] = rows
    e2e = []
    for size in args.e2e_sizes:
        row = {"batch": size}
        for name, m in modes.items():
            row[f"{name}_s"] = round(end_to_end(m, pieces, size, name != "base"), 2)
        for name in drafts:
            row[f"{name}_x"] = round(row["base_s"] / row[f"{name}_s"], 2)
        e2e.append(row)
        print(json.dumps(row), flush=True)
    report["end_to_end"] = e2e
    args.work.mkdir(parents=True, exist_ok=True)
    (args.work / "bench_distill.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
