"""Whisper's feature extractor and tokenizer from a model's files, without importing transformers.

Why: ``import transformers`` alone scans its own source tree to build its lazy import table, ~0.8 s of a CLI run on
a 2-core CPU, and its tokenizer class parses ``tokenizer.json`` twice (~0.4 s); a run needs neither once the model
is podscribe's own (``torch_whisper.py``, decision 0047). Both classes here compute what transformers' do, for what
podscribe asks of them:

- ``LogMel``: ``WhisperFeatureExtractor``'s torch path — each row zero-padded (or cut) to 30 s, ``torch.stft``
  with a Hann window, power spectrum, Slaney mel filters (built in float64 as transformers builds them, then
  float32), log10 clamped at 1e-10, the row's maximum less 8 as a floor, ``(x + 4) / 4``;
- ``Tokenizer``: the ``tokenizers`` library on the model's ``tokenizer.json`` (transformers' Whisper tokenizer is a
  wrapper around the same object; no clean-up of spaces for a BPE model), with Whisper's two decoding rules:
  ``skip_special_tokens`` also drops a previous-text prompt up to ``<|startoftranscript|>``, and timestamp tokens
  never reach the text.

``tests/test_processor.py`` compares them with transformers' on real models' files: mel filters and features bit
for bit, decoded text on thousands of random token rows, encodings, special ids. ``Processor.transformers()`` gives
transformers' own classes (imported then) to what hands them to transformers: the ASR pipeline, a draft's folder.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

TIMESTAMP = re.compile(r"<\|(\d+\.\d+)\|>")  # transformers' WhisperTokenizer.timestamp_pat


# -- features -------------------------------------------------------------------------------------------------


def _hertz_to_mel(freq: float) -> float:
    """Slaney's mel scale (transformers' ``hertz_to_mel(mel_scale="slaney")``) of one frequency."""
    if freq >= 1000.0:
        return 15.0 + np.log(freq / 1000.0) * (27.0 / np.log(6.4))
    return 3.0 * freq / 200.0


def _mel_to_hertz(mels: np.ndarray) -> np.ndarray:
    freq = 200.0 * mels / 3.0
    region = mels >= 15.0
    freq[region] = 1000.0 * np.exp(np.log(6.4) / 27.0 * (mels[region] - 15.0))
    return freq


def mel_filters(n_mels: int, n_fft: int, sampling_rate: int, max_hz: float = 8000.0) -> np.ndarray:
    """[n_fft // 2 + 1, n_mels] float64 Slaney-normalised triangular filters on Slaney's mel scale: transformers'
    ``mel_filter_bank(..., norm="slaney", mel_scale="slaney")`` as ``WhisperFeatureExtractor`` calls it."""
    bins = n_fft // 2 + 1
    mel_freqs = np.linspace(_hertz_to_mel(0.0), _hertz_to_mel(max_hz), n_mels + 2)
    filter_freqs = _mel_to_hertz(mel_freqs)
    fft_freqs = np.linspace(0, sampling_rate // 2, bins)
    filter_diff = np.diff(filter_freqs)
    slopes = np.expand_dims(filter_freqs, 0) - np.expand_dims(fft_freqs, 1)
    down, up = -slopes[:, :-2] / filter_diff[:-1], slopes[:, 2:] / filter_diff[1:]
    filters = np.maximum(np.zeros(1), np.minimum(down, up)).astype(np.float64, copy=False)
    filters *= np.expand_dims(2.0 / (filter_freqs[2 : n_mels + 2] - filter_freqs[:n_mels]), 0)
    return filters


@dataclass
class Features:
    input_features: torch.Tensor  # [rows, mels, frames], as transformers' BatchFeature holds it


class LogMel:
    """Whisper's log-mel features of 30 s windows (``WhisperFeatureExtractor``'s torch path, a row at a time)."""

    def __init__(
        self,
        feature_size: int = 80,
        sampling_rate: int = 16000,
        hop_length: int = 160,
        chunk_length: int = 30,
        n_fft: int = 400,
    ):
        self.feature_size, self.sampling_rate, self.hop_length = feature_size, sampling_rate, hop_length
        self.chunk_length, self.n_fft = chunk_length, n_fft
        self.n_samples = chunk_length * sampling_rate
        self.nb_max_frames = self.n_samples // hop_length
        self.mel_filters = mel_filters(feature_size, n_fft, sampling_rate)
        self._filters_t = torch.from_numpy(self.mel_filters).to(torch.float32).T
        self._window = torch.hann_window(n_fft)

    @classmethod
    def from_file(cls, path: Path) -> LogMel | None:
        """From a ``preprocessor_config.json``; None where it asks for more than this class computes (dithering,
        padding with another value, normalisation, an attention mask)."""
        config = json.loads(path.read_text())
        plain = (
            config.get("feature_extractor_type", "WhisperFeatureExtractor") == "WhisperFeatureExtractor"
            and not config.get("dither", 0.0)
            and not config.get("padding_value", 0.0)
            and not config.get("return_attention_mask", False)
            and not config.get("do_normalize", False)
        )
        names = ("feature_size", "sampling_rate", "hop_length", "chunk_length", "n_fft")
        return cls(**{name: config[name] for name in names if name in config}) if plain else None

    def row(self, samples: np.ndarray) -> torch.Tensor:
        """[mels, frames] of one row of samples (float, 1-D)."""
        wave = np.zeros(self.n_samples, dtype=np.float32)
        given = np.asarray(samples, dtype=np.float32).reshape(-1)[: self.n_samples]
        wave[: given.shape[0]] = given
        stft = torch.stft(
            torch.from_numpy(wave)[None], self.n_fft, self.hop_length, window=self._window, return_complex=True
        )
        power = (stft[..., :-1].abs() ** 2).contiguous()
        log_spec = torch.clamp(self._filters_t @ power, min=1e-10).log10()
        top = log_spec.max(dim=2, keepdim=True)[0].max(dim=1, keepdim=True)[0]
        return ((torch.maximum(log_spec, top - 8.0) + 4.0) / 4.0)[0]

    def __call__(self, raw_speech, sampling_rate: int | None = None, return_tensors: str | None = "pt") -> Features:
        """``extractor(audio, sampling_rate=16000, return_tensors="pt").input_features`` as transformers' gives it,
        for one row of samples or a list of rows."""
        if sampling_rate is not None and sampling_rate != self.sampling_rate:
            raise ValueError(f"Whisper's features are of {self.sampling_rate} Hz audio, not {sampling_rate} Hz")
        if return_tensors not in (None, "pt"):
            raise ValueError("podscribe's features are torch tensors (return_tensors='pt')")
        rows = [raw_speech] if isinstance(raw_speech, np.ndarray) and raw_speech.ndim == 1 else list(raw_speech)
        return Features(torch.stack([self.row(r) for r in rows]))


# -- tokenizer ------------------------------------------------------------------------------------------------


class Tokenizer:
    """What podscribe asks of transformers' ``WhisperTokenizer``, on the ``tokenizers`` object it wraps."""

    def __init__(self, tokenizer_json: Path, unk_token: str):
        from tokenizers import Tokenizer as Backend

        self.backend = self.backend_tokenizer = Backend.from_file(str(tokenizer_json))  # transformers' name too
        self.unk_token = self.eos_token = unk_token
        self.unk_token_id = self.backend.token_to_id(unk_token)
        self.pad_token = None
        self._prev_sot = self.backend.token_to_id("<|startofprev|>")
        self._sot = self.backend.token_to_id("<|startoftranscript|>")

    @classmethod
    def from_files(cls, folder: Path) -> Tokenizer | None:
        """None unless the folder has a ``tokenizer.json`` and a BPE Whisper tokenizer config."""
        config_path, json_path = folder / "tokenizer_config.json", folder / "tokenizer.json"
        if not (config_path.is_file() and json_path.is_file()):
            return None
        config = json.loads(config_path.read_text())
        unk = config.get("unk_token", "<|endoftext|>")
        unk = unk.get("content") if isinstance(unk, dict) else unk
        if config.get("tokenizer_class") not in ("WhisperTokenizer", "WhisperTokenizerFast") or not isinstance(
            unk, str
        ):
            return None
        tokenizer = cls(json_path, unk)
        if type(tokenizer.backend.model).__name__ != "BPE" or tokenizer._sot is None:
            return None
        return tokenizer

    def __len__(self) -> int:
        return self.backend.get_vocab_size(with_added_tokens=True)

    def get_vocab(self) -> dict[str, int]:
        return self.backend.get_vocab(with_added_tokens=True)

    @functools.cached_property
    def all_special_ids(self) -> list[int]:
        return sorted(i for i, token in self.backend.get_added_tokens_decoder().items() if token.special)

    def convert_tokens_to_ids(self, tokens):
        if isinstance(tokens, str):
            tid = self.backend.token_to_id(tokens)
            return self.unk_token_id if tid is None else tid
        return [self.convert_tokens_to_ids(t) for t in tokens]

    def convert_ids_to_tokens(self, ids):
        if isinstance(ids, int):
            return self.backend.id_to_token(ids)
        return [self.backend.id_to_token(int(i)) for i in ids]

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        if add_special_tokens:
            raise ValueError("podscribe builds Whisper's prompt itself (facts/whisper.py): add_special_tokens=False")
        return self.backend.encode(text, add_special_tokens=False).ids

    def decode(self, token_ids, skip_special_tokens: bool = False) -> str:
        ids = [int(t) for t in token_ids]
        if skip_special_tokens and ids and ids[0] == self._prev_sot:  # transformers' _strip_prompt
            ids = ids[ids.index(self._sot) :] if self._sot in ids else []
        return TIMESTAMP.sub("", self.backend.decode(ids, skip_special_tokens=skip_special_tokens))


