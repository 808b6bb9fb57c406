"""One range check for every numeric setting, wherever its value comes from (command line, job file).

click's ranges only guard the command line: a job file's ``vad_threshold = 2.0`` or ``max_attempts = 0``
went straight into the job, and values that empty every transcript (a VAD threshold of nan, pieces of
0.01 s) or fail every file were accepted and written into job.json. The CLI checks the merged settings here
before anything is loaded or created; a value out of range is a usage error (exit 2) naming the flag and
the job-file key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    low: float | None = None
    high: float | None = None
    low_open: bool = False  # low itself refused

    def holds(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return self.high is None or value <= self.high

    def __str__(self) -> str:
        low = "" if self.low is None else f"{'above' if self.low_open else 'at least'} {self.low:g}"
        high = "" if self.high is None else f"at most {self.high:g}"
        return " and ".join(x for x in (low, high) if x) or "a finite number"


RANGES = {
    "batch_size": Range(1, 64),
    "threads": Range(1, 512),
    "workers": Range(1, 1024),
    "max_attempts": Range(1, 100),
    "fallback_beams": Range(0, 16),
    "vad_threshold": Range(0, 1),
    "no_speech_threshold": Range(0, 1),
    "logprob_threshold": Range(),
    "compression_ratio_threshold": Range(0, low_open=True),
    "min_piece": Range(1, 30),  # shorter pieces are too short for Whisper to say anything
    "max_piece": Range(1, 30),
    "num_speakers": Range(1, 32),
    "min_speakers": Range(1, 32),
    "max_speakers": Range(1, 32),
    "max_line_chars": Range(10, 200),
    "max_lines": Range(1, 2),
    "max_cps": Range(0, low_open=True),
    "max_duration": Range(0, low_open=True),
    "min_duration": Range(0),
    "pause_split": Range(0),
}


def problems(settings: dict) -> list[str]:
    """Every setting out of its range, as ``--flag-name (job file: key) value: must be ...``."""
    found = []
    for key, allowed in RANGES.items():
        value = settings.get(key)
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not allowed.holds(float(value)):
            flag = "--" + key.replace("_", "-")
            found.append(f"{flag} (job file: {key}) {value}: must be {allowed}")
    if not found and settings.get("min_piece") is not None and settings.get("max_piece") is not None:
        if settings["min_piece"] > settings["max_piece"]:
            found.append(f"--min-piece {settings['min_piece']} is longer than --max-piece {settings['max_piece']}")
    return found
