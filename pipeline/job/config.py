"""A job's configuration: the options of a run, what of them decides the output, and the policy for a run that
resumes a job made with other options or by an older version.

- ``job_config`` is what decides the output; a resumed job must match it but for ``SPEED_ONLY`` (every decoding
  mode gives the main model's own tokens) and the speaker labels (``LABELS``: other options relabel);
- ``ADDED``: options added after job dirs were made, with the value that does what older versions did;
- ``output_hash``: the configuration as each files row keeps it, which decides when job.json is lost;
- ``compute_type``: ``auto`` keeps the compute type a job was started with (its tokens depend on it).
The models are loaded here (``job_models``), torch with them: importing this module loads neither.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..audio.media import CutOptions
from ..decode import DecodeOptions
from ..diarize.options import DiarizeOptions
from ..facts.errors import ConfigChanged, DamagedState, UsageProblem
from ..facts.events import NOTHING, Events
from ..facts.runtime import pick_runtime, recorded_compute_type
from ..outputs.cues import CueRules
from ..storage import workers
from ..storage.manifest import JobDir
from . import options as option_table

if TYPE_CHECKING:
    from ..diarize.diarizer import Diarizer
    from ..models.load import Models

log = logging.getLogger("podscribe")


@dataclass
class JobOptions:
    out_dir: Path
    model: str | None = None  # None: the runtime's default
    assistant: str | None = "default"
    device: str = "auto"
    compute_type: str = "auto"  # runtime.COMPUTE_TYPES; auto resumes a job with the one it started with
    decode: DecodeOptions = field(default_factory=DecodeOptions)
    cut: CutOptions = field(default_factory=CutOptions)
    cache_dir: Path | None = None
    progress: bool = True
    retry_failed: bool = False
    restart: bool = False
    checkpoint_pieces: bool = True  # persist each decoded batch (resume inside a file); off only to measure its cost
    subtitles: list[str] = field(default_factory=list)  # formats written as each file is done, and at the end
    output_dir: Path | None = None  # where they go (default <out_dir>/subtitles)
    outputs_named_only: bool = False  # whisper mode: outputs only for the inputs named in this command
    export_at_end: bool = True  # write every output once all workers are done (off for all but the last pass)
    launched_at: str | None = None  # --workers N: when the launch began (rows done since are this launch's work)
    cue_rules: CueRules = field(default_factory=CueRules)
    threads: int | None = None  # torch CPU threads (None: torch's default)
    max_attempts: int = workers.MAX_ATTEMPTS  # watched deaths of a suspect file decoded alone before it fails
    diarize: DiarizeOptions | None = None  # speaker labels (None: none)
    writes_outputs: bool = True  # False for the workers an engine starts: the process that started them writes
    site: Path | None = None  # a transcript site kept up to date as files are done (pipeline/browse/site)
    events: Events = NOTHING  # what the run tells as it goes: nothing, or the tests' trace (facts/events.py)


def job_config(options: JobOptions, models: Models) -> dict:
    """What decides the output: a resumed job must match it (but for SPEED_ONLY)."""
    return {
        "models": models.describe(),
        "decode": asdict(options.decode),
        "cut": asdict(options.cut),
        "threads": options.threads,
        **({"diarize": asdict(options.diarize)} if options.diarize else {}),
    }


# Every decoding mode gives the main model's own tokens (tests/test_identity.py), so the assistant and
# the batch size may change between runs of a job: resume a night's job with --assistant auto, or smaller batches.
# The options marked speed_only in the option table, by their paths in the configuration.
SPEED_ONLY = option_table.SPEED_ONLY

# Speaker labels are made after the transcript and from it: adding or changing --diarize relabels finished files
# (no decoding); a run without --diarize on a diarized job is refused (it would leave files unlabelled).
LABELS = "diarize"

# Options added after job dirs were made, with the value that does what older versions did (the option table's
# `older`): a job dir made before the second chances resumes with `--no-coverage --fallback-beams 0` (the refusal
# names them).
ADDED = option_table.ADDED


def output_hash(config: dict) -> str:
    """The hash of what decides the tokens (SPEED_ONLY left out), kept in every files row: it checks
    the configuration when job.json is lost."""
    deciding = json.loads(json.dumps(config))
    deciding.pop(LABELS, None)
    for dotted in SPEED_ONLY:
        *parents, leaf = dotted.split(".")
        node = deciding
        for key in parents:
            node = node.get(key, {})
        node.pop(leaf, None)
    return JobDir.config_hash(deciding)


def speaker_config(options: JobOptions) -> str | None:
    """The hash of this run's diarization options, as a labelled files row keeps it (None: no --diarize)."""
    return JobDir.config_hash(asdict(options.diarize)) if options.diarize else None


