"""``podscribe distill``: train a small decoder-only draft for a main Whisper model on the user's own audio.

Distil-Whisper's recipe applied to whatever main model a job runs: the draft keeps the main decoder's
embeddings and a few of its layers (the first and the last by default), reads the main encoder's output
(so the encoder runs once, for both), and learns the main model's own greedy transcripts (pseudo-labels)
and its distribution over them. Modules: ``options`` (light, read by the CLI), ``data`` (sources →
pseudo-labels and cached encoder outputs), ``model`` (the draft's shape, its reduced vocabulary, saving),
``train`` (accelerate loop, checkpoints), ``evaluate`` (acceptance through podscribe's own loop, step cost).
"""
