"""A run's settings: built-in defaults, then the job file, then the flags; checked, then made into the option
objects by the option table's owners (``options.py``). Nothing here loads a model: a bad argument is exit 2 at
once, before any job is created."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from pathlib import Path

import click

from ..audio.media import CutOptions
from ..decode.options import DecodeOptions
from ..diarize.options import DiarizeOptions, decoded_without_words
from ..facts.languages import language_code
from ..job.options import ADDED, OPTIONS, default, owned
from ..models.registry import ModelUnavailable, check_name
from ..outputs.cues import CueRules
from ..outputs.export import ALL_FORMATS, FORMATS

DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?|mps")
# Every job-file key a flag also sets, with its default (the owner dataclass field's: one source for each).
DEFAULTS = {o.key: default(o) for o in OPTIONS if o.job_file and o.flags}
RUN_FLAGS = tuple(o.key for o in OPTIONS if o.kind == "flag")  # --restart, --dry-run, ...: the run's, not the job's
# What decides a transcript (a whisper-mode job is keyed by them): what job.json's configuration records, but for the
# speed-only options and the speaker-label options (changing them relabels the job's files); --diarize itself is in
# (a run without it on a diarized job would be refused).
TRANSCRIPT_KEYS = (
    "model",
    "compute_type",
    *(o.key for o in OPTIONS if o.config_path and not o.speed_only and not o.changes_labels),
    "diarize",
)
# Keys that decide a transcript but came after whisper-mode job names did, with the value that does what older
# versions did (the option table's `older`): at that value a key is left out of the name, so a folder an older
# version made is still found.
NAMED_SINCE = {o.key: o.older for o in OPTIONS if o.key in {"prefer_piece"}}


def output_formats(value) -> list[str] | None:
    """-f/--output-format srt,vtt (or a job file's list); all: whisper's five, beside the others named
    (``all,podcast``); an unknown name stays, to be refused by name (``check``)."""
    if value is None:
        return None
    items = value if isinstance(value, list) else str(value).split(",")
    items = [x.strip().lower() for x in items if x.strip()]
    return list(dict.fromkeys(f for x in items for f in (FORMATS if x == "all" else (x,))))


def merge_settings(flags: dict, job: dict | None = None, asked: set[str] | None = None) -> dict:
    """Defaults, then the job file, then the flags. ``asked``: the keys the user set (flags given, job-file keys;
    None: every flag that is not None): a job resumed takes its own values for the others (``adopt``).
    ``word_timestamps`` stays None unless asked: what it defaults to depends on the job (``job_options``)."""
    settings = dict(DEFAULTS)
    settings.update({k: v for k, v in (job or {}).items() if k in DEFAULTS})
    settings.update({k: v for k, v in flags.items() if k in DEFAULTS and v is not None})
    settings["subtitles"] = output_formats(settings["subtitles"]) or []
    if asked is None:
        asked = {k for k, v in flags.items() if k in DEFAULTS and v is not None}
    settings[ASKED] = frozenset(asked | set(job or {}))
    return settings


ASKED = "asked"  # the settings' entry naming the keys the user set (not an option)


def adopt(settings: dict, config: dict) -> list[str]:
    """A resumed job's own values for what the user did not ask for, so that a run is compared with the job on
    what was asked, never on defaults nobody touched (a job made with subtitles, run again without -f to add an
    episode, was refused over word timestamps the user never set): every output-deciding option with its
    place in job.json's configuration (an option the job predates: the value that does what it did), the model,
    and --diarize. Returns the keys adopted."""
    asked = settings.get(ASKED, frozenset())
    adopted = []

    def recorded(dotted: str):
        node = config
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return ADDED.get(dotted, _MISSING)
            node = node[part]
        return node

    for option in OPTIONS:
        path = option.config_path
        if not path or option.speed_only or option.key in asked:
            continue
        if path.startswith("diarize.") and "diarize" not in config:
            continue
        value = recorded(path)
        if value is not _MISSING and settings.get(option.key) != value:
            settings[option.key] = value
            adopted.append(option.key)
    model = recorded("models.model")
    if "model" not in asked and isinstance(model, str) and settings["model"] != model:
        settings["model"] = model
        adopted.append("model")
    if "diarize" not in asked and isinstance(config.get("diarize"), dict) and not settings["diarize"]:
        settings["diarize"] = True
        adopted.append("diarize")
    return adopted


_MISSING = object()


def recorded_config(out_dir: Path) -> dict | None:
    """job.json's configuration in ``out_dir`` (None: none, or damaged: the runner judges it, and adopts
    nothing from it)."""
    from ..facts.errors import DamagedState
    from ..storage.manifest import JobDir

    try:
        record = JobDir(out_dir).read_job()
    except (DamagedState, OSError):
        return None
    return record.get("config") if record else None


def cue_rules(settings: dict) -> CueRules:
    """The cue rules, checked (``export`` takes them without a job's other settings)."""
    from ..outputs.speaker_names import ShapeError, parse
    from .validate import problems

    out_of_range = problems(settings)
    if out_of_range:
        raise click.UsageError("; ".join(out_of_range))
    values = owned("cues", settings)
    try:
        values["speaker_names"], values["show_speaker_names"] = parse(values.get("speaker_names") or None)
    except ShapeError as exc:
        raise click.UsageError(str(exc)) from exc
    return CueRules(**values)


def check(out_dir: Path, settings: dict) -> None:
    """Every argument checked before anything loads or is created: a bad one is exit 2 at once."""
    from .validate import problems

    out_of_range = problems(settings)  # ranges and choices, command line and job file alike
    if out_of_range:
        raise click.UsageError("; ".join(out_of_range))
    if settings["model"]:
        try:
            check_name(str(settings["model"]))  # a URL, or a hub model offline: said at once
        except ModelUnavailable as exc:
            raise click.UsageError(str(exc)) from exc
    unknown = sorted(set(settings["subtitles"]) - set(ALL_FORMATS))
    if unknown:
        raise click.UsageError(f"unknown subtitle format(s) {', '.join(unknown)}; choose from {', '.join(ALL_FORMATS)}")
    if not DEVICE.fullmatch(str(settings["device"])):
        raise click.UsageError(f"--device {settings['device']!r}: choose auto, cpu, cuda or cuda:N")
    if not settings["diarize"] and (settings["num_speakers"] or settings["diarizer"] != DEFAULTS["diarizer"]):
        raise click.UsageError("--num-speakers and --diarizer label speakers: add --diarize (or diarize = true)")
    for parent in (out_dir, *out_dir.parents):
        if parent.exists():
            if not parent.is_dir():
                raise click.UsageError(f"--out {out_dir}: {parent} is a file, not a folder")
            break


def job_options(out_dir: Path, settings: dict, flags: dict):
    """The JobOptions of a run, each option object built from its rows; the special cases are below."""
    check(out_dir, settings)
    from ..job.config import JobOptions

    config = None if flags.get("restart") else recorded_config(out_dir)
    adopted = adopt(settings, config) if config is not None else []
    if settings["word_timestamps"] is None:  # on for subtitles; for --diarize, as the job was decoded
        settings["word_timestamps"] = bool(settings["subtitles"]) or (None if settings["diarize"] else False)
    if settings["word_timestamps"] is None:  # --diarize splits segments at a change of speaker: it needs the words
        settings["word_timestamps"] = not decoded_without_words(out_dir)
    if settings["subtitles"] and "word_timestamps" in adopted and not settings["word_timestamps"]:
        click.echo(
            f"note: {out_dir} was decoded without word timestamps: the subtitles' cue times inside segments are "
            "estimated (--word-timestamps with --restart, or another --out, for aligned ones)",
            err=True,
        )
    run = {**settings, **{key: bool(flags.get(key)) for key in RUN_FLAGS}}
    try:
        decode = DecodeOptions(**owned("decode", settings))
        rules = cue_rules(settings)
        cut = CutOptions(**owned("cut", settings))
        diarize = DiarizeOptions(**owned("diarize", settings)) if settings["diarize"] else None  # None: off
        return JobOptions(
            **{**owned("job", run), "diarize": diarize},
            out_dir=out_dir,
            decode=decode,
            cut=cut,
            cue_rules=rules,
            outputs_named_only=bool(settings.get("outputs_named_only")),
            progress=not flags.get("quiet"),
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc


def whisper_job_name(settings: dict, resolved: bool = True) -> str:
    """The job folder of a whisper-mode run: ``<model>-<language>-<hash of what decides the transcript>``, the
    model and compute type as this machine resolves them (the default model, ``auto``, whisper's short names), so
    that `-f all -o subs/` and the same with `--model base` are one job, not two that decode everything twice.
    Another --model or --language in the same output folder is another job beside it (never exit 4), and the
    same command again resumes its own. ``resolved=False``: the name versions before this one gave (as the model
    and compute type were spelled), which a folder made by them keeps."""
    deciding = {k: settings[k] for k in TRANSCRIPT_KEYS if k not in NAMED_SINCE or settings[k] != NAMED_SINCE[k]}
    with contextlib.suppress(ValueError):  # an unknown one is refused with the other arguments
        deciding["language"] = language_code(deciding["language"])
    if resolved:
        from ..facts.runtime import pick_runtime
        from ..models.load import default_names  # torch: a job is about to start
        from ..models.registry import hub_id

        runtime = pick_runtime(settings["device"], settings["compute_type"])
        deciding["model"] = hub_id(str(settings["model"] or default_names(runtime)[0]))
        deciding["compute_type"] = runtime.compute_type
        deciding["device"] = runtime.device.type
    else:
        if deciding["word_timestamps"] is None:  # as those versions had resolved it by then
            deciding["word_timestamps"] = bool(settings["subtitles"]) or (None if settings["diarize"] else False)
        if deciding["model"] is None:  # the runtime's default depends on the device
            deciding["device"] = settings["device"]
    digest = hashlib.sha256(json.dumps(deciding, sort_keys=True, default=str).encode()).hexdigest()[:8]
    model = re.sub(r"[^\w.-]+", "_", str(deciding["model"] or "default")).strip("_")[-40:]
    return f"{model}-{deciding['language'] or 'auto'}-{digest}"
