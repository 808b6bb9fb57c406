"""The Whisper decoder forward with a preallocated per-row KV cache (``KVCacheDecoder``).

It runs the weights of a transformers Whisper decoder (``WhisperForConditionalGeneration``
or a decoder-only ``WhisperForCausalLM`` draft, int8-quantized or not) without
transformers' cache objects and generate loop:

- the self-attention cache is one tensor per layer, ``[rows, heads, capacity, head_dim]``,
  allocated once per batch; the cross-attention keys/values (``CrossKV``) are projected once per batch
  of pieces and read by every pass over it: the no-speech probe, the decoding loop and the scoring pass
  for the rows the loop did not score (decision 0056). Each projected its own before: 3 x 12 projections of
  1500 frames per piece, a visible share of a piece's time (decision record 0030);
- every row has its own length. A call feeds ``Q`` tokens per row starting at that
  row's own position (``start[b]``), writes their keys/values there and attends
  causally to the row's own prefix — so a row that rejected drafts early simply
  rewinds its length, and the stale entries past it are overwritten by the next
  call (no holes, nothing to copy);
- rows that finish are dropped with ``keep`` (the rows left move to the front of the self-attention
  cache, in place), so a long piece does not drag seven finished ones through every step. The
  cross-attention rows never move (they may be the batch's shared ones): the rows left attend to them in
  runs of neighbours, one call a run (``_cross_attend``).

The arithmetic is the one of transformers' ``WhisperAttention`` (query scaled
before the product, sdpa with scale 1); ``tests/test_speculative.py`` checks the
logits against transformers' own forward. The modules' layout it reads is checked when it is built
(``backend/hf_internals/attention.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..backend.hf_internals.attention import check_attention_layout, decoder_of
from ..backend.quantize import INT8, Int8Linear, dequantized, fast_linear, kind_of, quantize_like
from ..facts.runtime import cpu_has_bf16_units


def fused_qkv(attn: torch.nn.Module) -> torch.nn.Module:
    """One projection for query (pre-scaled), key and value: one call instead of three (drafts only:
    the fused product is not bit-identical to three separate ones)."""
    parts = [(attn.q_proj, attn.scaling), (attn.k_proj, 1.0), (attn.v_proj, 1.0)]
    weights, biases = [], []
    for linear, scale in parts:
        w, b = dequantized(linear)
        weights.append(w * scale)
        biases.append((b if b is not None else torch.zeros(w.shape[0], device=w.device)) * scale)
    # made where the weights are: on CUDA a zero bias on the CPU stopped every draft (the first GPU run)
    fused = torch.nn.Linear(weights[0].shape[1], 3 * weights[0].shape[0], device=weights[0].device)
    with torch.no_grad():
        fused.weight.copy_(torch.cat(weights))
        fused.bias.copy_(torch.cat(biases))
    return quantize_like(fused, attn.q_proj)  # int8 as the draft's own layers are (a draft: per tensor is fine)


PROJECT_ROWS = 4  # rows of a batch's cross-attention keys projected at a time on the CPU (``CrossKV.project``)


@dataclass
class CrossKV:
    """A batch's cross-attention keys and values: per decoder layer one ``[rows, heads, frames, head_dim]``
    tensor each, in the order of the batch's rows."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]

    @classmethod
    @torch.inference_mode()
    def project(cls, model: torch.nn.Module, encoded: torch.Tensor, dtype: torch.dtype | None = None) -> CrossKV:
        """The keys and values of ``model``'s decoder layers over ``encoded`` [rows, frames, width], as
        transformers' ``WhisperAttention`` projects them (then cast to ``dtype``, the model's by default).
        On the CPU ``PROJECT_ROWS`` rows at a time into the batch's tensors (``project_into``): every layer's
        product then reads a few rows' encoder states that stay in the cache (16 rows' are 49 MB of float32, read
        12 times: base's 16 rows took 0.67 s in one product, 0.44 s four at a time; int8's rows are exact either
        way)."""
        rows = encoded.shape[0]
        if encoded.device.type != "cpu" or rows <= PROJECT_ROWS:
            keys, values = [], []
            for k, v in _projections(model, encoded):
                keys.append((k if dtype is None else k.to(dtype)).contiguous())
                values.append((v if dtype is None else v.to(dtype)).contiguous())
            return cls(keys, values)
        decoder = decoder_of(model)
        attn = decoder.layers[0].encoder_attn
        shape = (rows, attn.num_heads, encoded.shape[1], attn.head_dim)
        made = {"dtype": dtype or decoder.embed_tokens.weight.dtype, "device": encoded.device}
        out = cls(
            [torch.empty(shape, **made) for _ in decoder.layers], [torch.empty(shape, **made) for _ in decoder.layers]
        )
        for at in range(0, rows, PROJECT_ROWS):
            out.project_into(model, encoded[at : at + PROJECT_ROWS], list(range(at, min(at + PROJECT_ROWS, rows))))
        return out

    @torch.inference_mode()
    def project_into(self, model: torch.nn.Module, encoded: torch.Tensor, rows: list[int]) -> None:
        """Overwrite ``rows`` with ``model``'s keys and values over ``encoded`` [len(rows), frames, width], in
        place, a layer at a time: a later pass's window takes its rows' room instead of a second batch-sized
        copy beside the batch's (that stacked on an hour's peak; decision record 0030)."""
        for layer, (k, v) in enumerate(_projections(model, encoded)):
            for j, b in enumerate(rows):
                self.keys[layer][b].copy_(k[j])
                self.values[layer][b].copy_(v[j])

    def rows(self, part: slice) -> CrossKV:
        """The keys and values of a run of rows (views, no copy)."""
        return CrossKV([k[part] for k in self.keys], [v[part] for v in self.values])

    @property
    def n_rows(self) -> int:
        return self.keys[0].shape[0]

    @staticmethod
    def bytes_a_row(model: torch.nn.Module) -> int:
        """What one row's keys and values take for ``model``'s decoder (``project``'s dtype, the model's)."""
        decoder = decoder_of(model)
        weight = decoder.embed_tokens.weight
        frames = model.config.max_source_positions
        return 2 * len(decoder.layers) * frames * weight.shape[1] * weight.element_size()


