"""The one place that decides device, dtype and attention implementation."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .errors import UsageProblem

DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float16": torch.float16,
    "fp16": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
}


@dataclass(frozen=True)
class Runtime:
    device: torch.device
    dtype: torch.dtype
    attn_implementation: str = "sdpa"

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def describe(self) -> str:
        return f"{self.device.type}/{str(self.dtype).removeprefix('torch.')}/{self.attn_implementation}"


def quiet_libraries() -> None:
    """No library chatter on a night's log: transformers' notices and weight-loading bars (ours are in audio
    time), torch.ao's quantization warnings. Every worker process calls it."""
    import warnings

    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.ao\..*")
    warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*")


def pick_runtime(device: str = "auto", dtype: str = "auto") -> Runtime:
    """``auto``: CUDA with fp16 when a GPU is there, else CPU with fp32 (fp16 on CPU is slow and lossy)."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise UsageProblem(f"--device {device!r}: choose auto, cpu, cuda or cuda:N") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageProblem(f"--device {device} was asked for, but torch sees no CUDA device")
    if dtype == "auto":
        torch_dtype = torch.float16 if dev.type == "cuda" else torch.float32
    else:
        if dtype not in DTYPES:
            raise UsageProblem(f"--dtype {dtype!r}: choose auto or one of {', '.join(DTYPES)}")
        torch_dtype = DTYPES[dtype]
    return Runtime(dev, torch_dtype)
