"""Stands in for CTranslate2 where it is not installed (see ../README.md): importable, unusable."""


class _Missing:
    def __init__(self, *args, **kwargs):
        raise ImportError("ctranslate2 is not installed on this machine (bench/gpu_shims stands in for its import)")


class models:  # noqa: N801 - the module path faster_whisper names in its annotations
    Whisper = _Missing
    WhisperGenerationResult = _Missing


StorageView = _Missing


def __getattr__(name: str):
    return _Missing
