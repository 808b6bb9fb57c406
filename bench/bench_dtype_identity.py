"""Token identity of speculative vs plain decoding in bf16 (and fp32) on CPU, measured in one run.

    nice .venv/bin/python -m bench.bench_dtype_identity [--speech ../shared/speech] [--clips N] [--head all|flipped|none]

In fp32 the speculative loop commits exactly the main model's greedy tokens (the tests check it).
In half precision that is no longer guaranteed: the verify pass scores k+1 positions per row in
one forward call, plain decoding one, so the matrix products have other shapes, round
differently, and a near-tie between two tokens can go either way. This measures how often.

Inputs: the human-referenced English clips of the shared speech set (one piece each, padded or cut
to 30 s as the pipeline does), all 49 by default or ``--clips N`` spread evenly over the list (the
bf16 encoder on a CPU without bf16 units is ~6x slower than fp32; the whole run took ~15 minutes on
2 busy cores). Main model `base` on CPU, loaded once in float32 and once in bfloat16; the encoder
runs once per dtype (batch ``--batch-size``) and its
output feeds both modes, so only the decoder differs. Each dtype decodes every batch with
podscribe's Generator (what the Transcriber calls, without its second chances) twice: plain
(no assistant) and speculative with the int8 self-draft. Reported per dtype: pieces whose token
ids differ between plain and speculative, where the first difference falls, WER of each mode
against the references, wall time of each phase; then bf16-plain vs fp32-plain for context.
The draft length k is chosen each round from measured wall times (DraftPolicy), so the verify
widths, and with them which bf16 pieces flip, change from run to run; plain decoding does not.

For every differing piece: the tokens at the first difference and the text around it, and the
main model's logits for the two tokens at that point in a teacher-forced pass (bf16 and fp32),
to show how close the tie was.

``--head``: bf16 again with the decoder's final layer norm and output projection computed in fp32
(monkeypatched on the Generator's KVCacheDecoder; nothing under pipeline/ changes): on the batches
that had a difference (``flipped``, the default), on every batch (``all``: ~8 more minutes here) or
not at all (``none``).
A last probe (``--probe-batches``) teacher-forces the plain tokens of a batch once one position per
call and once five per call (a verify pass's shape) and compares the logits, with the bf16 head
and with an fp32 head on the same hidden states: how much of the shape noise the head alone adds.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from bench.common import REPO, SPEECH, english_clips
from pipeline.audio import media
from pipeline.decode.generate import Generator
from pipeline.decode.kv_cache import KVCacheDecoder
from pipeline.decode.rules import RuleState
from pipeline.facts.metrics import english_normalizer, wer
from pipeline.facts.runtime import pick_runtime
from pipeline.models.load import Models, load_models, quantized_self_draft


@dataclass
class Run:
    """One mode's decode of every clip."""

    label: str
    tokens: list[list[int]]
    passes: list[list[int]]  # per clip: tokens per pass
    texts: list[str]
    wall: float
    main_calls: int
    drafted: int = 0
    accepted: int = 0


@dataclass
class Setup:
    dtype: str
    plain: Models
    spec: Models
    features: torch.Tensor
    encoded: torch.Tensor
    encode_s: float
    runs: dict[str, Run] = field(default_factory=dict)


def fp32_head(generator: Generator) -> Generator:
    """The main decoder's final layer norm and output projection in fp32 (the body stays in its dtype)."""
    main = generator.main
    norm, proj = main.decoder.layer_norm, main.proj_out
    w, b = norm.weight.detach().float(), norm.bias.detach().float()
    weight = proj.weight.detach().float()
    bias = None if proj.bias is None else proj.bias.detach().float()
    main.final_norm = lambda x: F.layer_norm(x.float(), norm.normalized_shape, w, b, norm.eps)
    main.project = lambda x: F.linear(x, weight, bias)
    return generator