class KVCacheDecoder:
    def __init__(self, model: torch.nn.Module, exact: bool = True):
        """``model``: WhisperForConditionalGeneration or WhisperForCausalLM (its decoder and proj_out are used).

        ``exact=False`` (drafts): fused query/key/value projections, and on CPUs with bf16 matrix units (AMX)
        the cross-attention keys/values in bf16 (half the bytes read per step). A draft only proposes;
        the main model, always exact, decides. Not on other CPUs, though oneDNN reports bf16 support there too:
        on a 2-core AVX-512 CPU with AVX512-BF16 but no AMX, torch's bf16 attention over 1,500 frames took
        4.8-5x the float32 time at 1-4 rows (0.95 ms against 0.19 ms a layer at one row; 2026-12-06), and a
        draft paid it at every step.
        """
        decoder = check_attention_layout(model)  # the transformers modules whose weights it reads
        self.decoder = decoder
        self.proj_out = model.proj_out
        self.layers = list(decoder.layers)
        attn = self.layers[0].self_attn
        self.heads, self.head_dim = attn.num_heads, attn.head_dim
        self.scaling = attn.scaling
        self.max_positions = decoder.embed_positions.weight.shape[0]
        self.self_k: list[torch.Tensor] = []
        self.self_v: list[torch.Tensor] = []
        self.cross_k: list[torch.Tensor] = []
        self.cross_v: list[torch.Tensor] = []
        qkv = None if exact else [fused_qkv(layer.self_attn) for layer in self.layers]
        self.ops = [
            _LayerOps(layer, None if qkv is None else qkv[i], self.scaling) for i, layer in enumerate(self.layers)
        ]
        self.final_norm = _norm(decoder.layer_norm)
        self.project = fast_linear(self.proj_out)
        # a distilled draft with a reduced vocabulary (models/draft.py): its logits go back to the full width
        self.vocab_ids = getattr(model, "draft_vocab_ids", None)
        self.vocab_size = model.config.vocab_size
        self.cross_dtype = self.dtype
        self.exact = exact
        # every product row-exact (int8, ``Int8Linear``) and attention one position at a time (``exact``, CPU): a
        # verify step's logits are then a one-token step's bits, so are the loop's scores (``speculative.greedy``);
        # float32's products are blocked by their number of rows, which moves a last bit (never a token in the tests)
        products = [m for m in [*decoder.modules(), self.proj_out] if isinstance(m, torch.nn.Linear) or kind_of(m)]
        self.row_exact = exact and all(kind_of(m) == INT8 for m in products)
        self.on_forward: Callable[[], None] | None = None  # asked before every call (a second chance's stop)
        if not exact and self.dtype == torch.float32 and cpu_has_bf16_units():
            self.cross_dtype = torch.bfloat16

    @property
    def dtype(self) -> torch.dtype:
        return self.decoder.embed_tokens.weight.dtype

    def _split(self, x: torch.Tensor) -> torch.Tensor:  # [B, T, D] -> [B, H, T, hd]
        return x.view(x.shape[0], x.shape[1], self.heads, self.head_dim).transpose(1, 2)

    @torch.inference_mode()
    def start(
        self, encoded: torch.Tensor, capacity: int, cross: CrossKV | None = None, cross_rows: list[int] | None = None
    ) -> None:
        """New batch: cross-attention keys/values from the encoder output — or ``cross``, this model's own
        already projected, read and never written: its rows ``cross_rows`` (ascending; all by default) are the
        batch's rows — and an empty self-attention cache."""
        rows = encoded.shape[0]
        if cross is None:
            cross, cross_rows = CrossKV.project(self.decoder, encoded, self.cross_dtype), None
        cross_rows = list(range(rows)) if cross_rows is None else list(cross_rows)
        if len(cross_rows) != rows or max(cross_rows) >= cross.n_rows or cross.keys[0].dtype != self.cross_dtype:
            raise ValueError("cross-attention keys/values of other rows or another dtype")
        self.cross_k, self.cross_v = list(cross.keys), list(cross.values)
        self.cross_rows = cross_rows
        self.cross_runs: list[tuple[int, int, int]] | int | None = _runs(cross_rows)  # see _runs
        shape = (rows, self.heads, capacity, self.head_dim)
        self.self_k = [torch.zeros(shape, dtype=self.dtype, device=encoded.device) for _ in self.layers]
        self.self_v = [torch.zeros(shape, dtype=self.dtype, device=encoded.device) for _ in self.layers]

    @torch.inference_mode()
    def keep(self, rows: torch.Tensor) -> None:
        """Keep only these rows (ascending indices into the current batch). They move to the front of the caches
        in place and the caches become views of their first rows: slicing out copies would hold the cross-attention
        keys/values twice for a moment, a peak of every batch (decision record 0009). The
        cross-attention rows stay where they are (they may be shared): the rows left read them in runs."""
        kept = rows.tolist()
        assert kept == sorted(kept), "rows must be ascending: a row moves only towards the front"
        moves = [(to, src) for to, src in enumerate(kept) if to != src]
        for cache in (self.self_k, self.self_v):
            for t in cache:
                for to, src in moves:
                    t[to].copy_(t[src])
            cache[:] = [t[: len(kept)] for t in cache]
        self.cross_rows = [self.cross_rows[b] for b in kept]
        self.cross_runs = _runs(self.cross_rows)

    @torch.inference_mode()
    def beams(self, n: int) -> None:
        """Right after ``start`` of one row, before any token: ``n`` rows (a beam search's beams) that all read that
        row's cross-attention keys and values, one copy for all (``_shared_cross_attend``)."""
        if len(self.cross_rows) != 1:
            raise ValueError("beams are made from one row")
        shape = (n, *self.self_k[0].shape[1:])
        like = self.self_k[0]
        self.self_k = [torch.zeros(shape, dtype=like.dtype, device=like.device) for _ in self.layers]
        self.self_v = [torch.zeros(shape, dtype=like.dtype, device=like.device) for _ in self.layers]
        self.cross_rows = self.cross_rows * n
        self.cross_runs = _runs(self.cross_rows)

    @torch.inference_mode()
    def reorder(self, parents: torch.Tensor) -> None:
        """Each row's self-attention cache becomes its parent's (``parents[b]``, rows of the current batch, repeats
        allowed): a beam search's step. The cross-attention rows stay (the beams share one)."""
        for cache in (self.self_k, self.self_v):
            cache[:] = [t.index_select(0, parents) for t in cache]

    def release(self) -> None:
        self.self_k, self.self_v, self.cross_k, self.cross_v = [], [], [], []
        self.cross_runs, self.cross_rows = None, []

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, start: torch.Tensor, one_at_a_time: bool = False) -> torch.Tensor:
        """Logits [B, Q, V] for tokens ``ids`` [B, Q] placed at positions start[b] .. start[b]+Q-1.

        ``one_at_a_time`` (a verify step): on the CPU, each position's attention is its own call, shaped as a
        one-token step computes it. The attention kernels' sums can differ in the last bit with the number of
        queries, and with the number of keys they run over, masked ones too; in float32 that never moved a token
        in the tests, but int8 quantizes each position's activations, and a last-bit difference that crosses a
        rounding step becomes a whole quantization step (base int8 with its self-draft flipped timestamp
        near-ties until this). So on the CPU the main model's one-token and verify steps attend each row over
        exactly its own keys (``_attend``): rows at one position share a call, and a row's result never depends
        on how far the rows beside it are. Not on CUDA: half precision is not exact across shapes anyway (its
        matrix products are not), and there each call is a kernel launch."""
        if self.on_forward is not None:
            self.on_forward()
        rows, q = ids.shape
        offsets = torch.arange(q, device=ids.device)
        pos = start[:, None] + offsets  # [B, Q]
        emb = self.decoder.embed_positions.weight[pos.clamp(max=self.max_positions - 1)]
        x = self.decoder.embed_tokens(ids) + emb
        row_of = torch.arange(rows, device=ids.device)[:, None].expand(rows, q)  # with ``pos``: where each key goes
        split = self._split
        singly = one_at_a_time and q > 1 and ids.device.type == "cpu"
        own = self.exact and ids.device.type == "cpu" and (q == 1 or singly)
        if own:
            groups = [_rows_at(pos[:, j]) for j in range(q)]  # per query position: (width, rows)
        else:  # one call over the longest row's keys, a causal mask per row
            width = int(pos.max()) + 1
            mask = (torch.arange(width, device=ids.device)[None, None, :] <= pos[:, :, None])[:, None]  # [B,1,Q,W]
        for i, op in enumerate(self.ops):
            h = op.norm1(x)
            if op.qkv is not None:  # a draft's fused projection: the query scaled in its weights
                query, key, value = op.qkv(h).chunk(3, dim=-1)
            elif op.stacked is not None:  # int8: one product, each part's own bits
                query, key, value = op.stacked(h).chunk(3, dim=-1)
                query = query * self.scaling
            else:
                query, key, value = op.q(h) * self.scaling, op.k(h), op.v(h)
            # written through a [B, capacity, H, hd] view: index_put_ (scatter_ is far slower in bf16 on the CPU)
            self.self_k[i].transpose(1, 2).index_put_((row_of, pos), key.reshape(rows, q, self.heads, self.head_dim))
            self.self_v[i].transpose(1, 2).index_put_((row_of, pos), value.reshape(rows, q, self.heads, self.head_dim))
            k_, v_ = self.self_k[i], self.self_v[i]
            query = split(query)
            if own:
                out = torch.cat([_attend(query[:, :, j : j + 1], k_, v_, g) for j, g in enumerate(groups)], dim=2)
            else:
                out = F.scaled_dot_product_attention(
                    query, k_[:, :, :width], v_[:, :, :width], attn_mask=mask, scale=1.0
                )
            x = x + op.o(out.transpose(1, 2).reshape(rows, q, -1))
            query = split(op.cross_q(op.norm2(x)) * self.scaling).to(self.cross_dtype)
            ck, cv, runs = self.cross_k[i], self.cross_v[i], self.cross_runs
            if singly:
                out = torch.cat([_cross_attend(query[:, :, j : j + 1], ck, cv, runs) for j in range(q)], dim=2)
            else:
                out = _cross_attend(query, ck, cv, runs)
            x = x + op.cross_o(out.to(x.dtype).transpose(1, 2).reshape(rows, q, -1))
            x = x + op.fc2(op.act(op.fc1(op.norm3(x))))
        logits = self.project(self.final_norm(x))
        if self.vocab_ids is None:
            return logits
        full = logits.new_full((*logits.shape[:-1], self.vocab_size), float("-inf"))  # never proposed
        return full.index_copy_(-1, self.vocab_ids, logits)


