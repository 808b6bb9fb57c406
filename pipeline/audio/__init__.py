"""A file's audio: probe, decode and cut into pieces (``media``), voice activity (``vad``), reading ahead of the
model (``prefetch``). Imports facts only (tests/test_layers.py)."""
