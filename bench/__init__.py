"""Benchmarks: speed and accuracy are measured here, never asserted in tests.

Run each from the repository root as a module, e.g. ``.venv/bin/python -m bench.bench_transcribe --help``;
``bench.common`` holds what they share with the tests (clips, long-form builder, encoder, scorer).
"""

# The peers run as their users run them: CTranslate2 (faster-whisper) bundles its own libgomp, which reads
# GOMP_SPINCOUNT when it loads, and importing podscribe sets that for torch's (pipeline/facts/runtime.py, OPENMP_WAIT).
# So CTranslate2 loads here, first, with the environment as the bench was given it.
try:
    import ctranslate2  # noqa: F401
except ImportError:  # benches without a peer
    pass

# Then the package, before any bench imports torch: its own settings for torch's OpenMP and MKL
# (pipeline/__init__.py; a bench that imported torch first would measure without them, and be told so).
import pipeline  # noqa: E402, F401
