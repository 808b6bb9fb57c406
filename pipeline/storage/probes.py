"""What ffprobe said about each content, kept in the job dir so that a rerun, every other worker and
`podscribe status` do not run ffprobe again.

An ffprobe run is mostly process start-up: 2,000 clips took minutes before the first decode, on every run and in
every worker, and `status` probed every pending input too. A probe is a fact about the content, and the content
has an id (its SHA-256, manifest.py), so the answer is kept by that id in ``probes.json``: written atomically,
merged with what other workers wrote meanwhile (an entry lost to a race only costs one probe again). Errors are
not kept: an unreadable path has no content id, and a file that fails gets its failed row.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..audio.media import AudioInfo
from ..facts.errors import StorageError
from .atomic import atomic_write_bytes, read_json_dict


class ProbeCache:
    def __init__(self, root: Path):
        self.path = Path(root) / "probes.json"
        self.entries = self._load()
        self.added: dict[str, list] = {}

    def _load(self) -> dict[str, list]:
        return read_json_dict(self.path)

    def get(self, file_id: str) -> AudioInfo | None:
        entry = self.entries.get(file_id)
        try:
            duration_s, format_name, codec, notes, tags = entry
            return AudioInfo(
                None if duration_s is None else float(duration_s),
                str(format_name),
                str(codec),
                tuple(map(str, notes)),
                tuple((str(k), str(v)) for k, v in tags),
            )
        except (TypeError, ValueError):  # none, damaged, or kept before tags were: probed again
            return None

    def put(self, file_id: str, info: AudioInfo) -> None:
        entry = [info.duration_s, info.format_name, info.codec, list(info.notes), [list(t) for t in info.tags]]
        if self.entries.get(file_id) != entry:
            self.entries[file_id] = self.added[file_id] = entry

    def save(self) -> None:
        """Add this worker's new entries to what is on disk now (best effort: a failed write costs probes only)."""
        if not self.added:
            return
        merged = {**self._load(), **self.added}
        try:
            atomic_write_bytes(self.path, json.dumps(merged, separators=(",", ":")).encode())
        except StorageError:  # a full disk stops the run where it writes what matters, not here
            return
        self.added.clear()