def check_config(job: JobDir, config: dict, rows: list[dict], joining: bool = False) -> None:
    """job.json decides; when it is lost or damaged, the files rows' hashes decide (and job.json is rebuilt).
    Other speaker-label options relabel finished files, unless other workers are at work (``joining``): workers
    of one job label alike."""
    try:
        old = job.read_job()
        why = f"{job.root / 'job.json'} is missing"
    except DamagedState as exc:
        old, why = None, str(exc)
    if old is not None:
        relabel = LABELS in config and not joining  # workers at work together must label alike
        labels = (LABELS, *(f"{LABELS}.{key}" for key in config[LABELS])) if relabel else ()
        try:
            job.check_config(config, SPEED_ONLY + labels, old, ADDED)
        except ConfigChanged as exc:
            raise ConfigChanged(f"{exc}{as_made(exc.changes)}", exc.changes) from None
        return
    if not rows:
        return
    if LABELS not in config and any(r.get("speaker_config") for r in rows):
        raise ConfigChanged(
            f"{why}, and the results in {job.root} carry speaker labels (--diarize): run with --diarize "
            "(and the speaker options they were made with), another --out, or --restart to start over."
        )
    hashes = {r.get("config_hash") for r in rows}
    if hashes == {output_hash(config)}:
        log.warning("%s; the results there were made with this configuration: rebuilding it", why)
        return
    if None in hashes:
        raise DamagedState(
            f"{why}, and the results in {job.root} are older than the configuration hash in "
            "their rows, so podscribe cannot tell whether these options made them. Restore job.json, "
            "use another --out, or --restart to start over."
        )
    raise ConfigChanged(
        f"{why}, and the results in {job.root} were made with another configuration. Use the "
        "options they were made with, another --out, or --restart to start over."
    )


def as_made(changes) -> str:
    """The flags that resume a job as it was made, for a refusal: what a night's job needs after an upgrade changed
    a default (`--prefer-piece 15`)."""
    flags = [option_table.as_flags(path, before) for path, before, _ in changes]
    if not flags or None in flags:
        return ""
    return f" To resume it as it was made: {' '.join(flags)}."


def compute_type(options: JobOptions) -> str:
    """``auto`` on a job started before (on this kind of device) is the compute type it was started with: its
    tokens depend on it, and a night's job started in float32 resumes as it began."""
    if options.compute_type != "auto" or options.restart:
        return options.compute_type
    job = JobDir(options.out_dir)
    recorded = []
    with contextlib.suppress(DamagedState):
        recorded.append(((job.read_job() or {}).get("config", {}).get("models") or {}).get("runtime"))
    if not any(recorded):  # job.json lost or damaged: the rows say what made them
        with contextlib.suppress(DamagedState):
            recorded = [row.get("runtime") for row in job.file_rows()]
    device = pick_runtime(options.device, "float32").device.type
    for describe in recorded:
        recorded_type = recorded_compute_type(describe)
        if recorded_type and describe.startswith(f"{device}/"):
            return recorded_type
    return "auto"


def job_models(options: JobOptions) -> Models:
    from ..models.load import load_models  # torch and transformers: when a job starts, not when imported

    if options.progress:  # seconds of silence otherwise
        print(f"loading {options.model or 'the default model'} ...", file=sys.stderr, flush=True)
    runtime = pick_runtime(options.device, compute_type(options))
    return load_models(options.model, options.assistant, runtime, options.cache_dir)


def set_threads(options: JobOptions) -> None:
    """--threads: torch's CPU threads, set before the models run."""
    if options.threads:
        import torch

        torch.set_num_threads(options.threads)


def load_diarizer(options: JobOptions) -> Diarizer | None:
    """Loaded at job start with the models: a missing embedder or pyannote token stops the run before any decoding."""
    if options.diarize is None:
        return None
    from ..diarize.diarizer import Diarizer
    from ..diarize.embed import EmbedderMissing

    try:
        return Diarizer(options.diarize)
    except EmbedderMissing as exc:
        raise UsageProblem(str(exc)) from exc
