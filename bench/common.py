"""What the benchmarks and the tests both build on: the speech clips, long-form files joined from them, the
ffmpeg encoder, the long-form set's own scorer, and the CPU and steal clocks the benchmarks report.

One copy so that a benchmark measures the same inputs the tests assert on (the tests' ``long_form`` fixture and
``bench_transcribe``'s long-form file are one function), and so that a change to how clips are read or files
encoded reaches every script. Light on purpose: numpy and ``pipeline.audio.media`` only (no torch), so the fast tests
can import it.

The data lives outside the repository: ``../shared/speech`` (clips with ``references.jsonl``; override with
``$PODSCRIBE_SPEECH_DIR``) and ``../shared/longform`` (episodes, ``<name>.ref.json`` and ``score.py``; override
with ``$PODSCRIBE_LONGFORM_DIR``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.audio import media

REPO = Path(__file__).resolve().parents[1]
SPEECH = Path(os.environ.get("PODSCRIBE_SPEECH_DIR", REPO.parent / "shared" / "speech"))
LONGFORM = Path(os.environ.get("PODSCRIBE_LONGFORM_DIR", REPO.parent / "shared" / "longform"))


# -- speech clips ---------------------------------------------------------------------------------------------


@dataclass
class Clip:
    path: Path
    text: str
    duration_s: float
    ref_type: str
    language: str
    raw: dict


def speech_clips(speech: Path = SPEECH) -> list[Clip]:
    """Every clip of ``speech/references.jsonl`` in its order; empty when the index is missing."""
    index = speech / "references.jsonl"
    if not index.is_file():
        return []
    out = []
    for line in index.read_text().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        out.append(Clip(speech / r["audio"], r["text"], r["duration_s"], r["ref_type"], r["language"], r))
    return out


def english_human(clips: list[Clip]) -> list[Clip]:
    """The English clips with a human transcript: the set every WER here is measured on."""
    return [c for c in clips if c.language == "en" and c.ref_type == "human"]


def english_clips(speech: Path = SPEECH, count: int = 0) -> list[Clip]:
    """The English human-referenced clips of ``speech``, the first ``count`` of them when given."""
    found = english_human(speech_clips(speech))
    return found[:count] if count > 0 else found


# -- ffmpeg ---------------------------------------------------------------------------------------------------


def ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", *args], check=True)


def encode(path: Path, samples: np.ndarray, *output_args: str) -> Path:
    """Write float32 16 kHz mono samples to ``path`` through ffmpeg (the container and codec from its suffix,
    ``output_args`` before it, e.g. ``"-b:a", "64k"``)."""
    subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "f32le", "-ar", str(media.SAMPLE_RATE), "-ac", "1"]
        + ["-i", "pipe:", *output_args, str(path)],
        input=samples.astype(np.float32).tobytes(),
        check=True,
    )
    return path


# -- long-form files joined from clips ------------------------------------------------------------------------


@dataclass
class Joined:
    samples: np.ndarray  # float32 16 kHz mono
    spans_s: list[tuple[float, float]]  # (start, end) of each clip in the file
    texts: list[str]  # each clip's reference, in order

    @property
    def duration_s(self) -> float:
        return len(self.samples) / media.SAMPLE_RATE


def join_clips(
    clips: list[Clip], seconds: float, seed: int = 7, pause_s: tuple[float, float] = (0.4, 2.0), loop: bool = False
) -> Joined:
    """The clips one after the other, each followed by a pause drawn from ``pause_s``, until more than ``seconds``
    are joined. ``loop``: go round the clips again until then and cut at exactly ``seconds`` (an episode of a given
    length); otherwise stop after the clip and pause that pass it (or at the last clip)."""
    rng = np.random.default_rng(seed)
    need = int(seconds * media.SAMPLE_RATE)
    decoded: dict[Path, np.ndarray] = {}
    parts, spans, texts, pos = [], [], [], 0
    while pos <= need:
        for clip in clips:
            samples = decoded.setdefault(clip.path, media.decode(clip.path))
            gap = np.zeros(int(rng.uniform(*pause_s) * media.SAMPLE_RATE), np.float32)
            parts += [samples, gap]
            spans.append((pos / media.SAMPLE_RATE, (pos + len(samples)) / media.SAMPLE_RATE))
            texts.append(clip.text)
            pos += len(samples) + len(gap)
            if pos > need:
                break
        if not loop or not clips:
            break
    samples = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    return Joined(samples[:need] if loop else samples, spans, texts)


def long_form(clips: list[Clip], folder: Path, seconds: float = 180) -> tuple[Path, Joined]:
    """~3 minutes of ``clips`` (sorted by file name) joined with pauses of 0.4-2.0 s, as ``long.mp3`` (96 kb/s,
    encoded from a 16-bit wav) in ``folder``: the tests' long-form file and bench_transcribe's."""
    joined = join_clips(sorted(clips, key=lambda c: c.path.name), seconds)
    wav = encode(folder / "long.wav", joined.samples)
    mp3 = folder / "long.mp3"
    ffmpeg("-i", str(wav), "-b:a", "96k", str(mp3))
    return mp3, joined


# -- the long-form set and its scorer -------------------------------------------------------------------------


def load_scorer(longform: Path = LONGFORM):
    """The set's own score.py, imported as a module (each set may carry its own version)."""
    spec = importlib.util.spec_from_file_location("longform_score", longform / "score.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def discover_episodes(longform: Path = LONGFORM) -> list[str]:
    """The default episode list: the name of every <name>.ref.json in the folder, sorted."""
    return sorted(p.name[: -len(".ref.json")] for p in longform.glob("*.ref.json"))


def episode_files(longform: Path, names: list[str]) -> dict[str, Path]:
    """Episode name -> its audio file (exits with the known names when one is unknown)."""
    refs = {json.loads(p.read_text())["audio"]: p for p in sorted(longform.glob("*.ref.json"))}
    out = {}
    for name in names:
        found = next((a for a in refs if a.split(".", 1)[0] == name), None)
        if found is None:
            sys.exit(f"unknown episode {name!r}; have {sorted(a.split('.', 1)[0] for a in refs)}")
        out[name] = longform / found
    return out


def score(scorer, longform: Path, result: dict) -> dict:
    """Score ``result["episodes"][name]["rows"]`` (dicts with audio, start, end, text) with the set's scorer:
    overall, per episode, and the per-sentence details."""
    refs = scorer.load_refs(longform)
    per, details = {}, {}
    for name, ep in result["episodes"].items():
        audio_name = next(a for a in refs if a.split(".", 1)[0] == name)
        rows = [dict(r, file=r["audio"], row=i) for i, r in enumerate(ep["rows"])]
        e = scorer.score_episode(refs[audio_name], rows)
        details[name] = e.pop("_details")
        per[audio_name] = e
    overall = scorer.summarize(per)
    for e in per.values():
        e.pop("_sub", None)
        e["timestamps"].pop("_start_errors", None)
        e["timestamps"].pop("_end_errors", None)
    return {"overall": overall, "episodes": {a.split(".", 1)[0]: e for a, e in per.items()}, "details": details}


# -- job dirs written directly (the archive benchmark and the search/site tests) ------------------------------


def write_job(root: Path, episodes: list[dict], pending: list[str] = (), outputs: dict | None = None) -> Path:
    """A job dir as podscribe writes one, from rows given here instead of decoded: for each episode a files row
    (``file_id``, ``path``, ``status`` and any other column of the files table; counts filled in from its segments)
    and ``segments`` (rows of the segments table, any column left out is null); ``pending``: inputs listed in
    job.json without a row; ``outputs``: job.json's record of the files the job writes. Tables are written with
    ``manifest.write_table`` (page CRCs), job.json with ``JobDir.write_job``."""
    from pipeline.storage.manifest import JobDir, write_table
    from pipeline.storage.tables import FILES_SCHEMA, SEGMENTS_SCHEMA

    job = JobDir(root)
    root.mkdir(parents=True, exist_ok=True)
    inputs = []
    for ep in episodes:
        row = {k: v for k, v in ep.items() if k != "segments"}
        segments = [{"file_id": row["file_id"], "path": row["path"], "flags": [], **s} for s in ep.get("segments", [])]
        row.setdefault("paths", [row["path"]])
        row.setdefault("n_segments", len(segments))
        row.setdefault("n_flagged", sum(1 for s in segments if s["flags"]))
        row.setdefault("n_words", sum(len(s.get("words") or []) for s in segments))
        speakers = {s.get("speaker") for s in segments} - {None}
        row.setdefault("n_speakers", len(speakers) if speakers else None)
        if segments:
            write_table(job.table_path("segments", row["file_id"]), segments, SEGMENTS_SCHEMA)
        write_table(job.table_path("files", row["file_id"]), [row], FILES_SCHEMA)
        inputs += row["paths"]
    job.write_job({"models": {"main": "synthetic"}}, inputs + list(pending), outputs)
    return root


# -- what a run cost ------------------------------------------------------------------------------------------


def cpu_s() -> float:
    """CPU seconds of this process, every thread, and of its children that have ended (podscribe's ffmpeg, a child
    run): steadier than wall time on a busy machine."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def steal_s() -> float:
    """The machine's steal since boot, all CPUs (``/proc/stat``'s eighth field: time the hypervisor gave no program
    here; 0 where there is none)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0