class _LayerOps:
    """A decoder layer's weights as plain functions: no module dispatch on the hot path."""

    def __init__(self, layer, qkv, scaling: float):
        attn, cross = layer.self_attn, layer.encoder_attn
        self.norm1, self.norm2, self.norm3 = (
            _norm(n) for n in (layer.self_attn_layer_norm, layer.encoder_attn_layer_norm, layer.final_layer_norm)
        )
        self.q, self.k, self.v, self.o = (
            fast_linear(m) for m in (attn.q_proj, attn.k_proj, attn.v_proj, attn.out_proj)
        )
        self.qkv = None if qkv is None else fast_linear(qkv)
        # the main model's int8 query, key and value as one layer (exact: Int8Linear.stacked); float products
        # are blocked by their width, so stacking their weights could change a last bit: not those
        parts = (attn.q_proj, attn.k_proj, attn.v_proj)
        self.stacked = Int8Linear.stacked(list(parts)) if all(type(m) is Int8Linear for m in parts) else None
        self.cross_q, self.cross_o = fast_linear(cross.q_proj), fast_linear(cross.out_proj)
        self.fc1, self.fc2 = fast_linear(layer.fc1), fast_linear(layer.fc2)
        self.act = layer.activation_fn


def _rows_at(at: torch.Tensor) -> list[tuple[int, torch.Tensor | None]]:
    """The rows of one query position grouped by their key count (position + 1): ``(width, rows)``, rows None
    when every row has that width (one call, no gather)."""
    widths = (at + 1).tolist()
    if len(set(widths)) == 1:
        return [(widths[0], None)]
    return [
        (w, torch.tensor([b for b, x in enumerate(widths) if x == w], device=at.device)) for w in sorted(set(widths))
    ]