def decode(
    label: str, models: Models, setup: Setup, size: int, speculative: bool, head32: bool, batches: list[int]
) -> Run:
    generator = Generator(models, use_assistant=speculative)
    if head32:
        fp32_head(generator)
    prompt = generator.prompt("en")
    tok = models.tokenizer
    n = setup.features.shape[0]
    tokens: list[list[int]] = [[] for _ in range(n)]
    passes: list[list[int]] = [[] for _ in range(n)]
    calls = drafted = accepted = 0
    start = time.perf_counter()
    for i in batches:
        part = slice(i, min(i + size, n))
        out = generator.generate(setup.features[part], [prompt] * (part.stop - i), setup.encoded[part])
        for j, g in enumerate(out):
            tokens[i + j], passes[i + j] = g.tokens, g.pass_lengths
            calls += g.stats.main_calls
            drafted += g.stats.drafted
            accepted += g.stats.accepted
    wall = time.perf_counter() - start
    texts = [tok.decode(t, skip_special_tokens=True).strip() for t in tokens]
    return Run(label, tokens, passes, texts, wall, calls, drafted, accepted)


def prepare(dtype: str, model: str, cache_dir: Path | None, pieces: list[np.ndarray], size: int) -> Setup:
    runtime = pick_runtime("cpu", dtype)
    plain = load_models(model, "none", runtime, cache_dir)
    spec = dataclasses.replace(plain, runtime=runtime).with_assistant(quantized_self_draft(plain.main), "self-int8")
    features = plain.processor.feature_extractor(
        pieces, sampling_rate=media.SAMPLE_RATE, return_tensors="pt"
    ).input_features.to(runtime.device, runtime.dtype)
    with torch.inference_mode():  # warm-up, untimed: one short piece through both modes
        for models, speculative in ((plain, False), (spec, True)):
            g = Generator(models, use_assistant=speculative)
            g.generate(features[:1], [g.prompt("en")])
        start, parts = time.perf_counter(), []
        for i in range(0, features.shape[0], size):
            parts.append(plain.main.get_encoder()(features[i : i + size]).last_hidden_state)
        encoded = torch.cat(parts)
    return Setup(dtype, plain, spec, features, encoded, time.perf_counter() - start)


