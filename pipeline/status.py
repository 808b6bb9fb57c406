"""`podscribe status`: what a job dir has done, what is left and how long it will take."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from . import audio
from .audio import AudioError
from .manifest import JobDir, fingerprint


@dataclass
class JobStatus:
    root: Path
    done: int = 0
    failed: int = 0
    pending: int = 0
    in_progress: int = 0  # pending files with persisted pieces
    audio_done_s: float = 0.0
    audio_left_s: float = 0.0
    wall_s: float = 0.0
    failures: list[tuple[str, str]] = field(default_factory=list)

    @property
    def throughput(self) -> float:
        """Audio seconds per wall second over the files done."""
        return self.audio_done_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        return self.audio_left_s / self.throughput if self.throughput > 0 else None

    def render(self) -> str:
        eta = f"{self.eta_s / 3600:.2f} h" if self.eta_s is not None else "unknown (nothing done yet)"
        lines = [
            f"job: {self.root}",
            f"files: {self.done} done, {self.failed} failed, {self.pending} pending"
            + (f" ({self.in_progress} half done)" if self.in_progress else ""),
            f"audio: {self.audio_done_s / 3600:.2f} h done, {self.audio_left_s / 3600:.2f} h left",
            f"throughput: {self.throughput:.1f}x real time; ETA {eta}",
        ]
        if self.failures:
            lines.append("failed:")
            lines += [f"  {path}: {error}" for path, error in self.failures]
        return "\n".join(lines)


def job_status(root: Path) -> JobStatus:
    job = JobDir(root)
    record = job.read_job() or {}
    st = JobStatus(Path(root))
    rows = {r["file_id"]: r for r in job.file_rows()}
    for r in rows.values():
        if r["status"] == "done":
            st.done += 1
            st.audio_done_s += r["duration_s"] or 0.0
            st.wall_s += r["wall_s"] or 0.0
        else:
            st.failed += 1
            st.failures.append((r["path"], r["error"]))
    for path in map(Path, record.get("inputs", [])):
        file_id = fingerprint(path)
        if file_id in rows:
            continue
        st.pending += 1
        st.in_progress += job.has_partial(file_id)
        try:
            st.audio_left_s += audio.probe(path).duration_s or 0.0
        except AudioError:
            pass
    return st
