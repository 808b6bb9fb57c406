"""Silero VAD's pass over a piece: the ONNX model faster-whisper ships and the loop its ``vad.py`` runs over the
model's probabilities (both adapted from snakers4/silero-vad, MIT), without importing faster-whisper.

Why a port: ``faster_whisper.vad`` cannot be imported without faster-whisper's package, which imports PyAV (its
own FFmpeg libraries) and CTranslate2 — 0.2 s of every run's start-up on a 2-core CPU, for a model file and a
hundred lines of Python. The file is faster-whisper's (found through the installed package, not imported); the
loop is its ``get_speech_timestamps`` for the options podscribe passes (no speech-length limit, no padding: the
padding is ``vad.pad``), checked span for span against it (``tests/test_vad.py``).
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

import numpy as np

WINDOW = 512  # samples per probability (32 ms at 16 kHz)
CONTEXT = 64  # samples of the previous window fed before each one


def model_path() -> Path:
    """``silero_vad_v6.onnx`` in the installed faster-whisper's assets (located, not imported)."""
    spec = importlib.util.find_spec("faster_whisper")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("voice activity detection needs the faster-whisper package (its Silero VAD model)")
    path = Path(next(iter(spec.submodule_search_locations))) / "assets" / "silero_vad_v6.onnx"
    if not path.is_file():
        raise RuntimeError(f"Silero VAD model not found at {path}: reinstall faster-whisper")
    return path


@lru_cache(maxsize=1)
def session():
    """The ONNX session, as faster-whisper opens it: one thread, no memory arena, quiet."""
    try:
        import onnxruntime
    except ImportError as exc:  # pragma: no cover - a dependency of faster-whisper
        raise RuntimeError("voice activity detection needs the onnxruntime package (Silero VAD)") from exc

    opts = onnxruntime.SessionOptions()
    opts.inter_op_num_threads = 1
    opts.intra_op_num_threads = 1
    opts.enable_cpu_mem_arena = False
    opts.log_severity_level = 4
    return onnxruntime.InferenceSession(str(model_path()), providers=["CPUExecutionProvider"], sess_options=opts)


def probabilities(samples: np.ndarray) -> np.ndarray:
    """Speech probability of each 512-sample window (the audio zero-padded to whole windows, as faster-whisper
    pads it: always by at least one sample), each window fed with the last 64 samples of the one before."""
    padded = np.pad(samples, (0, WINDOW - samples.shape[0] % WINDOW))
    windows = padded.reshape(-1, WINDOW)
    context = windows[..., -CONTEXT:]
    context[-1] = 0
    context = np.roll(context, 1, 0)
    batch = np.concatenate([context, windows], 1).reshape(-1, WINDOW + CONTEXT)
    h = np.zeros((1, 1, 128), dtype="float32")
    c = np.zeros((1, 1, 128), dtype="float32")
    outputs = []
    for at in range(0, batch.shape[0], 10000):
        output, h, c = session().run(None, {"input": batch[at : at + 10000], "h": h, "c": c})
        outputs.append(output)
    return np.concatenate(outputs, axis=0)


def speech(
    samples: np.ndarray, threshold: float, min_speech_ms: int, min_silence_ms: int, rate: int
) -> list[tuple[int, int]]:
    """Speech spans in samples, unpadded: a span opens at a window at or above ``threshold`` and closes after
    ``min_silence_ms`` below ``threshold - 0.15`` (Silero's hysteresis); spans of ``min_speech_ms`` or less are
    dropped, as faster-whisper drops them."""
    min_speech = rate * min_speech_ms / 1000
    min_silence = rate * min_silence_ms / 1000
    neg_threshold = max(threshold - 0.15, 0.01)
    spans: list[tuple[int, int]] = []
    start: int | None = None
    temp_end = 0
    for i, prob in enumerate(probabilities(samples)):
        at = WINDOW * i
        if prob >= threshold and temp_end:
            temp_end = 0
        if prob >= threshold and start is None:
            start = at
            continue
        if prob < neg_threshold and start is not None:
            if not temp_end:
                temp_end = at
            if at - temp_end < min_silence:
                continue
            if temp_end - start > min_speech:
                spans.append((start, temp_end))
            start, temp_end = None, 0
    if start is not None and len(samples) - start > min_speech:
        spans.append((start, len(samples)))
    return spans
