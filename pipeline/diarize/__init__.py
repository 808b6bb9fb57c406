"""Who said it: speaker labels for a finished transcript (``--diarize``), offline.

A stage of its own after decoding, per file: windows over the speech the transcript covers
(turns.py) → GE2E speaker embeddings (embed.py, weights from the ``resemblyzer`` wheel) → spectral
clustering with an estimated speaker count (cluster.py) → turns → each segment's and word's speaker,
segments split where their words change speaker (turns.py). ``diarizer.py`` runs it for one file,
reading the audio again in blocks; ``pyannote.py`` is the opt-in hub backend.

Nothing here imports torch at package import: the CLI reads ``options.py`` before any model loads.
"""
