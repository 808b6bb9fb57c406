"""Speaker embeddings: the GE2E voice encoder whose weights ship inside the ``resemblyzer`` wheel.

Why this one: it is on PyPI with its weights (no hub), it is small (3-layer LSTM, 1.4 M parameters) and it
was as accurate on the long-form set as CAM++ at a third of the cost
(docs/decisions/0016-diarization-embeddings-windows-clustering.md). The wheel's own code is not imported: it
needs librosa, webrtcvad (a C build that breaks with new setuptools) and scipy for preprocessing podscribe
does itself, so the package is installed with ``--no-deps`` and only its weight file is read, by path. The
features are resemblyzer's (librosa's power mel spectrogram: 25 ms Hann window, 10 ms hop, 40 Slaney mel
bands, no log), computed here with torch and checked against transformers' numpy spectrogram in
tests/test_diarize.py.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from ..facts.whisper import SAMPLE_RATE

N_FFT = 400  # 25 ms
HOP = 160  # 10 ms
N_MELS = 40
HIDDEN = 256
LAYERS = 3
TARGET_DBFS = -30.0  # resemblyzer's normalize_volume(increase_only=True)
WEIGHTS_PACKAGE = "resemblyzer"
MIN_SAMPLES = 1600  # 0.1 s
MIN_GROUP = 4  # windows of one frame count that run as they are; fewer join the packed batch


class EmbedderMissing(RuntimeError):
    pass


def weights_path() -> Path:
    spec = importlib.util.find_spec(WEIGHTS_PACKAGE)  # finds the package without importing it
    folder = Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None
    if folder is None or not (folder / "pretrained.pt").is_file():
        raise EmbedderMissing(
            "--diarize needs the speaker-embedding weights of the resemblyzer wheel: "
            "pip install --no-deps resemblyzer==0.1.4 (scripts/setup.sh does; --no-deps skips librosa and "
            "webrtcvad, which podscribe does not use)"
        )
    return folder / "pretrained.pt"


@lru_cache(maxsize=1)
def mel_filters() -> torch.Tensor:
    from transformers.audio_utils import mel_filter_bank

    bank = mel_filter_bank(
        num_frequency_bins=N_FFT // 2 + 1,
        num_mel_filters=N_MELS,
        min_frequency=0.0,
        max_frequency=SAMPLE_RATE / 2,
        sampling_rate=SAMPLE_RATE,
        norm="slaney",
        mel_scale="slaney",
    )  # [freq, mel], as librosa.filters.mel(sr=16000, n_fft=400, n_mels=40).T
    return torch.from_numpy(bank.astype(np.float32))


def normalized(samples: np.ndarray) -> np.ndarray:
    """Raised to -30 dBFS RMS when quieter (never lowered), as resemblyzer prepares an utterance."""
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) if len(samples) else 0.0
    if rms <= 1e-6:
        return samples
    gain_db = TARGET_DBFS - 20 * np.log10(rms)
    return samples * np.float32(10 ** (gain_db / 20)) if gain_db > 0 else samples


def mel_spectrogram(samples: torch.Tensor) -> torch.Tensor:
    """[batch, samples] → [batch, frames, 40] power mel (librosa.feature.melspectrogram's defaults:
    centered frames, zero padding, periodic Hann window, power 2)."""
    spec = torch.stft(
        samples,
        N_FFT,
        HOP,
        window=torch.hann_window(N_FFT, device=samples.device),
        center=True,
        pad_mode="constant",
        return_complex=True,
    )
    power = spec.abs().square()  # [batch, freq, frames]
    return torch.einsum("bft,fm->btm", power, mel_filters().to(samples.device))


class SpeakerEncoder(torch.nn.Module):
    """GE2E: mel frames → LSTM → last hidden state → linear → ReLU → unit vector (256)."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(N_MELS, HIDDEN, LAYERS, batch_first=True)
        self.linear = torch.nn.Linear(HIDDEN, HIDDEN)

    @classmethod
    def load(cls, path: Path | None = None) -> SpeakerEncoder:
        model = cls()
        state = torch.load(path or weights_path(), map_location="cpu", weights_only=True)["model_state"]
        model.load_state_dict({k: v for k, v in state.items() if not k.startswith("similarity_")})
        return model.eval()

    def forward(self, mels: torch.Tensor, frames: torch.Tensor | None = None) -> torch.Tensor:
        """``mels`` [batch, frames, 40]; ``frames``: each row's own frame count (the rest is padding), so rows of
        different lengths run together and each ends at its own last frame, as it would alone."""
        if frames is not None:
            mels = torch.nn.utils.rnn.pack_padded_sequence(mels, frames, batch_first=True, enforce_sorted=False)
        _, (hidden, _) = self.lstm(mels)
        raw = torch.relu(self.linear(hidden[-1]))
        return raw / raw.norm(dim=1, keepdim=True).clamp_min(1e-8)

    @torch.inference_mode()
    def embed(self, windows: list[np.ndarray], batch: int = 64) -> np.ndarray:
        """One unit vector per window (16 kHz samples) → [n, 256] float32; a window under 0.1 s gets the zero
        vector (no voice to read). Windows of one frame count run together as they are; the rest (a short
        stretch's window has a length of its own: one LSTM call each) run together packed: zeros after a window
        change none of its frames (the spectrogram pads with zeros already) and the LSTM stops at each window's
        own last frame. Packing only those: a packed LSTM skips torch's fused CPU kernel."""
        out = np.zeros((len(windows), HIDDEN), np.float32)
        by_frames: dict[int, list[int]] = {}
        for i, w in enumerate(windows):
            if len(w) >= MIN_SAMPLES:
                by_frames.setdefault(1 + len(w) // HOP, []).append(i)
        groups = [rows for rows in by_frames.values() if len(rows) >= MIN_GROUP]
        odd = sorted(
            (i for rows in by_frames.values() if len(rows) < MIN_GROUP for i in rows), key=lambda i: len(windows[i])
        )
        for members, packed in [*((rows, False) for rows in groups), (odd, True)]:
            for k in range(0, len(members), batch):
                rows = members[k : k + batch]
                longest = max(len(windows[i]) for i in rows)
                chunk = np.zeros((len(rows), longest), np.float32)
                for j, i in enumerate(rows):
                    chunk[j, : len(windows[i])] = normalized(windows[i])
                frames = torch.tensor([1 + len(windows[i]) // HOP for i in rows]) if packed else None
                out[rows] = self(mel_spectrogram(torch.from_numpy(chunk)), frames).numpy()
        return out
