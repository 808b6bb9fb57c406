"""Packing base's int8 layers (the output projection left out): quantizing against fbgemm's prepack."""
import time, torch, warnings
warnings.filterwarnings("ignore")
from safetensors.torch import load_file
from pipeline.models.registry import resolve
from pipeline.backend import quantize as q
import glob
loc = resolve("base").location
sd = load_file(glob.glob(loc + "/*.safetensors")[0])
ws = [v.float() for k, v in sd.items() if v.dim() == 2 and "embed_positions" not in k and ("proj" in k or "fc" in k)]
print(len(ws), sum(w.numel() for w in ws)/1e6, "M params")
for rep in range(2):
    t0=time.perf_counter(); qs=[q._quantized_per_channel(w, q._channel_scales(w), torch.zeros(w.shape[0]).long()) for w in ws]; t1=time.perf_counter()
    ps=[q._prepack(x) for x in qs]; t2=time.perf_counter()
    print("quantize %.3f s  prepack %.3f s" % (t1-t0, t2-t1))
