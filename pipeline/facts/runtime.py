"""The one place that decides device, compute type and attention implementation.

A compute type names the weights' precision and the arithmetic's, as faster-whisper's do: ``float32``,
``float16``, ``bfloat16`` (weights and activations in that dtype), ``int8`` (CPU: every linear layer's
weights int8, activations quantized per token, the rest — convolutions, norms, attention — float32;
``backend/quantize.py``), ``int8_float16`` / ``int8_bfloat16`` / ``int8_float32`` (any device: linear layers'
weights int8, dequantized to that dtype for each product; everything else in that dtype)."""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import UsageProblem

if TYPE_CHECKING:  # the CLI reads the names below without loading torch
    import torch

INT8 = "int8"
DTYPES = {  # name (and short name) -> torch dtype name
    "float32": "float32",
    "fp32": "float32",
    "float16": "float16",
    "fp16": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
}
WEIGHT_INT8 = {f"int8_{name}": name for name in ("float16", "bfloat16", "float32")}  # weight-only int8
COMPUTE_TYPES = ("auto", INT8, *DTYPES, *WEIGHT_INT8)
# What `auto` picks per device (docs/compute-types.md, "What `auto` picks"); a resumed job keeps the one it started
# with. A CPU with bf16 matrix units (Intel AMX) multiplies bfloat16 far faster than float32 or fbgemm's int8 (which
# has no AMX path), at float32's WER; without them bfloat16 is emulated and slowest of all (decision record 0007).
AUTO = {"cuda": "float16", "cpu": INT8, "cpu+amx": "bfloat16"}


def onednn_isa_capped_below_amx() -> bool:
    """Whether ``ONEDNN_MAX_CPU_ISA`` keeps oneDNN off AMX (``scripts/isa.sh``: this CPU run as one without it)."""
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    return bool(cap) and cap not in ("ALL", "DEFAULT") and "AMX" not in cap


def cpu_has_bf16_units() -> bool:
    """Whether this CPU multiplies bfloat16 matrices in hardware (AMX tiles with AVX-512 BF16; oneDNN uses them,
    unless capped below AMX)."""
    import torch

    if onednn_isa_capped_below_amx():
        return False
    try:
        # torch has no public probe for these units (a missing one is caught below)
        return bool(torch.cpu._is_amx_tile_supported() and torch.cpu._is_avx512_bf16_supported())  # noqa: SLF001
    except (AttributeError, RuntimeError):  # an older or newer torch without these probes: assume none
        return False


def auto_compute_type(device_type: str, bf16_units: bool | None = None) -> str:
    """The compute type ``auto`` means on this kind of device (``bf16_units``: the CPU's, probed if None)."""
    if device_type == "cpu" and (cpu_has_bf16_units() if bf16_units is None else bf16_units):
        return AUTO["cpu+amx"]
    return AUTO.get(device_type, "float32")


@dataclass(frozen=True)
class Runtime:
    device: torch.device
    dtype: torch.dtype  # of activations and of every weight that is not int8
    attn_implementation: str = "sdpa"
    int8: bool = False  # linear layers int8, activations per token (backend/quantize.py, CPU)
    weight_int8: bool = False  # linear layers' weights int8, products in ``dtype`` (backend/quantize.py, any device)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def compute_type(self) -> str:
        name = str(self.dtype).removeprefix("torch.")
        return INT8 if self.int8 else f"int8_{name}" if self.weight_int8 else name

    def describe(self) -> str:
        """Recorded in job.json and every files row (``runtime``): ``cpu/int8/sdpa``, ``cuda/float16/sdpa``."""
        return f"{self.device.type}/{self.compute_type}/{self.attn_implementation}"


def recorded_compute_type(describe: str | None) -> str | None:
    """The compute type in a recorded ``Runtime.describe()`` (None if there is none)."""
    parts = (describe or "").split("/")
    return parts[1] if len(parts) == 3 and parts[1] in COMPUTE_TYPES else None


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim  # glibc; elsewhere there is nothing to do
    except (OSError, AttributeError):
        return None


# OpenMP's idle threads (torch's libgomp) spin 300,000 turns waiting for the next parallel region before they
# sleep. A decoder step is dozens of small ops with Python between them, so a 2-thread step spun through every gap;
# beside other busy processes those spins took the cores the working thread needed: base's decoding of eight clips
# took 57 s beside two busy-looping processes, 2.1 s on an idle machine. At 1,000 turns it is 2.1 s idle and 4.0 s
# beside them; the encoder 27 s -> 10 s (0 turns, OMP_WAIT_POLICY=PASSIVE: 7 % slower idle; one decoder thread:
# 55 % slower idle). Decision 0041. libgomp reads it once, as torch loads: ``pipeline/__init__`` sets it first.
OPENMP_WAIT = {"GOMP_SPINCOUNT": "1000"}


def short_openmp_spins() -> None:
    """``OPENMP_WAIT`` into the environment, unless the user chose a wait policy or a spin count (then theirs
    stands). Effective only before torch is imported in this process (and in every process started from it)."""
    if not _openmp_wait_chosen():
        os.environ.update(OPENMP_WAIT)


