"""podscribe: batch transcription of podcast archives with Whisper and speculative decoding.

Stages, one module each, data flowing one way:
audio (decode, cut) → decode (models, generation) → stitch (episode time) → manifest (Parquet)
→ export (subtitles); runner and cli on top.
"""

from .facts.runtime import short_openmp_spins

# Before anything imports torch: its OpenMP threads read how long to spin when it loads (runtime.OPENMP_WAIT).
short_openmp_spins()

__version__ = "0.1.0"
