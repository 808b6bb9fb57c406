"""Stands in for PyAV where it is not installed (see ../README.md): importable, unusable."""


def __getattr__(name: str):
    raise ImportError(f"av.{name}: PyAV is not installed on this machine (bench/gpu_shims stands in for its import)")
