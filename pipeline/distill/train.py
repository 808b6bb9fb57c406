"""The distillation run: label, build the draft, train it with ``accelerate``, evaluate, save.

Loss per generated position: ``kl_weight`` x KL(main || draft) over the main model's top-k tokens (those in
the draft's vocabulary, renormalised) + ``ce_weight`` x cross-entropy on the main model's greedy token.
The encoder is the main model's and frozen (its outputs come from the cache); the draft's position
embeddings stay the main model's.

**Resumable, and the same weights as an uninterrupted run.** The data order is a function of (seed,
epoch) alone (``data.batches``) and step ``s`` always trains on the same micro-batches; a checkpoint
(``training/checkpoint.pt``, written atomically every ``checkpoint_every`` steps) holds the weights, the
optimizer and scheduler states and the step. A run started again on the same ``--out`` with the same
options continues from it; nothing else is random (Whisper's dropout is 0; the draft is made from the main
model deterministically). A checkpoint made under other options or other labels is refused (exit 2).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from ..facts.events import NOTHING, Events
from ..models.draft import layer_choice, make_draft, project, reduced_vocab, save_draft
from . import data
from .data import DistillInputError, Example
from .evaluate import Evaluation, evaluate, inference_copy
from .options import DistillOptions

TRAINING = "training"  # the run's own folder inside --out: labels cache, checkpoint


@dataclass
class DistillResult:
    out_dir: Path
    steps: int
    train_pieces: int
    held_out_pieces: int
    vocab_size: int
    train_s: float
    label_s: float
    evaluations: list[Evaluation] = field(default_factory=list)


def distill(
    sources: list[str],
    out_dir: Path,
    options: DistillOptions,
    echo=print,
    remember: bool = True,
    events: Events = NOTHING,
) -> DistillResult:
    """Everything ``podscribe distill`` does (``events``: told each checkpoint written). Bad input raises
    ``DistillInputError`` (exit 2) before anything is written, or — a SOURCE found to hold no speech only once it
    was heard — with what was written removed."""
    from ..models.registry import resolve

    out_dir = Path(out_dir).expanduser().absolute()
    if out_dir.exists() and (not out_dir.is_dir() or (any(out_dir.iterdir()) and not (out_dir / TRAINING).is_dir())):
        raise DistillInputError(f"--out {out_dir} exists and is not an empty folder or a draft being distilled")
    main_ref = resolve(options.main, options.cache_dir)
    units = data.inspect_sources(sources, main_ref.fingerprint)
    created = not out_dir.exists()
    training = out_dir / TRAINING
    made_training = not training.exists()
    try:
        return _run(units, out_dir, main_ref, options, echo, remember, events)
    except DistillInputError:
        if created:
            shutil.rmtree(out_dir, ignore_errors=True)
        elif made_training:
            shutil.rmtree(training, ignore_errors=True)
        raise


def _load(main_ref, options: DistillOptions):
    """The main model twice over: float32 weights to make the draft from, and the model as jobs run it."""
    from transformers import WhisperForConditionalGeneration

    from ..backend.quantize import quantize
    from ..facts.runtime import pick_runtime
    from ..models.load import Models, _from_pretrained, _processor

    runtime = pick_runtime(options.device, options.compute_type)
    float_runtime = pick_runtime(options.device, "float32")
    main = _from_pretrained(WhisperForConditionalGeneration, main_ref, float_runtime)
    processor = _processor(main_ref)
    draft = make_draft(main, options.layers)
    if runtime.int8:
        quantize(main, "int8")
    elif runtime.weight_int8:
        quantize(main, "weight_only", runtime.dtype)
    else:
        main.to(runtime.dtype)
    alone = Models(
        main=main, processor=processor, assistant=None, main_ref=main_ref, assistant_name=None, runtime=runtime
    )
    return alone, draft


def _run(
    units, out_dir: Path, main_ref, options: DistillOptions, echo, remember: bool, events: Events
) -> DistillResult:
    from accelerate import Accelerator
    from tqdm import tqdm

    models, draft = _load(main_ref, options)
    training = out_dir / TRAINING
    cache = training / "labels"
    key = data.sources_key(units, main_ref.fingerprint, options)
    t0 = time.perf_counter()
    echo(f"labelling {len(units)} files with {main_ref.name} ({models.runtime.describe()}) ...")
    examples = data.label(units, models, options, cache, key, echo)
    label_s = time.perf_counter() - t0
    if not examples:
        raise DistillInputError("no speech in the SOURCEs: every piece was silent or had no voice; nothing to learn")
    held = data.split_by_file(sorted({e.file for e in examples}), options.holdout, options.seed)
    train = [e for e in examples if e.file not in held]
    held_out = [e for e in examples if e.file in held][: options.eval_pieces]
    if not train:
        raise DistillInputError("every file was held out: give more files, or --holdout 0")
    eot = models.tokens.eot
    vocab = reduced_vocab(data.token_counts(train, eot), options.vocab, draft.config.vocab_size, eot)
    steps = options.steps or max(1, math.ceil(options.epochs * len(train) / options.batch_size))
    echo(
        f"{len(train)} training pieces, {len(held_out)} held out ({len(held)} files), {steps} steps, "
        f"vocabulary {len(vocab) if vocab else draft.config.vocab_size}, layers {layer_choice(models.main.config.decoder_layers, options.layers)}"
    )

    torch.manual_seed(options.seed)
    accelerator = Accelerator(
        cpu=models.runtime.device.type == "cpu",
        mixed_precision=options.mixed_precision,
        gradient_accumulation_steps=options.grad_accum,
    )
    draft.model.decoder.embed_positions.weight.requires_grad_(False)
    params = [p for p in draft.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=options.lr, weight_decay=0.0)

    def lr_at(step: int) -> float:
        if step < options.warmup_steps:
            return (step + 1) / options.warmup_steps
        return max(0.0, (steps - step) / max(1, steps - options.warmup_steps))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    model, optimizer, scheduler = accelerator.prepare(draft, optimizer, scheduler)
    signature = {"labels": key, "options": _signature(options), "steps": steps}
    start_step, evaluations = _resume(training / "checkpoint.pt", accelerator, model, optimizer, scheduler, signature)
    if start_step:
        echo(f"resumed from step {start_step} (training/checkpoint.pt)")
    device = accelerator.device
    vocab_t = None if vocab is None else torch.tensor(vocab, device=device)
    to_small = None
    if vocab is not None:
        to_small = torch.full((draft.config.vocab_size,), -1, dtype=torch.long, device=device)
        to_small[vocab_t] = torch.arange(len(vocab), device=device)
    held_inputs = [(data.load_cached(cache, e)["encoded"].float(), e.prompt) for e in held_out]
    order = _step_batches(len(train), options, steps)
    micro = options.batch_size // options.grad_accum
    bar = tqdm(total=steps, initial=start_step, desc="distill", unit="step", disable=None)
    t1 = time.perf_counter()
    for step in range(start_step, steps):
        model.train()
        batch = order[step]
        for j in range(0, len(batch), micro):
            rows = [train[i] for i in batch[j : j + micro]]
            with accelerator.accumulate(model):
                loss = _loss(model, rows, cache, vocab_t, to_small, options, device, eot, accelerator)
                accelerator.backward(loss)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.3f}")
        done = step + 1
        if held_inputs and (done % options.eval_every == 0 or done == steps):
            result = evaluate(
                models, inference_copy(accelerator.unwrap_model(model), vocab, models.runtime), held_inputs, done
            )
            evaluations.append(result)
            bar.write(result.describe())
        if done % options.checkpoint_steps == 0 and done < steps:
            _checkpoint(
                training / "checkpoint.pt", done, accelerator, model, optimizer, scheduler, signature, evaluations
            )
            events.happened("checkpoint", "", done)
    bar.close()
    train_s = time.perf_counter() - t1
    final = accelerator.unwrap_model(model)
    info = {
        "main": main_ref.name,
        "main_sha256": main_ref.fingerprint,
        "layers": layer_choice(models.main.config.decoder_layers, options.layers),
        "vocab": vocab,
        "steps": steps,
        "seed": options.seed,
        "train_pieces": len(train),
        "held_out_pieces": len(held_out),
        "train_s": round(train_s, 1),
        "label_s": round(label_s, 1),
        "evaluations": [asdict(e) for e in evaluations],
    }
    save_draft(final, models.processor, out_dir, info)
    (training / "checkpoint.pt").unlink(missing_ok=True)
    if remember:  # for `models list` and `--assistant auto`
        from ..models.registry import remember_draft

        remember_draft(out_dir, main_ref, options.cache_dir)
    return DistillResult(
        out_dir,
        steps,
        len(train),
        len(held_out),
        len(vocab) if vocab else draft.config.vocab_size,
        train_s,
        label_s,
        evaluations,
    )


def _signature(options: DistillOptions) -> dict:
    keep = (
        "main",
        "layers",
        "vocab",
        "batch_size",
        "grad_accum",
        "lr",
        "warmup_steps",
        "kl_weight",
        "ce_weight",
        "seed",
        "holdout",
        "mixed_precision",
    )
    return {k: getattr(options, k) for k in keep}


def _step_batches(n: int, options: DistillOptions, steps: int) -> list[list[int]]:
    out: list[list[int]] = []
    epoch = 0
    while len(out) < steps:
        out += list(data.batches(n, options.batch_size, options.seed, epoch))
        epoch += 1
    return out[:steps]


def _loss(model, rows: list[Example], cache: Path, vocab_t, to_small, options, device, eot: int, accelerator):
    """KL to the main model's top-k distribution + cross-entropy on its tokens, over generated positions."""
    loaded = [data.load_cached(cache, e) for e in rows]
    seqs = [e.prompt + e.tokens for e in rows]
    width = max(map(len, seqs)) - 1
    ids = torch.tensor([s[:-1] + [eot] * (width - len(s) + 1) for s in seqs], device=device)
    enc = torch.stack([c["encoded"] for c in loaded]).to(device, torch.float32)
    with accelerator.autocast():
        hidden = model.model.decoder(input_ids=ids, encoder_hidden_states=enc).last_hidden_state
        logits = project(accelerator.unwrap_model(model), hidden, vocab_t).float()
    logp = logits.log_softmax(-1)
    total, n = logits.new_zeros(()), 0
    for b, (e, c) in enumerate(zip(rows, loaded)):
        p, k = len(e.prompt), len(e.tokens)
        row = logp[b, p - 1 : p - 1 + k]  # position p-1+t predicts tokens[t]
        target = torch.tensor(e.tokens, device=device)
        top_ids = c["top_ids"].long().to(device)
        top_logp = c["top_logp"].float().to(device)
        if to_small is not None:
            target = to_small[target]
            top_ids = to_small[top_ids]
        inside = top_ids >= 0
        teacher = top_logp.masked_fill(~inside, float("-inf")).log_softmax(-1)
        student = row.gather(1, top_ids.clamp(min=0))
        kl = (teacher.exp() * (teacher - student)).masked_fill(~inside, 0.0).sum(-1)
        known = target >= 0
        ce = -row.gather(1, target.clamp(min=0)[:, None])[:, 0].masked_fill(~known, 0.0)
        total = total + options.kl_weight * kl.sum() + options.ce_weight * ce.sum()
        n += k
    return total / max(1, n)


