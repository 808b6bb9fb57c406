"""A lean Whisper decoder forward with a preallocated KV cache and per-row positions.

It runs the weights of a transformers Whisper decoder (``WhisperForConditionalGeneration``
or a decoder-only ``WhisperForCausalLM`` draft, int8-quantized or not) without
transformers' cache objects and generate loop:

- the self-attention cache is one tensor per layer, ``[rows, heads, capacity, head_dim]``,
  allocated once per batch; the cross-attention keys/values are computed once per batch;
- every row has its own length. A call feeds ``Q`` tokens per row starting at that
  row's own position (``start[b]``), writes their keys/values there and attends
  causally to the row's own prefix — so a row that rejected drafts early simply
  rewinds its length, and the stale entries past it are overwritten by the next
  call (no holes, nothing to copy);
- rows that finish are dropped with ``keep`` (caches are sliced once), so a long
  piece does not drag seven finished ones through every step.

The arithmetic is the one of transformers' ``WhisperAttention`` (query scaled
before the product, sdpa with scale 1); ``tests/test_speculative.py`` checks the
logits against transformers' own forward.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


class LeanDecoder:
    def __init__(self, model: torch.nn.Module):
        """``model``: WhisperForConditionalGeneration or WhisperForCausalLM (its decoder and proj_out are used)."""
        decoder = model.get_decoder() if hasattr(model, "get_decoder") else model.model.decoder
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

    @property
    def dtype(self) -> torch.dtype:
        return self.decoder.embed_tokens.weight.dtype

    def _split(self, x: torch.Tensor) -> torch.Tensor:  # [B, T, D] -> [B, H, T, hd]
        return x.view(x.shape[0], x.shape[1], self.heads, self.head_dim).transpose(1, 2)

    @torch.inference_mode()
    def start(self, encoded: torch.Tensor, capacity: int) -> None:
        """New batch: cross-attention keys/values from the encoder output, an empty self-attention cache."""
        encoded = encoded.to(self.dtype)
        rows = encoded.shape[0]
        self.cross_k = [self._split(layer.encoder_attn.k_proj(encoded)).contiguous() for layer in self.layers]
        self.cross_v = [self._split(layer.encoder_attn.v_proj(encoded)).contiguous() for layer in self.layers]
        shape = (rows, self.heads, capacity, self.head_dim)
        self.self_k = [torch.zeros(shape, dtype=self.dtype, device=encoded.device) for _ in self.layers]
        self.self_v = [torch.zeros(shape, dtype=self.dtype, device=encoded.device) for _ in self.layers]

    def keep(self, rows: torch.Tensor) -> None:
        """Keep only these rows (indices into the current batch)."""
        for cache in (self.self_k, self.self_v, self.cross_k, self.cross_v):
            cache[:] = [t.index_select(0, rows) for t in cache]

    def release(self) -> None:
        self.self_k, self.self_v, self.cross_k, self.cross_v = [], [], [], []

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
        """Logits [B, Q, V] for tokens ``ids`` [B, Q] placed at positions start[b] .. start[b]+Q-1."""
        rows, q = ids.shape
        offsets = torch.arange(q, device=ids.device)
        pos = start[:, None] + offsets  # [B, Q]
        emb = self.decoder.embed_positions.weight[pos.clamp(max=self.max_positions - 1)]
        x = self.decoder.embed_tokens(ids) + emb
        width = int(pos.max()) + 1
        keys = torch.arange(width, device=ids.device)
        mask = (keys[None, None, :] <= pos[:, :, None])[:, None]  # [B, 1, Q, width]: causal, per row
        index = pos[:, None, :, None].expand(rows, self.heads, q, self.head_dim)
        for i, layer in enumerate(self.layers):
            attn = layer.self_attn
            h = layer.self_attn_layer_norm(x)
            query = self._split(attn.q_proj(h) * self.scaling)
            self.self_k[i].scatter_(2, index, self._split(attn.k_proj(h)))
            self.self_v[i].scatter_(2, index, self._split(attn.v_proj(h)))
            out = F.scaled_dot_product_attention(query, self.self_k[i][:, :, :width], self.self_v[i][:, :, :width],
                                                 attn_mask=mask, scale=1.0)
            x = x + attn.out_proj(out.transpose(1, 2).reshape(rows, q, -1))
            cross = layer.encoder_attn
            h = layer.encoder_attn_layer_norm(x)
            query = self._split(cross.q_proj(h) * self.scaling)
            out = F.scaled_dot_product_attention(query, self.cross_k[i], self.cross_v[i], scale=1.0)
            x = x + cross.out_proj(out.transpose(1, 2).reshape(rows, q, -1))
            h = layer.final_layer_norm(x)
            x = x + layer.fc2(layer.activation_fn(layer.fc1(h)))
        return self.proj_out(self.decoder.layer_norm(x))
