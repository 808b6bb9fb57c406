"""The inputs a command names: files as given, folders searched recursively for audio and video, glob patterns
expanded; each path absolute (job.json and the tables must mean the same file from any folder), once."""

from __future__ import annotations

import glob
from dataclasses import dataclass
from pathlib import Path

AUDIO_EXTENSIONS = {
    ".mp3",
    ".m4a",
    ".m4b",
    ".aac",
    ".opus",
    ".ogg",
    ".oga",
    ".flac",
    ".wav",
    ".mp4",
    ".m4v",
    ".mkv",
    ".mka",
    ".webm",
    ".mov",
    ".wma",
    ".aif",
    ".aiff",
}


@dataclass
class InputRef:
    path: Path  # absolute (job.json and the tables must mean the same file from any folder)
    error: str | None = None  # known-bad before any decoding (no match, empty directory)


def expand_inputs(inputs: list[str]) -> list[InputRef]:
    """Files as given; folders searched recursively for audio/video; glob patterns expanded."""
    refs: list[InputRef] = []
    for raw in inputs:
        path = Path(raw).expanduser().absolute()
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in AUDIO_EXTENSIONS)
            refs += [InputRef(p) for p in found] or [InputRef(path, f"directory has no audio files ({path})")]
        elif not path.exists() and any(c in raw for c in "*?["):
            found = sorted(Path(p).absolute() for p in glob.glob(raw, recursive=True) if Path(p).is_file())
            refs += [InputRef(p) for p in found] or [InputRef(path, f"no file matches {raw!r}")]
        else:
            refs.append(InputRef(path))
    seen, unique = set(), []
    for ref in refs:
        key = ref.path.resolve() if ref.path.exists() else ref.path
        if key not in seen:
            seen.add(key)
            unique.append(ref)
    return unique
