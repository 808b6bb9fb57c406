"""Which subtitle files a job writes when its work is done, agreed by every worker of the job.

The last worker to finish writes the subtitles. Each worker used to write its own ``--subtitles``/``-o``/cue
options, so a joining worker with other ones silently replaced the first worker's files (they were never
written). Now the options that change outputs are recorded in job.json (``outputs``) while workers are at work:
a joining worker must ask for the same ones (refused with the configuration-mismatch exit code otherwise), or
for none (it adopts theirs), and whoever finishes last writes what is recorded.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from .errors import ConfigChanged
from .export import CueRules


def spec(subtitles: list[str], output_dir: Path | None, rules: CueRules) -> dict | None:
    """The output options of one run (None: it asks for no subtitles)."""
    if not subtitles:
        return None
    return {
        "subtitles": sorted(subtitles),
        "output_dir": str(Path(output_dir).absolute()) if output_dir else None,
        "cue_rules": asdict(rules),
    }


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


def export_recorded(root: Path, recorded: dict, problems: list[str]) -> list[Path]:
    """The recorded subtitles written; an output that cannot be written for its own name is described in
    ``problems`` and the others are written."""
    from .export import export_job

    return export_job(root, recorded["subtitles"], folder(root, recorded), CueRules(**recorded["cue_rules"]), problems)