def _attend(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, groups: list) -> torch.Tensor:
    """One query position per row [B, H, 1, hd], each row attending over exactly its own keys: no mask, no
    call over keys a row does not have (the kernel's sums depend on the width; a row's alone, in a batch of
    rows at its position or gathered with them are bit-identical)."""
    if groups[0][1] is None:
        width = groups[0][0]
        return F.scaled_dot_product_attention(query, keys[:, :, :width], values[:, :, :width], scale=1.0)
    out = torch.empty_like(query)
    for width, rows in groups:
        out[rows] = F.scaled_dot_product_attention(
            query[rows], keys[rows, :, :width], values[rows, :, :width], scale=1.0
        )
    return out


def _projections(model: torch.nn.Module, encoded: torch.Tensor):
    """Per decoder layer, its cross-attention keys and values over ``encoded`` as [rows, heads, frames,
    head_dim] views, as transformers' ``WhisperAttention`` projects them."""
    decoder = decoder_of(model)
    encoded = encoded.to(decoder.embed_tokens.weight.dtype)
    for layer in decoder.layers:
        attn = layer.encoder_attn
        shape = (encoded.shape[0], encoded.shape[1], attn.num_heads, attn.head_dim)
        yield attn.k_proj(encoded).view(shape).transpose(1, 2), attn.v_proj(encoded).view(shape).transpose(1, 2)


