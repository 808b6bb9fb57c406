"""What decides a draft's speed, measured through podscribe's own speculative loop: tokens per main call on
held-out pieces (each main call commits the accepted drafts plus its own token), and the cost of a draft step
relative to a main step (one token, batch 1, the runtime's compute type)."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import torch

from ..decode.kv_cache import KVCacheDecoder
from ..decode.rules import WhisperRules
from ..decode.speculative import DraftPolicy, greedy
from ..models.draft import DRAFT_KEY, apply_draft_vocab


@dataclass
class Evaluation:
    step: int
    tokens_per_main_call: float  # 1.0 is plain decoding
    drafted: int
    accepted: int
    step_cost_ratio: float  # draft step / main step, one token at batch 1
    pieces: int

    def describe(self) -> str:
        rate = self.accepted / self.drafted if self.drafted else 0.0
        return (
            f"step {self.step}: {self.tokens_per_main_call:.2f} tokens per main call "
            f"({rate:.0%} of {self.drafted} drafts accepted, {self.pieces} held-out pieces), "
            f"draft/main step cost {self.step_cost_ratio:.2f}"
        )


def inference_copy(draft: torch.nn.Module, vocab: list[int] | None, runtime) -> torch.nn.Module:
    """The draft as ``--assistant`` would load it: its reduced projection, the main model's compute type."""
    from ..backend.quantize import quantize

    model = copy.deepcopy(draft).eval()
    info = dict(getattr(model.config, DRAFT_KEY, None) or {})
    info["vocab"] = vocab
    setattr(model.config, DRAFT_KEY, info)
    model = apply_draft_vocab(model)
    if runtime.int8:
        quantize(model, "int8")
    elif runtime.weight_int8:
        quantize(model, "weight_only", runtime.dtype)
    else:
        model.to(runtime.dtype)
    return model


@torch.inference_mode()
def evaluate(models, draft_model, held_out: list[tuple[torch.Tensor, list[int]]], step: int, batch: int = 4):
    """``held_out``: (encoder output [frames, width], prompt) per piece; the main model decides every token."""
    main = models.main
    rules = WhisperRules(main.generation_config, main.config.vocab_size, True, models.runtime.device)
    max_length = main.generation_config.max_length or main.config.max_target_positions
    main_dec, draft_dec = KVCacheDecoder(main), KVCacheDecoder(draft_model, exact=False)
    policy = DraftPolicy()
    calls = committed = drafted = accepted = 0
    for i in range(0, len(held_out), batch):
        part = held_out[i : i + batch]
        by_prompt: dict[tuple, list] = {}
        for enc, prompt in part:
            by_prompt.setdefault(tuple(prompt), []).append(enc)
        for prompt, encs in by_prompt.items():
            enc = torch.stack(encs).to(main_dec.dtype)
            limit = min(max_length + len(prompt), main.config.max_target_positions)  # a first pass's, as Generator's
            capacity = limit + policy.max_draft + 2
            main_dec.start(enc, capacity)
            draft_dec.start(enc, capacity)
            prompts = torch.tensor([list(prompt)] * len(encs), device=enc.device)
            out = greedy(main_dec, prompts, rules, limit, draft_dec, policy)
            main_dec.release()
            draft_dec.release()
            calls += sum(s.main_calls for s in out.stats)
            drafted += sum(s.drafted for s in out.stats)
            accepted += sum(s.accepted for s in out.stats)
            committed += sum(len(t) + f for t, f in zip(out.tokens, out.finished))
    ratio = step_cost_ratio(main_dec, draft_dec, held_out[0][0], held_out[0][1]) if held_out else 0.0
    return Evaluation(step, committed / max(1, calls), drafted, accepted, ratio, len(held_out))


def step_cost_ratio(main_dec: KVCacheDecoder, draft_dec: KVCacheDecoder, enc, prompt, steps: int = 24) -> float:
    """Median time of a one-token draft step over a one-token main step (batch 1, after a warm-up)."""

    def time_steps(dec: KVCacheDecoder) -> float:
        dec.start(enc[None].to(dec.dtype), len(prompt) + steps + 4)
        ids = torch.tensor([prompt])
        dec.forward(ids, torch.zeros(1, dtype=torch.long))
        token = ids[:, -1:]
        times = []
        for n in range(steps):
            t0 = time.perf_counter()
            dec.forward(token, torch.tensor([len(prompt) + n]))
            times.append(time.perf_counter() - t0)
        dec.release()
        return sorted(times[4:])[len(times[4:]) // 2]

    return time_steps(draft_dec) / time_steps(main_dec)
