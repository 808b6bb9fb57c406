"""fbgemm without reduce_range on AVX2 (run under scripts/isa.sh avx2): pairs of products saturate 16 bits.

Rows scaled into [-1, 1] with the fixed ends row (pipeline/backend/quantize.py's Int8Linear), weights at their
channel's largest value; printed: reduce_range, the largest error against the dequantized product, row 0 both ways.
"""

import warnings

import torch

from pipeline.backend import quantize

warnings.filterwarnings("ignore")
torch.manual_seed(0)
n = 512
weight = torch.full((4, n), 1.0)
weight[1] = -1.0
weight[2] = torch.randn(n)
packed = quantize._packed_per_channel(weight)  # noqa: SLF001
x = torch.ones(2, n)
x[1] = torch.randn(n)
ends = torch.zeros(1, n)
ends[0, 0], ends[0, -1] = -1.0, 1.0
unit = torch.cat([ends, x / x.abs().amax(1, keepdim=True)])
for reduce_range in (True, False):
    out = torch.ops.quantized.linear_dynamic(unit, packed, reduce_range=reduce_range)[1:]
    ref = unit[1:] @ torch.ops.quantized.linear_unpack(packed)[0].dequantize().T
    print(reduce_range, (out - ref).abs().max().item(), out[0].tolist(), ref[0].tolist())
