"""Shared facts: the records and rows that flow between stages, Whisper's constants, languages, errors and the
runtime. These modules import nothing of podscribe (tests/test_layers.py)."""
