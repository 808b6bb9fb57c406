"""Benchmarks: speed and accuracy are measured here, never asserted in tests.

Run each from the repository root as a module, e.g. ``.venv/bin/python -m bench.bench_transcribe --help``;
``bench.common`` holds what they share with the tests (clips, long-form builder, encoder, scorer).
"""
