"""The GPU path, measured in one prepared run: what each step costs, what speculation would gain, and
whether half precision keeps speculative output identical to the main model alone.

    bash bench/gpu.sh                      # on a CUDA machine: under 8 minutes on one H200
    .venv/bin/python -m bench.gpu --tiny   # anywhere: the same steps on tiny shapes (a smoke test)

No downloads and no audio stage: models with large-v3's shapes (the main model) and distil-large-v3's
decoder (a 2-layer decoder-only draft reading the main encoder's output, as podscribe runs
distil-large-v3 as an assistant), random weights, Whisper's real generation config (bench/data). The
projection to the vocabulary is scaled up so that random logits are as decided as a trained model's
(near-ties would otherwise make every identity count meaningless). What it prints (and writes as JSON to
--out):

1. per-step costs of podscribe's decoder (``KVCacheDecoder``): the main model scoring 1..16 positions per
   row (a verify pass of k+1), the draft's one-token step, at batch 1/2/4/8; the encoder per batch;
2. what speculation would gain at draft agreement a = 0.5 .. 0.9 with those costs (``DraftPolicy``'s model:
   E(k) = (1 - a^(k+1)) / (1 - a) tokens per round of k draft steps and one verify of k+1), best k each;
3. token identity in fp16 and bf16: greedy with a draft that mostly agrees (the main decoder with small
   noise) against greedy alone, rows compared token for token, at batch 1/4/8;
4. throughput of plain and speculative generation (64 tokens per row) over 32 pieces at batch 1/4/8;
5. the weight-only int8 compute type (``int8_float16``): weight bytes, encoder and decoder-step costs beside
   the half-precision model's at batch 1/4/8 (its weights are dequantized per call: does it cost time?).

Random weights say nothing about accuracy, and their agreement with a noisy copy is not distil's: the
acceptance rate to read section 2 with comes from CPU runs with real weights (bench.bench_speculative).
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

import torch
from transformers import GenerationConfig, WhisperConfig, WhisperForCausalLM, WhisperForConditionalGeneration

from pipeline.backend.quantize import quantize
from pipeline.decode.kv_cache import KVCacheDecoder
from pipeline.decode.rules import WhisperRules
from pipeline.decode.speculative import DraftPolicy, greedy
from pipeline.facts.whisper import WINDOW_MEL_FRAMES, Tokens
from pipeline.models.load import decoder_only_assistant

HERE = Path(__file__).resolve().parent
LARGE_V3 = {"d_model": 1280, "layers": 32, "heads": 20, "ffn": 5120, "mels": 128}
TINY = {"d_model": 64, "layers": 2, "heads": 4, "ffn": 128, "mels": 80}
BATCHES = (1, 2, 4, 8)
LOGIT_SCALE = 8.0


def build(shape: dict, draft_layers: int, device, dtype, seed: int = 0):
    gen = GenerationConfig.from_dict(json.loads((HERE / "data" / "whisper_generation_config.json").read_text()))
    config = WhisperConfig(
        vocab_size=51865,
        d_model=shape["d_model"],
        encoder_layers=shape["layers"],
        decoder_layers=shape["layers"],
        encoder_attention_heads=shape["heads"],
        decoder_attention_heads=shape["heads"],
        encoder_ffn_dim=shape["ffn"],
        decoder_ffn_dim=shape["ffn"],
        num_mel_bins=shape["mels"],
        decoder_start_token_id=gen.decoder_start_token_id,
        eos_token_id=gen.eos_token_id,
        pad_token_id=gen.pad_token_id,
        bos_token_id=gen.bos_token_id,
        attn_implementation="sdpa",
    )
    torch.manual_seed(seed)
    with torch.device(device):
        main = WhisperForConditionalGeneration(config).to(dtype).eval()
    with torch.no_grad():
        main.proj_out.weight.mul_(LOGIT_SCALE)  # tied to the embedding: tokens are embedded larger too
    main.generation_config = gen
    draft_config = copy.deepcopy(config)
    draft_config.is_encoder_decoder = False
    draft_config.decoder_layers = draft_layers
    with torch.device(device):
        draft = WhisperForCausalLM(draft_config).to(dtype).eval()
    with torch.no_grad():  # distil's decoder: the main's first and last layers, its embeddings and projection
        keep = [0, shape["layers"] - 1][:draft_layers]
        for mine, theirs in zip(draft.model.decoder.layers, keep):
            mine.load_state_dict(main.model.decoder.layers[theirs].state_dict())
        draft.model.decoder.embed_tokens.weight.copy_(main.model.decoder.embed_tokens.weight)
        draft.model.decoder.embed_positions.weight.copy_(main.model.decoder.embed_positions.weight)
        draft.model.decoder.layer_norm.load_state_dict(main.model.decoder.layer_norm.state_dict())
        draft.proj_out.weight.copy_(main.proj_out.weight)
    return main, draft


def noisy_copy(main, scale: float, seed: int):
    """A decoder-only draft: the main decoder with noise (agrees mostly, not always)."""
    draft = decoder_only_assistant(main)
    g = torch.Generator(device=main.device).manual_seed(seed)
    with torch.no_grad():
        for p in draft.model.decoder.layers.parameters():
            p.add_(torch.randn(p.shape, generator=g, device=p.device, dtype=p.dtype) * scale)
    return draft


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


TIMING_REPEATS = {"repeat_cap": None}  # --tiny: 1 (its timings mean nothing; it proves the steps run)


def timed(fn, device, repeat: int = 5) -> float:
    repeat = min(repeat, TIMING_REPEATS["repeat_cap"] or repeat)
    fn()
    sync(device)
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    sync(device)
    return (time.perf_counter() - start) / repeat


@torch.inference_mode()
def decoder_steps(dec: KVCacheDecoder, encoded, device, positions) -> dict:
    """Seconds per ``dec.forward`` of each number of positions per row, 64 tokens already in the cache."""
    b = encoded.shape[0]
    prefix = torch.full((b, 64), 440, dtype=torch.long, device=device)
    dec.start(encoded, 128)
    dec.forward(prefix, torch.zeros(b, dtype=torch.long, device=device))
    start = torch.full((b,), 64, dtype=torch.long, device=device)
    out = {q: timed(lambda q=q: dec.forward(prefix[:, :q], start), device) for q in positions}
    dec.release()
    return out


def step_costs(main, draft, features, device) -> dict:
    out = {"encoder_s": {}, "verify_s": {}, "draft_step_s": {}}
    main_dec, draft_dec = KVCacheDecoder(main), KVCacheDecoder(draft, exact=False)
    for b in BATCHES:
        feats = features[:b]
        out["encoder_s"][b] = timed(lambda f=feats: main.get_encoder()(f), device, repeat=3)
        encoded = main.get_encoder()(feats).last_hidden_state
        out["verify_s"][b] = decoder_steps(main_dec, encoded, device, (1, 2, 3, 4, 6, 8, 12, 16))
        out["draft_step_s"][b] = decoder_steps(draft_dec, encoded, device, (1,))[1]
    return out


def int8_costs(main, features, device, half) -> dict:
    """int8_float16 (weight-only int8) against the half-precision model: bytes of weights, encoder and decoder steps."""
    quantized = quantize(copy.deepcopy(main), "weight_only", half)
    out: dict = {"weight_bytes": {}, "encoder_s": {}, "step_s": {}}
    for name, model in (("half", main), ("int8_weights", quantized)):
        out["weight_bytes"][name] = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
        dec = KVCacheDecoder(model)
        for b in (1, 4, 8):
            feats = features[:b]
            out["encoder_s"].setdefault(name, {})[b] = timed(lambda f=feats, m=model: m.get_encoder()(f), device, 3)
            encoded = model.get_encoder()(feats).last_hidden_state
            out["step_s"].setdefault(name, {})[b] = decoder_steps(dec, encoded, device, (1, 5))
    del quantized
    return out


def gains(costs: dict) -> dict:
    """Expected speed of speculation over plain decoding (per batch size and agreement a), best k."""
    out = {}
    for b in BATCHES:
        verify, draft_step = costs["verify_s"][b], costs["draft_step_s"][b]
        plain = verify[1]  # one token per main step
        out[b] = {}
        for a in (0.5, 0.6, 0.7, 0.8, 0.9):
            best = max(
                ((1 - a ** (k + 1)) / (1 - a) / (k * draft_step + verify[k + 1]) * plain, k)
                for k in (1, 2, 3, 5, 7, 11, 15)
                if k + 1 in verify
            )
            out[b][a] = {"speedup": round(best[0], 2), "k": best[1]}
    return out


NEW_TOKENS = 64  # per row: enough steps to time, short enough for the 8-minute budget
TINY_NEW_TOKENS = 8  # --tiny proves every step runs; on a shared 2-core CPU 64 would take minutes


@torch.inference_mode()
def decode_all(model, main_dec, draft_dec, features, batch: int, device, new_tokens: int = NEW_TOKENS) -> list:
    """Greedy decoding of every row of ``features`` in batches (speculative when ``draft_dec`` is given); the
    decoders are built once by the caller and only restarted here."""
    tokens = Tokens.of(model.generation_config)
    rules = WhisperRules(model.generation_config, model.config.vocab_size, True, device)
    prompt = tokens.prompt("en")
    out = []
    for at in range(0, features.shape[0], batch):
        encoded = model.get_encoder()(features[at : at + batch].to(model.dtype)).last_hidden_state
        prompts = torch.tensor([prompt] * encoded.shape[0], device=device)
        main_dec.start(encoded, len(prompt) + new_tokens + 20)
        if draft_dec is not None:
            draft_dec.start(encoded, len(prompt) + new_tokens + 20)
        out.append(greedy(main_dec, prompts, rules, len(prompt) + new_tokens, draft_dec, DraftPolicy()))
    return out


def identity(main, features, device, dtype, new_tokens: int = NEW_TOKENS) -> dict:
    """Rows where greedy with a mostly-agreeing draft differs from greedy alone, per batch size."""
    model = main.to(dtype)
    main_dec, draft_dec = KVCacheDecoder(model), KVCacheDecoder(noisy_copy(model, scale=0.02, seed=1), exact=False)
    out = {}
    for b in (1, 4, 8):
        plain = decode_all(model, main_dec, None, features, b, device, new_tokens)
        spec = decode_all(model, main_dec, draft_dec, features, b, device, new_tokens)
        plain_rows = [row for d in plain for row in d.tokens]
        spec_rows = [row for d in spec for row in d.tokens]
        drafted = sum(s.drafted for d in spec for s in d.stats)
        accepted = sum(s.accepted for d in spec for s in d.stats)
        differ = sum(p != s for p, s in zip(plain_rows, spec_rows))
        out[b] = {"rows": len(plain_rows), "rows_differing": differ, "acceptance": round(accepted / max(1, drafted), 3)}
    return out


def throughput(main, draft, features, device, new_tokens: int = NEW_TOKENS) -> dict:
    main_dec, draft_dec = KVCacheDecoder(main), KVCacheDecoder(draft, exact=False)
    out = {}
    for b in (1, 4, 8):
        for label, drafting in (("plain", None), ("speculative", draft_dec)):
            start = time.perf_counter()
            made = sum(
                len(row)
                for d in decode_all(main, main_dec, drafting, features, b, device, new_tokens)
                for row in d.tokens
            )
            sync(device)
            wall = time.perf_counter() - start
            out.setdefault(b, {})[label] = {"wall_s": round(wall, 3), "tokens_per_s": round(made / wall, 1)}
    return out


SECTIONS = ("costs", "throughput", "identity", "int8")  # in this order: the table first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tiny", action="store_true", help="tiny shapes: a smoke test of every step")
    parser.add_argument("--pieces", type=int, default=16)
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"any of {','.join(SECTIONS)}")
    parser.add_argument("--budget-s", type=float, default=0, help="start no section after this many seconds (0: none)")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here (after each section)")
    args = parser.parse_args()
    device = torch.device(args.device)
    shape = TINY if args.tiny else LARGE_V3
    half = torch.float16 if device.type == "cuda" else torch.bfloat16
    pieces = 8 if args.tiny else max(8, args.pieces)
    new_tokens = TINY_NEW_TOKENS if args.tiny else NEW_TOKENS
    TIMING_REPEATS["repeat_cap"] = 1 if args.tiny else None
    report: dict = {"device": str(device), "shape": shape, "dtype": str(half), "new_tokens_per_row": new_tokens}
    if device.type == "cuda":
        report["gpu"] = torch.cuda.get_device_name(device)
    t0 = time.perf_counter()
    main_model, draft = build(shape, 2, device, half)
    g = torch.Generator(device=device).manual_seed(0)
    features = torch.randn(pieces, shape["mels"], WINDOW_MEL_FRAMES, generator=g, device=device).to(half)
    report["build_s"] = round(time.perf_counter() - t0, 1)

    def save() -> None:
        report["wall_s"] = round(time.perf_counter() - t0, 1)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(report, indent=1, default=str))

    wanted = [s for s in SECTIONS if s in args.sections.split(",")]
    for section in wanted:
        if args.budget_s and time.perf_counter() - t0 > args.budget_s:
            report.setdefault("skipped", []).append(section)
            print(f"{section}: skipped, past the {args.budget_s:.0f} s budget", flush=True)
            continue
        start = time.perf_counter()
        if section == "costs":
            report["step_costs"] = step_costs(main_model, draft, features[:8], device)
            report["speculation_gain"] = gains(report["step_costs"])
            shown = {k: report[k] for k in ("step_costs", "speculation_gain")}
        elif section == "throughput":
            report["throughput"] = shown = throughput(main_model, draft, features, device, new_tokens)
        elif section == "identity":
            report["identity"] = shown = {}
            for dtype in (half, torch.bfloat16 if half == torch.float16 else torch.float32):
                shown[str(dtype)] = identity(main_model, features[:8].float(), device, dtype, new_tokens)
            main_model = main_model.to(half)
        else:
            report["int8_float16"] = shown = int8_costs(main_model, features[:8], device, half)
        print(json.dumps({section: shown, "section_s": round(time.perf_counter() - start, 1)}, indent=1), flush=True)
        save()
    print(f"done in {report['wall_s']} s", flush=True)


if __name__ == "__main__":
    main()