def _runs(rows: list[int]) -> list[tuple[int, int, int]] | int | None:
    """``rows`` (ascending indices into the cross-attention rows) as runs of neighbours: (first row, first cross
    row, count); None when they are all the cross rows' first ones in order (one call, no slicing); the cross row
    itself (an int) when several rows all read one (a beam search's beams)."""
    if rows == list(range(len(rows))):
        return None
    if len(set(rows)) == 1:
        return rows[0]
    runs: list[list[int]] = []
    for at, src in enumerate(rows):
        if runs and runs[-1][1] + runs[-1][2] == src:
            runs[-1][2] += 1
        else:
            runs.append([at, src, 1])
    return [tuple(r) for r in runs]


def _cross_attend(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, runs) -> torch.Tensor:
    """Cross-attention of the live rows [B, H, Q, hd] over their rows of the keys/values: one call, or one per
    run of neighbouring rows (views: a row's result is the same alone or beside others, as in ``_attend``)."""
    if runs is None:
        return F.scaled_dot_product_attention(query, keys[: query.shape[0]], values[: query.shape[0]], scale=1.0)
    if isinstance(runs, int):
        return _shared_cross_attend(query, keys[runs : runs + 1], values[runs : runs + 1])
    return torch.cat(
        [
            F.scaled_dot_product_attention(query[at : at + n], keys[src : src + n], values[src : src + n], scale=1.0)
            for at, src, n in runs
        ]
    )


def _shared_cross_attend(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Rows [B, H, Q, hd] that all read one row of keys and values [1, H, F, hd] (beams): the one copy viewed
    once per row (no copy held), each row computed as it would be alone (its queries as one row's: as one
    call of B x Q queries they may differ in the last bit, which int8's next product can make a whole step)."""
    rows = query.shape[0]
    return F.scaled_dot_product_attention(
        query, keys.expand(rows, -1, -1, -1), values.expand(rows, -1, -1, -1), scale=1.0
    )


def _norm(module: torch.nn.LayerNorm):
    shape, weight, bias, eps = module.normalized_shape, module.weight, module.bias, module.eps
    return lambda x: F.layer_norm(x, shape, weight, bias, eps)
