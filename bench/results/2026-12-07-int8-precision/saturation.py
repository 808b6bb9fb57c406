"""fbgemm without reduce_range on AVX2 (run under scripts/isa.sh avx2): pairs of products saturate 16 bits."""
import torch, warnings
warnings.filterwarnings("ignore")
from pipeline.backend import quantize as q
torch.manual_seed(0)
n=512
w = torch.full((4, n), 1.0)  # per-channel max -> 127
w[1] = -1.0
w[2] = torch.randn(n)
lin = torch.nn.Linear(n, 4, bias=False); lin.weight.data = w
packed = q._packed_per_channel(w)
x = torch.ones(2, n); x[1] = torch.randn(n)
unit = torch.cat([torch.tensor([[-1.0]+[0.0]*(n-2)+[1.0]]), x / x.abs().amax(1, keepdim=True)])
for rr in (True, False):
    out = torch.ops.quantized.linear_dynamic(unit, packed, reduce_range=rr)[1:]
    ref = unit[1:] @ torch.ops.quantized.linear_unpack(packed)[0].dequantize().T
    print(rr, (out-ref).abs().max().item(), out[0].tolist(), ref[0].tolist())
