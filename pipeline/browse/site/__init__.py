"""`podscribe site`: a static site of an archive's transcripts (``build.py``), its pages (``pages.py``), its
split search index (``searchindex.py``) and the files every site gets (``assets/``: style and scripts)."""

from .build import SiteOptions, SiteResult, build_site

__all__ = ["SiteOptions", "SiteResult", "build_site"]
