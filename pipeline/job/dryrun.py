"""`--dry-run`: the plan before the night — which inputs are left to decode (a resumed job's done files said as
done, counted apart), how many hours of audio, and how long this machine should take, from what it measured on
earlier runs decoding the same way.

A rate depends on much more than the model: the compute type and device, the batch size, the threads, how many
workers share the machine, word timings, an assistant, speaker labels, and the files' length (a file under 30 s is
one piece padded to Whisper's 30 s window: it costs a whole piece whatever its length; 2 s clips decoded at 0.95x
real time where 5-11 s clips did 3.3x, tiny.en on this 2-core CPU). One latest rate per model
gave an estimate 10x off after a run on one short clip (the model's load was counted as decoding, too). So each
CLI run that decodes something records, under a key of all of these (``RateKey``) and per length class, the audio
seconds and the decoding seconds of the files it did (each file's own ``wall_s``: no load, no planning), the last
``KEEP_RUNS`` runs of each key in ``<cache dir>/rates.json``. The estimate is audio over audio per decoding
second, summed over those runs (weighted by audio seconds, not per file or per run), divided among the workers.
Where no run measured the same key for the length class of a file left, there is no estimate: it says so, with
what was measured here instead. Nothing is written into a job dir and no model is loaded.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..audio import media
from ..audio.media import AudioError
from ..models.registry import default_cache_dir
from ..storage.atomic import atomic_write_bytes, read_json_dict
from .progress import clock

RATES = "rates.json"
KEEP_RUNS = 20  # runs kept per key: the machine's recent rate, not its history
# Length classes, by upper bound in seconds: a rate is comparable within one. Under 30 s a file is one padded
# piece (a cost per file more than per second: two classes keep 2 s clips apart from 25 s ones); from 30 s on,
# pieces grow with the length and the cost per audio second settles.
LENGTH_CLASSES = (
    ("under_10s", 10.0, "files under 10 s"),
    ("10_30s", 30.0, "files of 10 to 30 s"),
    ("30s_10min", 600.0, "files of 30 s to 10 min"),
    ("10min_up", float("inf"), "files of 10 min and more"),
)
LENGTHS = {name: said for name, _, said in LENGTH_CLASSES}


@dataclass(frozen=True)
class RateKey:
    """What changes how fast this machine decodes (the file's length class aside)."""

    model: str
    compute_type: str
    device: str
    batch_size: int | str  # "auto": by the model (``decode.options.default_batch_size``)
    threads: str  # "auto": torch's default for the run's workers
    workers: int
    word_timestamps: bool
    assistant: str
    diarize: bool

    def text(self, length: str) -> str:
        return "|".join(f"{k}={v}" for k, v in asdict(self).items()) + f"|length={length}"

    def describe(self) -> str:
        return (
            f"{self.model} {self.compute_type} on {self.device}, batch {self.batch_size}, threads {self.threads}, "
            f"{self.workers} worker{'s' * (self.workers > 1)}, word timestamps {'on' if self.word_timestamps else 'off'}, "
            f"assistant {self.assistant}{', speaker labels' if self.diarize else ''}"
        )


def rate_key(options, workers: int = 1) -> RateKey:
    """The key of a run with these JobOptions and ``workers`` workers."""
    return RateKey(
        model=options.model or "default",
        compute_type=options.compute_type,
        device=options.device,
        batch_size=options.decode.batch_size or "auto",
        threads=str(options.threads or "auto"),
        workers=max(1, workers or 1),
        word_timestamps=bool(options.decode.word_timestamps),
        assistant=str(options.assistant),
        diarize=options.diarize is not None,
    )


def length_class(duration_s: float | None) -> str:
    return next(name for name, below_s, _ in LENGTH_CLASSES if (duration_s or 0.0) < below_s)


def _rates_path(cache_dir: Path | None) -> Path:
    return Path(cache_dir or default_cache_dir()) / RATES


def _runs(entry) -> list[tuple[float, float]]:
    """A key's recorded runs, [audio s, decoding s] each; an entry of another shape (an older podscribe's one
    latest rate, load included) is no comparable measurement."""
    runs = entry.get("runs") if isinstance(entry, dict) else None
    out = []
    for run in runs if isinstance(runs, list) else []:
        if isinstance(run, list) and len(run) == 2 and all(isinstance(x, int | float) and x > 0 for x in run):
            out.append((float(run[0]), float(run[1])))
    return out


def record_run(key: RateKey, decoded: list[tuple[float, float]], cache_dir: Path | None = None) -> None:
    """Remember what the files of a run cost (``decoded``: each file's audio and decoding seconds), per length
    class (best effort: a cache that cannot be written is no error)."""
    by_length: dict[str, list[float]] = {}
    for duration_s, wall_s in decoded:
        if duration_s and wall_s and duration_s > 0 and wall_s > 0:
            sums = by_length.setdefault(length_class(duration_s), [0.0, 0.0])
            sums[0] += duration_s
            sums[1] += wall_s
    if not by_length:
        return
    path = _rates_path(cache_dir)
    rates = read_json_dict(path)
    for length, (audio_s, wall_s) in by_length.items():
        text = key.text(length)
        rates[text] = {"runs": [*map(list, _runs(rates.get(text))), [audio_s, wall_s]][-KEEP_RUNS:]}
    try:
        atomic_write_bytes(path, json.dumps(rates, indent=1, sort_keys=True).encode())
    except Exception:  # a read-only cache: the estimate is only a convenience
        pass


def measured_rate(key: RateKey, length: str, cache_dir: Path | None = None) -> float | None:
    """Audio seconds per decoding second of one worker, over the runs recorded under ``key`` for ``length``."""
    runs = _runs(read_json_dict(_rates_path(cache_dir)).get(key.text(length)))
    audio_s, wall_s = sum(a for a, _ in runs), sum(w for _, w in runs)
    return audio_s / wall_s if audio_s > 0 and wall_s > 0 else None


def _measured_instead(key: RateKey, cache_dir: Path | None) -> list[str]:
    """The rates recorded here for the same model and device, said as what they were measured with."""
    out = []
    for text, entry in sorted(read_json_dict(_rates_path(cache_dir)).items()):
        fields = dict(part.split("=", 1) for part in text.split("|") if "=" in part)
        runs = _runs(entry)
        if not runs or fields.get("model") != key.model:
            continue
        rate = sum(a for a, _ in runs) / sum(w for _, w in runs)
        what = ", ".join(f"{k} {v}" for k, v in fields.items() if k not in ("model", "length"))
        out.append(f"    {rate:.1f}x real time per worker ({what}) on {LENGTHS.get(fields.get('length'), '?')}")
    return out[:6]


@dataclass
class _Job:
    """What a run would do with the inputs, as it would plan it (``plan.py``), read without writing."""

    done: list[tuple[str, float]]  # (path, audio s)
    failed: list[str]
    left: list  # InputRef
    probed: dict  # path of an input left -> what ffprobe said of its content on an earlier run (probes.json)
    missing: list[str] = field(default_factory=list)  # cannot be read now; earlier results kept
    damaged: list[str] = field(default_factory=list)  # damaged tables (the run moves them aside, decodes again)


def _job_state(refs: list, out_dir: Path | None, options) -> _Job:
    from ..facts.errors import DamagedState
    from ..storage.manifest import JobDir
    from ..storage.probes import ProbeCache
    from .config import speaker_config
    from .plan import plan
    from .state import read_state

    job = JobDir(out_dir) if out_dir is not None else None
    if job is None or options.restart or not (job.root / "job.json").is_file():
        return _Job([], [], list(refs), {})
    try:  # the fingerprints are read, never saved: a dry run writes nothing
        state = read_state(job, refs, job.fingerprints())
    except DamagedState:
        return _Job([], [], list(refs), {})
    planned = plan(state, speaker_config(options), options.retry_failed)
    known = ProbeCache(job.root)
    out = _Job([], [], [], {}, [path for path, _ in planned.missing], [str(path) for path, _ in state.damaged])
    missing = set(out.missing)
    for i in state.inputs:
        if i.path in missing:
            continue
        now = planned.states.get(i.ident.file_id)
        if now in ("done", "relabel"):  # (speaker labels added to a done file: not decoded again)
            out.done.append((i.path, planned.rows[i.ident.file_id]["duration_s"] or 0.0))
        elif now == "failed":
            out.failed.append(i.path)
        else:
            out.left.append(i.ref)
            info = known.get(i.ident.file_id) if i.ident.readable else None
            if info is not None:
                out.probed[i.path] = info
    return out


def plan(inputs: list[str], options, workers: int = 1) -> str:
    """What a run of ``inputs`` with these JobOptions would decode, and the estimate; a text for the terminal."""
    from .inputs import expand_inputs

    refs = expand_inputs(inputs)
    out_dir = Path(options.out_dir) if options.out_dir else None
    job = _job_state(refs, out_dir, options)

    def probed(ref):
        if str(ref.path) in job.probed:  # probed by a run of the job: no ffprobe again
            return job.probed[str(ref.path)]
        if ref.error:
            return AudioError(ref.error)
        try:
            return media.probe(ref.path)
        except AudioError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=4) as pool:
        infos = list(pool.map(probed, job.left))
    good = [(ref, info) for ref, info in zip(job.left, infos) if isinstance(info, media.AudioInfo)]
    bad = [(ref, info) for ref, info in zip(job.left, infos) if isinstance(info, AudioError)]
    total_s = sum(info.duration_s or 0.0 for _, info in good)
    lines = []
    if job.done or job.failed:
        done_s = sum(s for _, s in job.done)
        lines.append(
            f"job {out_dir}: {len(job.done)} inputs done ({clock(done_s)} of audio), not decoded again"
            + (f"; {len(job.failed)} failed on an earlier run (--retry-failed tries them again)" if job.failed else "")
        )
        lines += [f"  done    {path}" for path, _ in job.done]
        lines += [f"  failed  {path}" for path in job.failed]
    lines += [f"  missing {path} (cannot be read now; the results of an earlier run are kept)" for path in job.missing]
    lines += [
        f"  damaged table {path}: the run moves it to damaged/ and decodes its input again" for path in job.damaged
    ]
    lines.append(
        f"{len(good)} inputs left, {clock(total_s)} of audio" + (f"; {len(bad)} cannot be read" if bad else "")
    )
    lines += [f"  {clock(info.duration_s or 0.0)}  {ref.path}" for ref, info in good]
    lines += [f"  cannot be read: {ref.path}: {info}" for ref, info in bad]
    lines += estimate([info.duration_s or 0.0 for _, info in good], rate_key(options, workers), options.cache_dir)
    lines.append("dry run: nothing was decoded or written")
    return "\n".join(lines)


