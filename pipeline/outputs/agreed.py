"""The outputs the workers of a job agree on (job.json's ``outputs``).

The workers of one job agree on which outputs it writes: ``--subtitles``, ``-o`` and the cue options are
recorded in job.json (``outputs``) while workers are at work; a joining worker must ask for the same ones
(refused with the configuration-mismatch exit code otherwise) or for none (it adopts theirs), and whoever
finishes last writes what is recorded (``spec``, ``join``, ``export.export_recorded``).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from ..facts.errors import ConfigChanged


def spec(subtitles: list[str], output_dir: Path | None, rules) -> dict | None:
    """The output options of one run (None: it asks for no subtitles)."""
    if not subtitles:
        return None
    return json.loads(  # as job.json gives it back (tuples as lists), so that equal options compare equal
        json.dumps(
            {
                "subtitles": sorted(subtitles),
                "output_dir": str(Path(output_dir).absolute()) if output_dir else None,
                "cue_rules": asdict(rules),
            }
        )
    )


def join(recorded: dict | None, mine: dict | None, root: Path) -> dict | None:
    """The outputs of a job that a worker joins: theirs and this one's must agree (or one side asks for none)."""
    if recorded is None or mine is None or recorded == mine:
        return recorded or mine
    differ = [key for key in ("subtitles", "output_dir", "cue_rules") if recorded.get(key) != mine.get(key)]
    names = {"subtitles": "--subtitles", "output_dir": "-o/--output-dir", "cue_rules": "the cue options"}
    raise ConfigChanged(
        f"the workers at work on {root} write {', '.join(recorded['subtitles'])} into "
        f"{recorded['output_dir'] or root / 'subtitles'}; this run asks for other outputs "
        f"({', '.join(names[k] for k in differ)}). Join them with the same options (or none), or run again "
        "when they have finished."
    )


def folder(root: Path, recorded: dict) -> Path:
    return Path(recorded["output_dir"]) if recorded.get("output_dir") else Path(root) / "subtitles"
