"""podscribe: batch transcription of podcast archives with Whisper and speculative decoding.

Rooms by layer, data flowing one way: audio (decode, cut) → decode (generation, stitch to episode time)
→ storage (the job dir's Parquet) → outputs (subtitles); facts, backend and models beneath, job and cli on top.
Each room's import rule: tests/test_layers.py; the rooms in a table: docs/ARCHITECTURE.md.
"""

from .facts.runtime import reproducible_blas, short_openmp_spins, warn_if_torch_came_first

# Before anything imports torch: its OpenMP threads read how long to spin when it loads (runtime.OPENMP_WAIT), MKL
# whether a row's products may depend on the rows beside it (runtime.REPRODUCIBLE_BLAS). Too late if the caller
# imported torch first: said once, here.
warn_if_torch_came_first()
short_openmp_spins()
reproducible_blas()

__version__ = "0.1.0"
