"""The job directory on disk: the manifest and its tables, input identity, workers' claims, the probe cache and
atomic writes. Imports facts and audio only (tests/test_layers.py)."""
