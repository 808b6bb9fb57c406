"""Every option of a job, once: its flags, job-file key, owner field, type, range, help and compatibility facts.

The click options of ``transcribe``, ``run`` and ``export`` (``cli/flags.py``), the job-file keys
(``jobfile.KEYS``), the range and choice checks (``RANGES`` and ``CHOICES``, read by ``validate.py``), the
compatibility lists of a resumed job (``job/config.SPEED_ONLY`` / ``ADDED``) and the option objects the CLI
builds (``cli/settings.py``) are all generated from ``OPTIONS``. A flag's default is its owner dataclass
field's (``DecodeOptions``, ``CutOptions``, ``DiarizeOptions``, ``CueRules``, ``JobOptions``): one source for
each default. Adding ``--foo``: the field, one row here, and its line in jobs/example.toml and docs/options.md
(``tests/test_options.py`` says what is missing). Light on purpose (no torch): ``--help``, job files and bad
arguments answer at once.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..diarize.options import BACKENDS
from ..facts.languages import language_code
from ..facts.runtime import COMPUTE_TYPES
from ..models.registry import SELF_INT8


@dataclass(frozen=True)
class Range:
    """The values a numeric option allows, whatever their source (command line, job file)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False  # low itself refused

    def holds(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return self.high is None or value <= self.high

    def __str__(self) -> str:
        low = "" if self.low is None else f"{'above' if self.low_open else 'at least'} {self.low:g}"
        high = "" if self.high is None else f"at most {self.high:g}"
        return " and ".join(x for x in (low, high) if x) or "a finite number"


FROM_OWNER = object()  # the default is the owner field's
NEW = object()  # older job dirs need no value for it (not added after job dirs were made)
KINDS = {
    "text": str,
    "int": int,
    "float": float,
    "switch": bool,
    "list": list,
    "folder": str,
    "file": str,
    "flag": bool,
}


@dataclass(frozen=True)
class Option:
    key: str  # the job-file key and the click parameter's name
    flags: tuple[str, ...]  # "--vad/--no-vad" for a switch; () for a job-file key only
    help: str  # "{default}" is the owner's default
    section: str  # its --help section
    owner: str | None = None  # "decode.language": the field it sets; None: the run's, no option object holds it
    kind: str = "text"  # text | int | float | switch (--x/--no-x) | list (comma list) | folder | file | flag
    choices: tuple[str, ...] | None = None
    range: Range | None = None
    click_range: bool | None = None  # the command line checks the range itself (None: int options do)
    default: object = FROM_OWNER
    shown: bool = False  # transcribe's --help shows its default, and click fills it in
    speed_only: bool = False  # changes speed, never output: a resumed job may change it
    changes_labels: bool = False  # other values relabel a diarized job's files, no decoding again
    older: object = NEW  # added after job dirs were made: the value that does what older versions did
    job_file: bool = True  # job files take it
    toml: type | tuple[type, ...] | None = None  # its job-file type when not the kind's
    convert: Callable | None = None  # the setting -> the owner field's value
    recorded_as: str | None = None  # its path in job.json's configuration when not its owner's

    @property
    def field(self) -> str | None:
        return self.owner.split(".", 1)[1] if self.owner else None

    @property
    def config_path(self) -> str | None:
        """Where the job's configuration (job.json) records it, if it does."""
        if self.recorded_as:
            return self.recorded_as
        return self.owner if self.owner and self.owner.split(".")[0] in ("decode", "cut", "diarize") else None


@dataclass(frozen=True)
class Internal:
    """An owner field no option sets, and why."""

    why: str
    older: object = NEW


def language_set(value) -> tuple[str, ...] | None:
    """--languages en,nl (or a job file's list) as language codes; None: any."""
    items = value if isinstance(value, list) else str(value).split(",") if value else []
    codes = [language_code(x) for x in items if x.strip()]
    if None in codes:
        raise ValueError("--languages lists the languages to detect among; 'auto' is not one of them")
    return tuple(dict.fromkeys(codes)) or None


def path_or_none(value) -> Path | None:
    return Path(value) if value else None


MODEL = "Model and decoding"
INPUTS = "Inputs, job and outputs"
SPEAKERS = "Speakers"
CHECKS = "Voice activity and Whisper's checks"
WORKERS = "Workers"
CUES = "Cue layout (subtitles)"
SECTIONS = (MODEL, INPUTS, SPEAKERS, CHECKS, WORKERS, CUES)  # --help's order

# fmt: off
OPTIONS = (
    # Job files only: the commands take inputs as arguments, and --out with a meaning of their own.
    Option("name", (), "The job's name (default: the file's name); the default --out is manifests/<name>.", INPUTS),
    Option("inputs", (), "Files, folders and glob patterns.", INPUTS, kind="list"),
    Option("input_list", (), "A text file with one input per line.", INPUTS),
    Option("out", (), "The job directory (--out).", INPUTS, owner="job.out_dir"),
    Option("model", ("--model",), "Main model: offline alias (base, tiny.en), local Transformers or CTranslate2 dir, "
           "or hub id. Default: openai/whisper-large-v3 on CUDA, base on CPU.", MODEL, owner="job.model"),
    Option("assistant", ("--assistant",), f"Draft model for speculative decoding: a model like --model, '{SELF_INT8}' "
           "(the main model's own int8 decoder), 'auto' (measure on the first pieces whether drafting beats plain "
           "batched decoding, keep the faster; the same tokens either way), or 'none'. 'default': distil-large-v3 "
           "on CUDA for large-v3, otherwise none.", MODEL, owner="job.assistant", shown=True, speed_only=True,
           recorded_as="models.assistant"),
    Option("device", ("--device",), "auto, cpu, cuda or cuda:N.", MODEL, owner="job.device", shown=True),
    Option("compute_type", ("--compute-type", "--dtype"), "Precision of weights and arithmetic. int8 (CPU): int8 "
           "linear layers, activations quantized per token. int8_float16/int8_bfloat16/int8_float32 (any device): "
           "int8 weights, products in that dtype (saves memory, not time). auto: int8 on CPU (bfloat16 on a CPU with "
           "AMX bf16 units), float16 on CUDA; a resumed job keeps the one it started with.", MODEL,
           owner="job.compute_type", choices=COMPUTE_TYPES, shown=True),
    Option("batch_size", ("--batch-size",), "Pieces decoded together (with an assistant too; with 'auto', the largest "
           "it may pick). Default: 16 for tiny and base (models whose 16 rows of cross-attention keys take at most "
           "640 MB), 8 for larger ones.", MODEL, owner="decode.batch_size", kind="int", range=Range(1, 64), shown=True,
           speed_only=True),
    Option("language", ("--language",), "Language code or name (en, nl, German, ...); auto: detect per piece (the "
           "default).", MODEL, owner="decode.language", convert=language_code),
    Option("languages", ("--languages",), "Detect only among these, e.g. en,nl (codes or names). Default: any.", MODEL,
           owner="decode.languages", kind="list", convert=language_set),
    Option("language_mode", ("--language-mode",), "piece: detect per piece; file: detect on the first speech, then "
           "lock the file's language.", MODEL, owner="decode.language_mode", choices=("piece", "file"), shown=True),
    Option("task", ("--task",), "", MODEL, owner="decode.task", choices=("transcribe", "translate"), shown=True),
    Option("initial_prompt", ("--initial-prompt",), "Text given to every piece as the previous text (names, spelling, "
           "style), like whisper's --initial_prompt; pieces are decoded independently, so every piece gets it.", MODEL,
           owner="decode.initial_prompt"),
    Option("hotwords", ("--hotwords",), 'Names and terms to spell right, e.g. "Anna Kowalski, Tiverton FC" (in the '
           "prompt, before --initial-prompt, as faster-whisper does).", MODEL, owner="decode.hotwords"),
    Option("fallback_beams", ("--fallback-beams",), "Pieces failing Whisper's checks (looping text, log-prob below the "
           "threshold) are decoded again: beam search of this width, then seeded sampling at temperatures 0.2-1.0, "
           "the best result kept (default {default}; 0: never).", MODEL, owner="decode.fallback_beams", kind="int",
           range=Range(0, 16), older=0),
    Option("coverage", ("--coverage/--no-coverage",), "Decode again the voice (VAD) that no text covers: what greedy "
           "Whisper drops when it stops early (default on; needs the VAD).", MODEL, owner="decode.coverage",
           kind="switch", older=False),
    Option("word_timestamps", ("--word-timestamps/--no-word-timestamps",), "Word start/end/probability in the "
           "segments table. Default: on when subtitles are asked for.", MODEL, owner="decode.word_timestamps",
           kind="switch", default=None),
    Option("cache_dir", ("--cache-dir", "--model-dir"), "Where converted models are kept. Default: $PODSCRIBE_CACHE "
           "or ~/.cache/podscribe.", MODEL, owner="job.cache_dir", kind="folder", convert=path_or_none),
    Option("subtitles", ("-f", "--output-format", "--subtitles"), "Write text/subtitle files as each file is done: "
           "comma list of txt, vtt, srt, tsv, json, or all (into --output-dir); podcast: Podcasting 2.0 transcript "
           "JSON (NAME.podcast.json). Turns word timestamps on. Without --out: all.", INPUTS, owner="job.subtitles",
           kind="list"),
    Option("output_dir", ("-o", "--output-dir"), "Where those files go, named <input stem>.<ext>. Default: "
           "<out>/subtitles, or the current folder when --out is not given.", INPUTS, owner="job.output_dir",
           kind="folder", convert=path_or_none),
    Option("site", ("--site",), "Keep a static transcript site in this folder (podscribe site): built as each file "
           "is done, updated where it changed; an index, a page per episode, search of every episode.", INPUTS,
           owner="job.site", kind="folder", convert=path_or_none),
    Option("dry_run", ("--dry-run",), "Show the plan and stop: the inputs a job has left (done ones counted apart), "
           "their hours of audio, and an estimate from the rate this machine measured with the same settings on "
           "files of the same length class, or none where it has none. Writes nothing.", INPUTS,
           kind="flag", job_file=False),
    Option("retry_failed", ("--retry-failed",), "Decode again the inputs that failed in an earlier run.", INPUTS,
           owner="job.retry_failed", kind="flag", job_file=False),
    Option("restart", ("--restart",), "Forget this job dir's results and start over.", INPUTS, owner="job.restart",
           kind="flag", job_file=False),
    Option("quiet", ("-q", "--quiet"), "No progress bars (for cron).", INPUTS, kind="flag", job_file=False),
    Option("log_file", ("--log-file",), "Also log each finished or failed file here.", INPUTS, kind="file",
           job_file=False),
    Option("diarize", ("--diarize/--no-diarize",), "Speaker labels: who said each segment and word (segments split "
           "where the speaker changes), offline. Adding it to a finished job labels its files without decoding them "
           "again.", SPEAKERS, owner="job.diarize", kind="switch", default=False),
    Option("num_speakers", ("--num-speakers",), "With --diarize: exactly this many speakers (default: estimated).",
           SPEAKERS, owner="diarize.num_speakers", kind="int", range=Range(1, 32), changes_labels=True),
    Option("min_speakers", ("--min-speakers",), "With --diarize: fewest speakers to look for.", SPEAKERS,
           owner="diarize.min_speakers", kind="int", range=Range(1, 32), shown=True, changes_labels=True),
    Option("max_speakers", ("--max-speakers",), "With --diarize: most speakers to look for.", SPEAKERS,
           owner="diarize.max_speakers", kind="int", range=Range(1, 32), shown=True, changes_labels=True),
    Option("diarizer", ("--diarizer",), "ge2e: offline speaker embeddings + spectral clustering; pyannote: "
           "pyannote.audio's hub pipeline (pip install 'podscribe[pyannote]', HF_TOKEN with its terms accepted).",
           SPEAKERS, owner="diarize.backend", choices=BACKENDS, shown=True, changes_labels=True),
    Option("vad", ("--vad/--no-vad",), "Silero VAD gate: no words from music, tones or noise (default on). --no-vad "
           "transcribes pieces the VAD hears no voice in (singing over music).", CHECKS, owner="decode.vad",
           kind="switch"),
    Option("vad_threshold", ("--vad-threshold",), "Silero's speech probability above which a frame is voice (default "
           "{default}; lower keeps more speech over music).", CHECKS, owner="decode.vad_threshold", kind="float",
           range=Range(0, 1), click_range=True),
    Option("no_speech_threshold", ("--no-speech-threshold",), "Whisper's no-speech rule (default {default}).", CHECKS,
           owner="decode.no_speech_threshold", kind="float", range=Range(0, 1)),
    Option("logprob_threshold", ("--logprob-threshold",), "Average log-probability below which a no-speech piece is "
           "dropped (default {default}).", CHECKS, owner="decode.logprob_threshold", kind="float", range=Range()),
    Option("compression_ratio_threshold", ("--compression-ratio-threshold",), "Above it a text loops (default "
           "{default}).", CHECKS, owner="decode.compression_ratio_threshold", kind="float",
           range=Range(0, low_open=True)),
    Option("min_piece", ("--min-piece",), "Shortest piece in seconds (cuts prefer silences).", CHECKS,
           owner="cut.min_s", kind="float", range=Range(1, 30), shown=True),  # shorter: Whisper says nothing
    Option("max_piece", ("--max-piece",), "Longest piece in seconds (<= 30).", CHECKS, owner="cut.max_s", kind="float",
           range=Range(1, 30), shown=True),
    Option("prefer_piece", ("--prefer-piece",), "Cut at a silence after this many seconds where there is one, else "
           "after --min-piece: fuller 30 s windows, fewer of them.", CHECKS, owner="cut.prefer_s", kind="float",
           range=Range(1, 30), shown=True, older=15.0),
    Option("threads", ("--threads",), "CPU threads for torch (default: torch's own, usually the core count).",
           WORKERS, owner="job.threads", kind="int", range=Range(1, 512), speed_only=True, recorded_as="threads"),
    Option("workers", ("--workers",), "Worker processes on this job (local: on this machine, each with its share of "
           "the cores or its own GPU, default 1; ray: actors, default one per GPU of the cluster, else one per CPU). "
           "Another podscribe started on the same job dir with the same options joins as one more worker.", WORKERS,
           kind="int", range=Range(1, 1024)),
    Option("engine", ("--engine",), "local: processes on this machine; ray: Ray actors across a cluster (pip install "
           "'podscribe[ray]'; the job dir must be on storage every node mounts at the same path).", WORKERS,
           choices=("local", "ray"), default="local", shown=True),
    Option("address", ("--address",), "Ray cluster address (--engine ray; default: start Ray here).", WORKERS),
    Option("max_attempts", ("--max-attempts",), "A file a process died on is decoded last, alone, in a watched child "
           "process; when that child dies this many times in a row at the same place (out of memory, a native "
           "crash) while the job goes on, the file becomes a failed row. A killed or stopped run never counts "
           "against a file.", WORKERS, owner="job.max_attempts", kind="int", range=Range(1, 100), shown=True),
    Option("max_line_chars", ("--max-line-chars", "--max-line-width"), "Longest subtitle line, characters.", CUES,
           owner="cues.max_line_chars", kind="int", range=Range(10, 200)),  # --max-line-width: openai-whisper's
    Option("max_lines", ("--max-lines", "--max-line-count"), "Lines per cue.", CUES, owner="cues.max_lines",
           kind="int", range=Range(1, 2)),
    # Cue values a subtitle can have: 1e308 s overflowed the layout (after the whole night's decoding), 1e-300
    # characters a second flagged every cue.
    Option("max_cps", ("--max-cps",), "Reading speed limit, characters per second.", CUES, owner="cues.max_cps",
           kind="float", range=Range(1, 100)),
    Option("max_duration", ("--max-duration",), "Longest cue, seconds.", CUES, owner="cues.max_duration_s",
           kind="float", range=Range(0.5, 60)),
    Option("min_duration", ("--min-duration",), "Shortest cue, seconds (at most --max-duration).", CUES,
           owner="cues.min_duration_s", kind="float", range=Range(0, 60)),
    Option("pause_split", ("--pause-split",), "A pause longer than this starts a new cue, seconds.", CUES,
           owner="cues.pause_split_s", kind="float", range=Range(0, 60)),
    Option("speaker_labels", ("--speaker-labels/--no-speaker-labels",), "Speaker labels in subtitles and text when "
           "the job was diarized (VTT voice spans, SRT/TXT prefixes, TSV column, JSON fields).", SPEAKERS,
           owner="cues.speakers", kind="switch"),
    Option("speaker_names", ("--speaker-names",), 'Names for Speaker 1, 2, ... in the files, by order of appearance, '
           'e.g. "Lena,Walter" (a job file can give a [speaker_names] table of names per show: jobs/example.toml).',
           SPEAKERS, owner="cues.speaker_names", toml=(list, dict)),  # one list, or a table of lists per show
)
# fmt: on

# Owner fields no option sets, each with why (tests/test_options.py: every field is a row's or here).
INTERNAL = {
    "decode.silence_db": Internal("the energy gate's floor, tuned with the VAD; not a user's choice"),
    "decode.min_voice_s": Internal("the shortest voice the VAD gate counts, tuned with it"),
    "decode.coverage_gap_s": Internal("the shortest uncovered voice --coverage decodes again", older=1.0),
    "cut.silence_db": Internal("what counts as silence to the cutter, relative to the piece's loudest"),
    "cut.min_silence_s": Internal("the shortest silence the cutter cuts in"),
    "cut.at_pauses": Internal("cutting in the VAD's pauses: benchmarks turn it on", older=False),
    "diarize.window_s": Internal("the speaker-embedding window, tuned with the clustering"),
    "diarize.hop_s": Internal("the step between embedding windows, tuned with the clustering"),
    "diarize.short_rule": Internal("what a short unclear turn takes (diarize/short.py), chosen by measurement"),
    "cues.min_gap_s": Internal("the 2-frame gap between cues of the timed-text guides"),
    "cues.max_lead_s": Internal("how far a cue may start before its first word, of the timed-text guides"),
    "cues.show_speaker_names": Internal("speaker_names' per-show table, parsed from the speaker_names key"),
    "job.decode": Internal("the DecodeOptions: the decode.* rows"),
    "job.cut": Internal("the CutOptions: the cut.* rows"),
    "job.cue_rules": Internal("the CueRules: the cues.* rows"),
    "job.progress": Internal("off with -q/--quiet"),
    "job.checkpoint_pieces": Internal("off only to measure what checkpoints cost (benchmarks)"),
    "job.outputs_named_only": Internal("on in whisper mode (transcribe without --out)"),
    "job.export_at_end": Internal("off for all but the last pass of a job's workers (engines.py)"),
    "job.launched_at": Internal("set by engines.py for the workers of one launch"),
    "job.writes_outputs": Internal("off for the workers an engine starts"),
    "job.events": Internal("what the run tells as it goes: the tests pass theirs in (facts/events.py)"),
}

OWNERS = {
    "decode": ("pipeline.decode.options", "DecodeOptions"),
    "cut": ("pipeline.audio.media", "CutOptions"),
    "diarize": ("pipeline.diarize.options", "DiarizeOptions"),
    "cues": ("pipeline.outputs.cues", "CueRules"),
    "job": ("pipeline.job.config", "JobOptions"),
}

BY_KEY = {option.key: option for option in OPTIONS}
JOB_FILE_KEYS = {o.key: o.toml or KINDS[o.kind] for o in OPTIONS if o.job_file}
RANGES = {o.key: o.range for o in OPTIONS if o.range}
CHOICES = {o.key: o.choices for o in OPTIONS if o.choices}
SPEED_ONLY = tuple(o.config_path for o in OPTIONS if o.speed_only)
ADDED = {
    **{o.owner: o.older for o in OPTIONS if o.older is not NEW},
    **{dotted: i.older for dotted, i in INTERNAL.items() if i.older is not NEW},
}


def owner_class(section: str) -> type:
    module, name = OWNERS[section]
    return getattr(importlib.import_module(module), name)  # imported when asked: job/config.py imports this module


def owner_default(dotted: str):
    section, name = dotted.split(".", 1)
    field = next(f for f in dataclasses.fields(owner_class(section)) if f.name == name)
    return field.default_factory() if field.default is dataclasses.MISSING else field.default


def default(option: Option):
    if option.default is not FROM_OWNER:
        return option.default
    return owner_default(option.owner) if option.owner else None


def help_text(option: Option) -> str:
    return option.help.replace("{default}", str(default(option)))


def owned(section: str, values: dict) -> dict:
    """The ``section``'s fields from the settings (and a run's flags) by their rows, converted: ``DecodeOptions(
    **owned("decode", settings))``."""
    out = {}
    for option in OPTIONS:
        if option.owner and option.owner.startswith(section + ".") and option.key in values:
            value = values[option.key]
            out[option.field] = option.convert(value) if option.convert else value
    return out


def as_flags(path: str, value) -> str | None:
    """The command-line spelling that gives the option recorded at ``path`` (job.json) this value: ``--prefer-piece
    15``, ``--no-coverage``; None for a path no flag sets."""
    option = next((o for o in OPTIONS if o.config_path == path and o.flags), None)
    if option is None or value is None:  # no flag says "not set"
        return None
    if option.kind == "switch":
        on, off = option.flags[0].split("/")
        return on if value else off
    text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else toml_value(value)
    return f"{option.flags[0]} {shlex.quote(text)}"


def toml_value(value) -> str:
    return str(value).lower() if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) else str(value)


def reference() -> str:
    """The key-by-key table of docs/options.md (``python -m pipeline.job.options``): a test checks the page has it."""
    lines = ["| job-file key | flags | default | notes |", "|---|---|---|---|"]
    for o in OPTIONS:
        flags = ", ".join(f"`{f}`" for f in o.flags) or "(job file only)"
        value = default(o) if o.flags and o.job_file else None
        notes = [
            "not in job files" if not o.job_file else "",
            "speed only (a resumed job may change it)" if o.speed_only else "",
            "relabels a diarized job's files" if o.changes_labels else "",
            f"job dirs made before it resume with `{toml_value(o.older)}`" if o.older is not NEW else "",
        ]
        shown = "" if value is None or value == [] or value == () else f"`{toml_value(value)}`"
        lines.append(
            f"| {'`' + o.key + '`' if o.job_file else ''} | {flags} | {shown} | {'; '.join(n for n in notes if n)} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(reference())
