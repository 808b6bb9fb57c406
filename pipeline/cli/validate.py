"""One range check for every numeric setting and one choice check for every setting with choices, wherever its
value comes from (command line, job file).

click's ranges only guard the command line: a job file's ``vad_threshold = 2.0`` or ``max_attempts = 0``
went straight into the job, and values that empty every transcript (a VAD threshold of nan, pieces of
0.01 s) or fail every file were accepted and written into job.json; a job file's ``engine`` or
``compute_type`` skips click's choices the same way. The CLI checks the merged settings here before anything
is loaded or created; a value out of range or not among the choices is a usage error (exit 2) naming the flag
and the job-file key.
"""

from __future__ import annotations

from ..job.options import CHOICES, RANGES  # each numeric option's Range, each option's choices: the option table


def problems(settings: dict) -> list[str]:
    """Every setting out of its range or not among its choices, as ``--flag-name (job file: key) value: must be
    ...`` or ``--flag-name (job file: key) 'value': choose from ...``."""
    found = []
    for key, allowed in RANGES.items():
        value = settings.get(key)
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not allowed.holds(float(value)):
            found.append(f"{_flag(key)} (job file: {key}) {value}: must be {allowed}")
    for low, high in (("min_piece", "max_piece"), ("min_duration", "max_duration")):
        if not found and settings.get(low) is not None and settings.get(high) is not None:
            if settings[low] > settings[high]:
                found.append(f"{_flag(low)} {settings[low]} is longer than {_flag(high)} {settings[high]}")
    for key, choices in CHOICES.items():
        value = settings.get(key)
        if value is not None and value not in choices:
            found.append(f"{_flag(key)} (job file: {key}) {value!r}: choose from {', '.join(choices)}")
    return found


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")
