"""`podscribe site`: a static site of an archive's transcripts: where it is built (``build.py``: a new one aside,
an update in place), one build (``builder.py``), one episode rendered (``episode.py``), its pages (``pages.py``), its
split search index (``searchindex.py``) and the files every site gets (``assets/``: style and scripts)."""

from .build import SiteOptions, SiteResult, build_site

__all__ = ["SiteOptions", "SiteResult", "build_site"]