# -- both -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Processor:
    """A model's feature extractor and tokenizer: podscribe's own (above) where its files allow, else transformers'
    (a hub id). ``location``: where they were read."""

    feature_extractor: object
    tokenizer: object
    location: str

    @classmethod
    def from_pretrained(cls, location: str) -> Processor:
        folder = Path(location)
        features = folder / "preprocessor_config.json"
        extractor = LogMel.from_file(features) if features.is_file() else None
        tokenizer = Tokenizer.from_files(folder) if folder.is_dir() else None
        if extractor is not None and tokenizer is not None:
            return cls(extractor, tokenizer, location)
        return cls(*cls._transformers(location), location)

    @staticmethod
    def _transformers(location: str):
        from transformers import WhisperFeatureExtractor, WhisperTokenizer

        return WhisperFeatureExtractor.from_pretrained(location), WhisperTokenizer.from_pretrained(location)

    def transformers(self):
        """(feature extractor, tokenizer) as transformers' classes, for what hands them to transformers: read once
        (transformers' tokenizer parses ``tokenizer.json`` twice, ~0.4 s)."""
        return self._handed_on

    @functools.cached_property
    def _handed_on(self):
        if isinstance(self.tokenizer, Tokenizer):
            return self._transformers(self.location)
        return self.feature_extractor, self.tokenizer

    def get_prompt_ids(self, text: str, return_tensors: str | None = "np"):
        """transformers' ``WhisperProcessor.get_prompt_ids``."""
        return self.transformers()[1].get_prompt_ids(text, return_tensors=return_tensors)

    def save_pretrained(self, folder) -> None:
        """The files ``WhisperProcessor.save_pretrained`` writes (a draft's folder loads anywhere a model's does)."""
        from transformers import WhisperProcessor

        extractor, tokenizer = self.transformers()
        WhisperProcessor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(folder)
