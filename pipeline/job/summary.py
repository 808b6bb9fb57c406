"""What a run did, as the CLI reports it: counts, failures, warnings, outputs written; one summary for
``--workers N`` by merging each worker's."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from pathlib import Path

from ..outputs.ownership import Written


@dataclass
class JobSummary:
    out_dir: Path
    done: int = 0
    failed: int = 0
    already_done: int = 0
    skipped_failed: int = 0
    copies: int = 0  # inputs with the same content as another input (decoded once, every path kept)
    audio_s: float = 0.0
    wall_s: float = 0.0
    failures: list[tuple[str, str]] = field(default_factory=list)
    missing: list[tuple[str, str]] = field(default_factory=list)  # unreadable now; earlier results kept
    warnings: list[tuple[str, str]] = field(default_factory=list)  # done, with something to check
    subtitles: list[Path] = field(default_factory=list)
    kept: list[tuple[Path, Path | None]] = field(default_factory=list)  # outputs a person changed: (kept, new)
    by_others: int = 0  # finished by other workers of the job while this one ran
    relabelled: int = 0  # finished files given speaker labels without decoding them again
    elsewhere: int = 0  # being decoded by other workers when this one ran out of files
    subtitles_left: bool = False  # other workers still at work: the last one writes the subtitles
    site: Path | None = None  # the transcript site this run updated (--site)
    decoded: list[tuple[float, float]] = field(default_factory=list)  # per file done: audio s, decoding s (dryrun)
    _subtitles: set = field(default_factory=set, repr=False, compare=False)  # subtitles, to look up

    def merge(self, other: JobSummary, same_plan: bool = True) -> None:
        """Add ``other``'s counts. ``same_plan``: it is another worker of the same launch, which planned the same job
        (its files already done, skipped and copied are these ones: counted once); else it is part of this worker's
        own work done in another process (a suspect file in the watched child): everything adds."""
        for name in ("done", "failed", "audio_s", "by_others", "relabelled"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("already_done", "skipped_failed", "copies"):
            combine = max if same_plan else operator.add
            setattr(self, name, combine(getattr(self, name), getattr(other, name)))
        self.site = self.site or other.site
        self.decoded += other.decoded
        for name in ("failures", "missing", "warnings", "subtitles", "kept"):
            _extend(getattr(self, name), getattr(other, name))

    @classmethod
    def of_launch(cls, out_dir: Path, workers: list[JobSummary], last: JobSummary | None = None) -> JobSummary:
        """One summary for a launch of several workers on one job (``--workers``, Ray): their work added, their common
        plan counted once. ``last``: a pass after them in the launcher (what dead workers left, the outputs once all
        are done): its work adds, but the files it found done were the launch's own, so the plan stays the workers'.
        What the workers finished for each other is in their own counts: none is "by others" or "elsewhere"."""
        summary = cls(Path(out_dir))
        for worker in workers:
            summary.merge(worker)
        if last is not None:
            planned = (summary.already_done, summary.skipped_failed)
            summary.merge(last)
            summary.already_done, summary.skipped_failed = planned
            summary.subtitles_left = last.subtitles_left
        summary.by_others = summary.elsewhere = 0
        return summary

    def wrote(self, written: Written) -> None:
        """Outputs written (each file once, however often it is written: as its file finishes, at the job's end)."""
        if len(self._subtitles) != len(self.subtitles):
            self._subtitles = set(self.subtitles)
        for path in written.paths:
            if path not in self._subtitles:
                self._subtitles.add(path)
                self.subtitles.append(path)
        _extend(self.kept, written.kept)


def _extend(items: list, more: list) -> None:
    """``more``'s items not in ``items`` yet, in order (a set: thousands of outputs, not a scan each)."""
    seen = set(items)
    for item in more:
        if item not in seen:
            seen.add(item)
            items.append(item)
