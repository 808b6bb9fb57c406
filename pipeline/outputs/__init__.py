"""What a job writes for people: cues and their text, the subtitle and text files (``export``), who owns each
output file (``ownership``), speaker names. Imports facts and storage only (tests/test_layers.py)."""