def estimate(durations_s: list[float], key: RateKey, cache_dir: Path | None = None) -> list[str]:
    """The estimate's lines for files of these lengths: from this machine's measured rates under ``key``, or
    none, said, where a length class of them was never measured so."""
    if not durations_s:
        return ["estimate: nothing left to decode"]
    by_length: dict[str, float] = {}
    for d in durations_s:
        by_length[length_class(d)] = by_length.get(length_class(d), 0.0) + d
    rates = {length: measured_rate(key, length, cache_dir) for length in by_length}
    missing = [length for length, rate in rates.items() if rate is None]
    if missing:
        lines = [
            f"estimate: none: no run on this machine measured {key.describe()} on "
            f"{' or '.join(LENGTHS[m] for m in missing)} (a run decoding them so records it)"
        ]
        instead = _measured_instead(key, cache_dir)
        if instead:
            lines += ["  measured here, not comparable:", *instead]
        return lines
    decoding_s = sum(audio_s / rates[length] for length, audio_s in by_length.items()) / key.workers
    order = [name for name, _, _ in LENGTH_CLASSES]
    shown = ", ".join(f"{rates[n]:.1f}x real time on {LENGTHS[n]}" for n in sorted(by_length, key=order.index))
    return [
        f"estimate: {clock(decoding_s)} of decoding, plus loading the model ({shown} per worker, measured on this "
        f"machine with {key.describe()})"
    ]
