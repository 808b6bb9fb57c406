"""int8 linear layers: the CPU compute type ``int8`` (int8 weights, activations quantized per token) and the
weight-only ones ``int8_float16`` / ``int8_bfloat16`` / ``int8_float32`` (any device; ``WeightInt8Linear``).

Why not ``torch.ao.quantization.quantize_dynamic`` as it is: its activation scale is one per *tensor*
(the min and max of the whole input). A row's result would then depend on the other rows fed with it:
on the other pieces of a batch (a resumed run with another ``--batch-size`` would decode other tokens)
and on the draft positions a speculative verify step feeds beside it (speculative output would stop
being the main model's own). CTranslate2, which faster-whisper's ``int8`` runs on, quantizes each row
with its own scale for this reason.

``Int8Linear`` gets per-row scales out of fbgemm's fast per-tensor kernel: every row is divided by its
own largest magnitude (so it lies in [-1, 1]), and one more row holding -1 and +1 is appended, so the
tensor's min and max — hence the quantization step and zero point — are the same fixed ones whatever
the other rows hold. The integer products are exact, the rescaling is per element: each row's output
is bit-for-bit the one it would have alone (``tests/test_models.py`` checks it). Weights are int8 per
output channel. The cost over the plain kernel is the row scaling and the extra row.

``WeightInt8Linear`` is CTranslate2's ``int8_float16`` idea without its int8 GEMM: weights stored int8 (one
scale per output channel, half the bytes of float16), multiplied in the activations' dtype after they are
dequantized. fbgemm is CPU only and torch has no fused weight-only int8 kernel on CUDA, so the weight is
dequantized per call: it halves the weights' memory, not the time of a step (a decoder step reads the int8
weight and writes and reads a float16 copy). Activations are never quantized, so a row's result does not
depend on the rows beside it any more than with float weights: the guarantees of the activations' dtype hold.
"""

from __future__ import annotations

import threading

import torch

_TINY = 1e-12  # an all-zero row keeps scale 0 and yields the bias alone
_local = threading.local()


def _workspace(n_rows: int, n_cols: int) -> torch.Tensor:
    """One scratch buffer per thread, grown as needed: a fresh 50 MB tensor per encoder layer costs more
    in page faults than the scaling itself."""
    need = n_rows * n_cols
    buf = getattr(_local, "buf", None)
    if buf is None or buf.numel() < need:
        # a normal tensor, even when first needed inside inference mode: an inference tensor could not be
        # written to outside it (a thread that decodes under inference_mode and then aligns or probes without it)
        with torch.inference_mode(False):
            buf = _local.buf = torch.empty(need)
    return buf[:need].view(n_rows, n_cols)


class Int8Linear(torch.nn.Module):
    """``y = x Wᵀ + b`` with ``W`` int8 (one scale per output channel), ``x`` quantized per row."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        weight_only = torch.nn.Linear(self.in_features, self.out_features, bias=False)
        with torch.no_grad():
            weight_only.weight.copy_(linear.weight.detach().float())
        qconfig = {torch.nn.Linear: torch.ao.quantization.per_channel_dynamic_qconfig}
        quantized = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(weight_only), qconfig)[0]
        self._packed = quantized._packed_params._packed_params
        bias = linear.bias.detach().float().clone() if linear.bias is not None else None
        self.register_buffer("bias", bias, persistent=False)
        ends = torch.zeros(self.in_features)
        ends[0], ends[-1] = -1.0, 1.0
        self.register_buffer("_ends", ends, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype, shape = x.dtype, x.shape
        rows = x.reshape(-1, self.in_features).float()
        scale = torch.maximum(rows.amax(dim=1, keepdim=True), rows.amin(dim=1, keepdim=True).neg_())
        unit = _workspace(rows.shape[0] + 1, self.in_features)
        torch.div(rows, scale.clamp_min(_TINY), out=unit[:-1])
        unit[-1] = self._ends
        out = torch.ops.quantized.linear_dynamic(unit, self._packed, reduce_range=True)[:-1].mul_(scale)
        if self.bias is not None:
            out.add_(self.bias)
        return out.reshape(*shape[:-1], self.out_features).to(dtype)

    def dequantized(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The float weight the int8 one stands for, and the bias."""
        weight, _ = torch.ops.quantized.linear_unpack(self._packed)
        return weight.dequantize(), self.bias

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 per token"


class WeightInt8Linear(torch.nn.Module):
    """``y = x (s ⊙ Q)ᵀ + b`` with ``Q`` int8 (symmetric, one scale ``s`` per output channel), computed in
    ``dtype``; ``x`` is not quantized."""

    def __init__(self, linear: torch.nn.Linear, dtype: torch.dtype):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        weight = linear.weight.detach().float()
        scale = weight.abs().amax(dim=1).clamp_min(_TINY) / 127
        self.register_buffer("qweight", torch.round(weight / scale[:, None]).clamp_(-127, 127).to(torch.int8))
        self.register_buffer("scale", scale.to(dtype))
        bias = linear.bias.detach().to(dtype).clone() if linear.bias is not None else None
        self.register_buffer("bias", bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.qweight.to(x.dtype).mul_(self.scale.to(x.dtype)[:, None])
        return torch.nn.functional.linear(x, weight, None if self.bias is None else self.bias.to(x.dtype))

    def dequantized(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The float32 weight the int8 one stands for (as ``forward`` computes it in float32), and the bias."""
        weight = self.qweight.float() * self.scale.float()[:, None]
        return weight, None if self.bias is None else self.bias.float()

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 weights, {self.scale.dtype}"


def _replace_linears(model: torch.nn.Module, make) -> torch.nn.Module:
    """Every ``nn.Linear`` of ``model`` (encoder, decoder, output projection) replaced by ``make(linear)``, in place."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is torch.nn.Linear:
                setattr(parent, name, make(child))
    return model


def weight_only_linears(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """Every ``nn.Linear`` of ``model`` replaced by a ``WeightInt8Linear`` computing in ``dtype``, in place, on
    the device it is on."""
    return _replace_linears(model, lambda linear: WeightInt8Linear(linear, dtype))


def quantize_linears(model: torch.nn.Module) -> torch.nn.Module:
    """Every ``nn.Linear`` of ``model`` (encoder, decoder, output projection) replaced by an ``Int8Linear``, in place.
    Convolutions, norms, embeddings and attention stay fp32."""
    if next(model.parameters()).device.type != "cpu":
        raise ValueError("int8 linear layers run on the CPU (fbgemm)")
    return _replace_linears(model, Int8Linear)
