"""Where an episode's page is: the sites built from a job, so `podscribe search` links each hit to the moment on
its episode's page (``e/<name>.html#t=754.2``).

A site keeps what it was built from in ``<site>/.podscribe/site.json`` (``RECORD``: the jobs, and per episode
its page); a job keeps the sites built from it in ``<job>/site.json`` (``JOB_RECORD``), a pointer written by
`podscribe site` where the job dir can be written (a job dir it may not write into gets no pointer, and
``--site`` names the site instead).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..facts.errors import StorageError
from ..outputs.record import RECORD_DIR
from ..storage.atomic import atomic_write_bytes, read_json_dict
from .archive import SITE_RECORD, Archive, Episode

JOB_RECORD = "site.json"


def site_record(site: Path) -> dict:
    return read_json_dict(Path(site) / RECORD_DIR / SITE_RECORD)


def remember(job: Path, site: Path) -> bool:
    """Add ``site`` to the sites a job records (False: the job dir cannot be written; nothing else changes)."""
    path = Path(job) / JOB_RECORD
    record = read_json_dict(path)
    sites = [s for s in record.get("sites", []) if isinstance(s, str)]
    if str(site) in sites:
        return True
    try:
        atomic_write_bytes(path, json.dumps({"sites": [*sites, str(site)]}, indent=1).encode())
    except StorageError:
        return False
    return True


class Pages:
    """The page of each episode in the sites of an archive's jobs (or in ``site`` alone, when given)."""

    def __init__(self, archive: Archive, site: Path | None = None):
        self.pages: dict[str, Path] = {}
        sites = [Path(os.path.abspath(site))] if site else []
        if not site:
            for job in archive.jobs:
                sites += [Path(s) for s in read_json_dict(job / JOB_RECORD).get("sites", []) if isinstance(s, str)]
        for root in sites:
            episodes = site_record(root).get("episodes", {})
            for key, entry in episodes.items() if isinstance(episodes, dict) else ():
                page = root / entry.get("page", "") if isinstance(entry, dict) and entry.get("page") else None
                if page is not None and key not in self.pages and page.is_file():
                    self.pages[key] = page

    def url(self, episode: Episode, start_s: float) -> str | None:
        page = self.pages.get(episode.key)
        return f"{page.as_uri()}#t={start_s:.2f}" if page else None
