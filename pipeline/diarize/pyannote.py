"""``--diarizer pyannote``: pyannote.audio's hub pipeline, for users who have hub access and accepted its terms.

Opt-in (the ``pyannote`` extra); every way it cannot start is said at job start, before any decoding:
the package missing, no token, the model's terms not accepted. Unlike the default backend it needs the
whole waveform in memory (about 230 MB per audio hour, float32 at 16 kHz).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..facts.errors import UsageProblem
from ..facts.records import Turn
from ..facts.whisper import SAMPLE_RATE
from .options import DiarizeOptions
from .turns import label

MODEL = "pyannote/speaker-diarization-3.1"


class PyannoteBackend:
    def __init__(self, options: DiarizeOptions):
        self.options = options
        try:
            from pyannote.audio import Pipeline
        except ImportError as exc:
            raise UsageProblem(
                "--diarizer pyannote needs the pyannote.audio package: pip install 'podscribe[pyannote]' "
                "(or use the offline default, --diarizer ge2e)"
            ) from exc
        token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
        if not token:
            raise UsageProblem(
                f"--diarizer pyannote needs a Hugging Face token in HF_TOKEN, for an account that accepted the "
                f"terms of https://hf.co/{MODEL} and https://hf.co/pyannote/segmentation-3.0"
            )
        try:
            try:
                self.pipeline = Pipeline.from_pretrained(MODEL, token=token)  # pyannote.audio 4
            except TypeError:
                self.pipeline = Pipeline.from_pretrained(MODEL, use_auth_token=token)  # 3.x
        except Exception as exc:  # gated, offline, bad token: pyannote's own message says which
            raise UsageProblem(
                f"--diarizer pyannote could not load {MODEL} ({type(exc).__name__}: {exc}); accept the model's "
                f"terms at https://hf.co/{MODEL} with the account of HF_TOKEN, and check the machine reaches the hub"
            ) from exc
        if self.pipeline is None:
            raise UsageProblem(f"--diarizer pyannote: {MODEL} is gated; accept its terms at https://hf.co/{MODEL}")

    def turns(self, path: Path) -> list[Turn]:
        import torch

        from ..audio import media

        o = self.options
        limits = (
            {"num_speakers": o.num_speakers}
            if o.num_speakers
            else {"min_speakers": o.min_speakers, "max_speakers": o.max_speakers}
        )
        waveform = torch.from_numpy(media.decode(path))[None]
        result = self.pipeline({"waveform": waveform, "sample_rate": SAMPLE_RATE}, **limits)
        annotation = getattr(result, "speaker_diarization", result)
        names: dict[str, str] = {}
        out = []
        for segment, _, who in annotation.itertracks(yield_label=True):
            names.setdefault(who, label(len(names)))
            out.append(Turn(round(segment.start, 3), round(segment.end, 3), names[who]))
        return out
