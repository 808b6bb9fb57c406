"""podscribe: batch transcription of podcast archives with Whisper and speculative decoding.

Stages, one module each, data flowing one way:
audio (decode, cut) → decode (models, generation) → stitch (episode time) → manifest (Parquet)
→ export (subtitles); runner and cli on top.
"""

__version__ = "0.1.0"
