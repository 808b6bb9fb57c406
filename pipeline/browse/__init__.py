"""Reading an archive's transcripts: `podscribe search` (``query.py``) and `podscribe site` (``site/``).

Self-contained on purpose: it reads job dirs through the manifest's readers (``manifest.py``, ``tables.py``) and
writes through ``storage/atomic.py`` and ``outputs/ownership.py``, and imports nothing of the job machinery, the decoder or the
models, so neither command loads torch and both answer at once. ``archive.py`` reads the jobs; ``text.py`` is what
a search matches (the site's script folds and cuts words the same way); ``sites.py`` finds an episode's page.
"""