def _checkpoint(path: Path, step: int, accelerator, model, optimizer, scheduler, signature, evaluations) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(
        {
            "step": step,
            "signature": signature,
            "model": accelerator.unwrap_model(model).state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "evaluations": [asdict(e) for e in evaluations],
        },
        tmp,
    )
    os.replace(tmp, path)


def _resume(path: Path, accelerator, model, optimizer, scheduler, signature) -> tuple[int, list[Evaluation]]:
    if not path.is_file():
        return 0, []
    state = torch.load(path, weights_only=False)
    if state["signature"] != signature:
        raise DistillInputError(
            f"{path} was written by a run with other options or other data; distil into another --out, or "
            "repeat that run's options to resume it"
        )
    accelerator.unwrap_model(model).load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    return state["step"], [Evaluation(**e) for e in state["evaluations"]]


def report(result: DistillResult) -> str:
    last = result.evaluations[-1].describe() if result.evaluations else "no held-out pieces to evaluate on"
    return (
        json.dumps(
            {
                "draft": str(result.out_dir),
                "steps": result.steps,
                "train_pieces": result.train_pieces,
                "held_out_pieces": result.held_out_pieces,
                "vocab": result.vocab_size,
                "label_s": round(result.label_s, 1),
                "train_s": round(result.train_s, 1),
            }
        )
        + "\n"
        + last
    )
