"""What a job writes for people: cues and their text, the subtitle and text files (``export``), who owns each
output file (``ownership``, by the ``record`` of what podscribe wrote in its folder), the files' ``names``, the
outputs a job's workers agree on (``agreed``), speaker names. Imports facts and storage only (tests/test_layers.py)."""