def first_diff(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def token_name(tok, ts_begin: int, t: int | None) -> str:
    if t is None:
        return "(end)"
    if t >= ts_begin:
        return f"<|{(t - ts_begin) * 0.02:.2f}|>"
    return repr(tok.decode([t]))


def compare(a: Run, b: Run, chosen: list[int]) -> tuple[list[int], dict]:
    """Clips whose tokens differ, and stats of the first differing position."""
    differ = [i for i in chosen if a.tokens[i] != b.tokens[i]]
    firsts = [first_diff(a.tokens[i], b.tokens[i]) for i in differ]
    rel = [f / max(1, len(a.tokens[i])) for f, i in zip(firsts, differ)]
    norm = english_normalizer()
    text_differ = sum(norm(a.texts[i]) != norm(b.texts[i]) for i in differ)
    stats = {
        "differ": len(differ),
        "of": len(chosen),
        "text_differ": text_differ,
        "first": firsts,
        "rel": rel,
    }
    return differ, stats


def describe_stats(s: dict) -> str:
    if not s["differ"]:
        return f"0/{s['of']} pieces differ"
    f, r = s["first"], s["rel"]
    return (
        f"{s['differ']}/{s['of']} pieces differ in token ids ({s['text_differ']} in normalized text); "
        f"first difference at token {min(f)}..{max(f)} (median {statistics.median(f):g}), "
        f"{min(r):.0%}..{max(r):.0%} of the plain sequence (median {statistics.median(r):.0%})"
    )


def forced_margin(setup: Setup, clip: int, prefix: list[int], tokens: tuple[int | None, int | None]) -> str:
    """The main model's logits for the two tokens after ``prompt + prefix`` in one teacher-forced pass (one row),
    raw and after Whisper's rules (which of the two the rules leave, and the argmax)."""
    models = setup.plain
    g = Generator(models, use_assistant=False)
    prompt = g.prompt("en")
    ids = torch.tensor([prompt + prefix])
    with torch.inference_mode():
        return _forced_margin(g, setup.encoded[clip : clip + 1], ids, prefix, tokens)


def _forced_margin(g: Generator, encoded: torch.Tensor, ids: torch.Tensor, prefix: list[int], tokens) -> str:
    dec = KVCacheDecoder(g.models.main)
    dec.start(encoded, ids.shape[1] + 2)
    logits = dec.forward(ids, torch.zeros(1, dtype=torch.long))[:, -1:].float().clone()
    raw = logits[0, 0].clone()
    states = g.rules.expand(RuleState.initial(1, ids.device), torch.tensor([prefix]).view(1, len(prefix)))
    ruled = g.rules.apply(logits, states.map(lambda t: t[:, -1:]))[0, 0]
    eot = g.rules.eot
    parts = []
    for t in tokens:
        t = eot if t is None else t
        parts.append(f"{raw[t].item():.4f}/{ruled[t].item():.4f}")
    top = int(ruled.argmax())
    return f"logits raw/after rules {parts[0]} vs {parts[1]}; argmax after rules {top}"


def show_diffs(
    la: str, lb: str, a: Run, b: Run, differ: list[int], names: list[str], setups: list[Setup], tok, ts_begin: int
) -> None:
    for i in differ:
        x, y = a.tokens[i], b.tokens[i]
        d = first_diff(x, y)
        ta = x[d] if d < len(x) else None
        tb = y[d] if d < len(y) else None
        ends = np.cumsum(a.passes[i]) if a.passes[i] else np.array([len(x)])
        npass = int(np.searchsorted(ends, d, side="right")) + 1
        before = tok.decode([t for t in x[max(0, d - 12) : d]], decode_with_timestamps=True)
        after_a = tok.decode(x[d : d + 10], decode_with_timestamps=True)
        after_b = tok.decode(y[d : d + 10], decode_with_timestamps=True)
        print(f"\n- {names[i]}: first difference at token {d} of {len(x)} / {len(y)} (pass {npass})")
        print(f"  {la}: {token_name(tok, ts_begin, ta)} ({ta})   {lb}: {token_name(tok, ts_begin, tb)} ({tb})")
        print(f"  before: ...{before!r}")
        print(f"  {la} from there: {after_a!r}")
        print(f"  {lb} from there: {after_b!r}")
        print(f"  {la} text: {a.texts[i]!r}")
        print(f"  {lb} text: {b.texts[i]!r}")
        if npass == 1:
            for s in setups:
                print(f"  one teacher-forced pass, {s.dtype}: {forced_margin(s, i, x[:d], (ta, tb))}")
        else:
            print("  (in a later pass: no forced-pass margin)")


def probe(setup: Setup, batch: list[int], plain: Run, width: int = 5) -> str:
    """Teacher-force each row's plain tokens through the main decoder one position per call and ``width``
    per call, keep the hidden states before the final layer norm, and compare the logits of the two
    shapes with this dtype's head and with an fp32 head applied to the same hidden states (suppressed
    tokens masked, the other rules not applied)."""
    models = setup.plain
    g = Generator(models, use_assistant=False)
    prompt = g.prompt("en")
    eot = g.rules.eot
    rows = [prompt + plain.tokens[i] + [eot] for i in batch]
    length = max(map(len, rows))
    ids = torch.tensor([r + [eot] * (length - len(r)) for r in rows])
    # the positions that score a generated token (end of text included)
    real = torch.tensor([[len(prompt) - 1 <= j < len(r) - 1 for j in range(length)] for r in rows])
    dec = KVCacheDecoder(models.main)
    norm, proj = dec.final_norm, dec.project
    seen: list[torch.Tensor] = []
    dec.final_norm = lambda x: seen.append(x) or norm(x)  # keep the hidden states before the final layer norm

    def hidden(step: int) -> torch.Tensor:
        seen.clear()
        dec.start(setup.encoded[batch], length + width + 2)
        for at in range(0, length, step):
            dec.forward(ids[:, at : at + step], torch.full((len(batch),), at, dtype=torch.long))
        dec.release()
        return torch.cat(seen, 1)  # [B, L, D]

    with torch.inference_mode():
        x1, xw = hidden(1), hidden(width)
        ln, weight = dec.decoder.layer_norm, dec.proj_out.weight
        heads = {
            "own head": lambda x: proj(norm(x)).float(),
            "fp32 head": lambda x: F.linear(
                F.layer_norm(x.float(), ln.normalized_shape, ln.weight.float(), ln.bias.float(), ln.eps),
                weight.float(),
            ),
        }
        parts = [f"hidden max|d| {(x1.float() - xw.float()).abs()[real].max().item():.3g}"]
        for name, head in heads.items():
            l1, lw = (head(x).masked_fill(g.rules.always, float("-inf"))[real] for x in (x1, xw))
            top1, topw = l1.argmax(-1), lw.argmax(-1)
            top2 = l1.topk(2, -1).values
            gap = top2[:, 0] - top2[:, 1]
            parts.append(
                f"{name}: max|d logit| {torch.where(torch.isfinite(l1), l1 - lw, 0).abs().max().item():.3g}, top-1 differs at "
                f"{int((top1 != topw).sum())}/{int(real.sum())} positions, exact top-1 ties {int((gap == 0).sum())}, "
                f"median top-2 gap {gap.median().item():.3g}"
            )
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speech", type=Path, default=SPEECH)
    parser.add_argument("--clips", type=int, default=0, help="clips spread over the list (0: all)")
    parser.add_argument("--model", default="base")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--cache-dir", type=Path, default=REPO / ".cache" / "test-models")
    parser.add_argument("--head", choices=("flipped", "all", "none"), default="flipped")
    parser.add_argument("--probe-batches", type=int, default=3, help="batches for the shape probe (0: none)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    t_start = time.perf_counter()

    every = english_clips(args.speech)
    n = len(every) if args.clips <= 0 else min(args.clips, len(every))
    clips = [every[round(i * len(every) / n)] for i in range(n)]
    names = [str(c.path.relative_to(args.speech)) for c in clips]
    refs = [c.text for c in clips]
    pieces = [media.decode(c.path) for c in clips]
    size = args.batch_size
    batches = list(range(0, n, size))
    cores = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    print(
        f"model {args.model}, CPU, assistant self-int8, batch {size}, torch {torch.__version__}, "
        f"threads {torch.get_num_threads()}, {cores} cores, "
        f"cpu bf16 units: {bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())}, "  # noqa: SLF001 (no public probe)
        f"load average {os.getloadavg()[0]:.1f} (wall times are only comparable within one run)"
    )
    print(
        f"clips: {n} of {len(every)} English human-referenced ({sum(len(p) for p in pieces) / media.SAMPLE_RATE:.0f} s)"
        + ("" if n == len(every) else f" — cut to {n} (spread evenly) to keep the run short; --clips 0 for all")
    )

    setups = []
    for dtype in ("float32", "bfloat16"):
        s = prepare(dtype, args.model, args.cache_dir, pieces, size)
        s.runs["plain"] = decode("plain", s.plain, s, size, False, False, batches)
        s.runs["spec"] = decode("speculative", s.spec, s, size, True, False, batches)
        setups.append(s)
        print(f"[{dtype} done at {time.perf_counter() - t_start:.0f} s]", flush=True)
    fp32, bf16 = setups
    tok = fp32.plain.tokenizer
    ts_begin = fp32.plain.tokens.timestamp_begin
    chosen = list(range(n))

    head_batches = []
    if args.head != "none":
        flipped = {i for i in chosen if bf16.runs["plain"].tokens[i] != bf16.runs["spec"].tokens[i]}
        head_batches = [b for b in batches if args.head == "all" or flipped & set(range(b, b + size))]
    head_clips = [i for b in head_batches for i in range(b, min(b + size, n))]
    if head_batches:
        bf16.runs["plain32"] = decode("plain, fp32 head", bf16.plain, bf16, size, False, True, head_batches)
        bf16.runs["spec32"] = decode("speculative, fp32 head", bf16.spec, bf16, size, True, True, head_batches)
        print(f"[fp32-head runs done at {time.perf_counter() - t_start:.0f} s]", flush=True)

    print(f"\n## Plain vs speculative, {n} clips, batch {size}\n")
    print("| dtype | mode | encoder s | decoder s | main calls | draft acceptance | WER | same tokens as plain |")
    print("|---|---|---|---|---|---|---|---|")
    for s in setups:
        for key in ("plain", "spec", "plain32", "spec32"):
            if key not in s.runs:
                continue
            r = s.runs[key]
            sub = head_clips if key.endswith("32") else chosen
            acc = f"{r.accepted / r.drafted:.0%}" if r.drafted else "-"
            base = s.runs["plain32" if key.endswith("32") else "plain"]
            differ = sum(r.tokens[i] != base.tokens[i] for i in sub)
            on = "" if len(sub) == n else f" ({len(sub)} clips)"
            print(
                f"| {s.dtype} | {r.label}{on} | {s.encode_s:.1f} | {r.wall:.1f} | {r.main_calls} | {acc} | "
                f"{wer([refs[i] for i in sub], [r.texts[i] for i in sub]):.2%} | "
                f"{'yes' if not differ else f'NO ({differ} pieces)'} |"
            )

    print("\n## Token identity\n")
    pairs = [  # label, names of the two sides, runs, clips, setups whose forced pass explains a difference
        ("fp32: plain vs speculative", ("plain", "spec"), fp32.runs["plain"], fp32.runs["spec"], chosen, [fp32, bf16]),
        ("bf16: plain vs speculative", ("plain", "spec"), bf16.runs["plain"], bf16.runs["spec"], chosen, [bf16, fp32]),
        ("fp32 plain vs bf16 plain", ("fp32", "bf16"), fp32.runs["plain"], bf16.runs["plain"], chosen, [fp32, bf16]),
    ]
    if head_batches:
        p32, s32 = bf16.runs["plain32"], bf16.runs["spec32"]
        pairs += [
            ("bf16 with fp32 head: plain vs speculative", ("plain", "spec"), p32, s32, head_clips, [bf16]),
            (
                "bf16 plain vs bf16 plain with fp32 head",
                ("bf16", "bf16+head32"),
                bf16.runs["plain"],
                p32,
                head_clips,
                [],
            ),
            (
                "fp32 plain vs bf16 plain with fp32 head",
                ("fp32", "bf16+head32"),
                fp32.runs["plain"],
                p32,
                head_clips,
                [],
            ),
        ]
    found = []
    for label, sides, a, b, sub, ss in pairs:
        differ, stats = compare(a, b, sub)
        print(f"- {label}: {describe_stats(stats)}")
        if differ:
            found.append((label, sides, a, b, differ, ss))
    for label, (la, lb), a, b, differ, ss in found:
        print(f"\n### {label}: the differing pieces")
        show_diffs(la, lb, a, b, differ, names, ss, tok, ts_begin)

    if args.probe_batches:
        flipped = [
            b
            for b in batches
            if any(bf16.runs["plain"].tokens[i] != bf16.runs["spec"].tokens[i] for i in range(b, min(b + size, n)))
        ]
        probe_batches = (flipped + [b for b in batches if b not in flipped])[: args.probe_batches]
        print("\n## Shape probe: teacher-forced plain tokens, 1 position per call vs 5 per call\n")
        for b in probe_batches:
            batch = list(range(b, min(b + size, n)))
            for s in setups:
                print(f"- clips {batch[0]}..{batch[-1]}, {s.dtype}: {probe(s, batch, s.runs['plain'])}")
    print(f"\ntotal wall {time.perf_counter() - t_start:.0f} s; load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