def _openmp_wait_chosen() -> bool:
    """Whether the user chose OpenMP's wait: a wait policy or a spin count (then podscribe leaves it alone)."""
    return any(name in os.environ for name in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"))


# MKL (torch's float32 matrix products on x86: the attention kernels' q·k and p·v, float32 linear layers) picks its
# code path by the alignment of each operand. torch's CPU attention gives each OpenMP thread a scratch buffer at an
# offset that is not a multiple of 64 bytes, so a row's attention came out a last bit apart depending on which
# thread took it, which depends on how many rows share the call: base int8's long-form transcripts differed
# in 4 segments of 200 between --batch-size 8 and 4 (a comma, start times), though every int8 product is row-exact.
# MKL's strict reproducibility mode takes the same path whatever the alignment and thread count, at the same speed
# here (encoder 250 ms a window either way; "COMPATIBLE" would be 1.7x slower). Decision 0044. MKL reads it when it
# starts: ``pipeline/__init__`` sets it first, as it does ``OPENMP_WAIT``.
REPRODUCIBLE_BLAS = {"MKL_CBWR": "AUTO,STRICT"}


def reproducible_blas() -> None:
    """``REPRODUCIBLE_BLAS`` into the environment unless the user set ``MKL_CBWR`` (then theirs stands).
    Effective only before MKL's first call in this process (and in every process started from it)."""
    _unless_set(REPRODUCIBLE_BLAS)


# oneDNN's caches of compiled kernels, keyed by shape, at their default 1,024 entries each kept growing through an
# hour of audio in bfloat16 (the decoder meets new shapes: rows x positions). 128 primitives hold what the batches
# cycle through at no cost in speed; ideep's own cache of 1 leaves reuse to oneDNN's (0 crashes ideep). The
# measurements: docs/decisions/0009-memory-of-an-hour.md.
KERNEL_CACHES = {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "128", "LRU_CACHE_CAPACITY": "1"}


def bound_kernel_caches() -> None:
    """Bound oneDNN's kernel caches (``KERNEL_CACHES``); a value the user set wins. oneDNN reads them when it
    makes its first kernel, so this runs before any model does (``pick_runtime``)."""
    _unless_set(KERNEL_CACHES)


def warn_if_torch_came_first() -> None:
    """A warning when torch was imported before ``pipeline`` (podscribe used as a library) and the user did not set
    OpenMP's wait themselves: libgomp read its spin count when torch loaded, so podscribe's short spin
    (``OPENMP_WAIT``) is missed, and with it the behaviour beside busy processes (dev01 beside two busy loops took
    72-101 s instead of 38 s, measured 2026-12-06); MKL's strict mode too if MKL has been called. Call it before
    the settings go into the environment."""
    if "torch" in sys.modules and not _openmp_wait_chosen():
        settings = " and ".join(f"{k}={v}" for k, v in {**OPENMP_WAIT, **REPRODUCIBLE_BLAS}.items())
        warnings.warn(
            "torch was imported before pipeline: OpenMP's threads keep libgomp's long spin, which makes podscribe "
            "several times slower beside other busy processes, and MKL may not be in its strict mode (a row's bits "
            f"may depend on the batch). Import pipeline before torch, or set {settings} in the environment before "
            "Python starts.",
            RuntimeWarning,
            stacklevel=3,
        )


def _unless_set(values: dict[str, str]) -> None:
    """A library's settings into the environment, each unless the user set it (then theirs stands)."""
    for name, value in values.items():
        os.environ.setdefault(name, value)


def return_freed_memory() -> None:
    """Give the heap's free pages back to the system (glibc's ``malloc_trim``): after each step of a batch
    (encoder, decoding, scoring) and after the batch.

    The steps allocate tensors of changing sizes (the encoder's activations, the cross-attention keys, the
    scoring pass's logits); glibc keeps freed pages and raises its mmap threshold as large blocks are freed,
    so the steps' peaks stacked, and an hour of audio, which meets more batches, met a worse one
    (docs/decisions/0009-memory-of-an-hour.md). A trim is cheap next to a step."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def quiet_libraries() -> None:
    """No library chatter on a night's log: transformers' notices and weight-loading bars (ours are in audio
    time). Every worker process calls it. (torch.ao's deprecation: backend/quantize.py, where it is called.)
    Through the environment transformers reads when it is imported (a CPU run may never import it: ~0.8 s,
    decision 0047), and directly where it was imported already; a user's own settings of the two are kept."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    transformers = sys.modules.get("transformers")
    if transformers is not None:
        transformers.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()


def pick_runtime(device: str = "auto", compute_type: str = "auto") -> Runtime:
    """``auto`` device: CUDA when a GPU is there, else the CPU. ``auto`` compute type: ``auto_compute_type``."""
    import torch

    bound_kernel_caches()
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise UsageProblem(f"--device {device!r}: choose auto, cpu, cuda or cuda:N") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageProblem(f"--device {device} was asked for, but torch sees no CUDA device")
    if compute_type == "auto":
        compute_type = auto_compute_type(dev.type)
    if compute_type not in COMPUTE_TYPES:
        raise UsageProblem(f"--compute-type {compute_type!r}: choose {', '.join(COMPUTE_TYPES)}")
    if compute_type == INT8:
        if dev.type != "cpu":
            raise UsageProblem(
                f"--compute-type int8 runs on the CPU (fbgemm kernels); on {dev.type} use float16, bfloat16 or "
                "int8_float16 (int8 weights, float16 products)"
            )
        return Runtime(dev, torch.float32, int8=True)
    if compute_type in WEIGHT_INT8:
        return Runtime(dev, getattr(torch, WEIGHT_INT8[compute_type]), weight_int8=True)
    return Runtime(dev, getattr(torch, DTYPES[compute_type]))
