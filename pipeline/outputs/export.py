"""Export stage: a finished file's segments written as SRT / WebVTT / TXT / TSV / JSON (openai-whisper's
shapes) and Podcasting 2.0 JSON, beside its audio or into an output folder, and whole jobs exported again.

The cues the subtitle formats show are laid out by ``cues.py`` (the rules: Netflix / BBC timed-text guides).

Without word timings (a job run without them), segments are split in proportion to characters, and the files
say so.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..facts.errors import DamagedState, UsageProblem
from ..facts.rows import SegmentRow, WordRow
from ..storage.manifest import JobDir, damage_hint, row_paths
from . import agreed
from .cues import Cue, CueRules, build_cues
from .names import output_names, too_long
from .ownership import OutputDir, Writer, Written
from .speaker_names import named, names_for

log = logging.getLogger("podscribe")
FORMATS = ("txt", "vtt", "srt", "tsv", "json")  # the order of openai-whisper's `all`
# Formats beyond whisper's (not in `all`), with their file extension: Podcasting 2.0's transcript JSON.
EXTRA_FORMATS = {"podcast": "podcast.json"}
ALL_FORMATS = (*FORMATS, *EXTRA_FORMATS)
DEFAULT_RULES = CueRules()  # frozen: one shared default


def _clock(seconds: float, sep: str) -> str:
    ms = int(round(max(0.0, seconds) * 1000))
    h, ms = divmod(ms, 3_600_000)
    m, ms = divmod(ms, 60_000)
    s, ms = divmod(ms, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


PROPORTIONAL_NOTE = "timings of words inside segments are estimated in proportion to characters (no word timestamps)"


def to_srt(cues: list[Cue]) -> str:
    """Each cue ends with a blank line, the last one too (as openai-whisper and ffmpeg write SRT). A diarized cue
    whose speaker differs from the cue before starts with ``[Speaker N] `` (SRT has no voices); the label is laid
    out with the cue's words, within the line rules. A file of one speaker has no labels."""
    blocks = [
        f"{i}\n{_clock(c.start_s, ',')} --> {_clock(c.end_s, ',')}\n" + "\n".join(c.srt_lines or c.lines)
        for i, c in enumerate(cues, 1)
    ]
    return "".join(block + "\n\n" for block in blocks)


def _vtt_escape(text: str) -> str:
    """Cue text as WebVTT wants it: ``&``, ``<`` and ``>`` as character references (so never ``-->``)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_vtt(cues: list[Cue], timed: bool = True) -> str:
    head = "WEBVTT\n\n" + ("" if timed else f"NOTE {PROPORTIONAL_NOTE}\n\n")
    blocks = [
        f"{_clock(c.start_s, '.')} --> {_clock(c.end_s, '.')}\n"
        + (f"<v {_vtt_escape(c.speaker)}>" if c.speaker else "")
        + "\n".join(map(_vtt_escape, c.lines))
        for c in cues
    ]
    return head + "\n\n".join(blocks) + ("\n" if blocks else "")


def _speaker(segment: SegmentRow, rules: CueRules) -> str | None:
    return segment.get("speaker") if rules.speakers else None


def to_txt(segments: list[SegmentRow], rules: CueRules = DEFAULT_RULES) -> str:
    """One segment a line, as whisper writes it; a diarized job's in paragraphs, one per speaker turn, each
    starting with ``Speaker N: `` and separated by a blank line."""
    ordered = sorted(segments, key=lambda s: s["segment"])
    if not any(_speaker(s, rules) for s in ordered):
        return "".join(s["text"].strip() + "\n" for s in ordered)
    turns: list[tuple[str | None, list[str]]] = []
    for s in ordered:
        speaker = _speaker(s, rules)
        if turns and turns[-1][0] == speaker:
            turns[-1][1].append(s["text"].strip())
        else:
            turns.append((speaker, [s["text"].strip()]))
    return "\n".join((f"{who}: " if who else "") + " ".join(texts) + "\n" for who, texts in turns)


def to_podcast(segments: list[SegmentRow], rules: CueRules = DEFAULT_RULES) -> str:
    """Podcasting 2.0's transcript JSON (podcast:transcript, type application/json), which podcast apps read:
    ``version`` and ``segments`` of ``startTime``/``endTime`` (seconds), ``body`` and, when diarized,
    ``speaker``."""
    out = []
    for s in sorted(segments, key=lambda s: s["segment"]):
        entry = {"startTime": s["start_s"], "endTime": s["end_s"], "body": s["text"].strip()}
        if _speaker(s, rules):
            entry = {"speaker": _speaker(s, rules), **entry}
        out.append(entry)
    return json.dumps({"version": "1.0.0", "segments": out}, ensure_ascii=False, indent=1)


def to_json(
    file_row: dict, segments: list[SegmentRow], cues: list[Cue], timed: bool, rules: CueRules = DEFAULT_RULES
) -> str:
    """openai-whisper's result shape (what its ``transcribe`` returns and its writers read): ``text``,
    ``segments[]`` with ``id/start/end/text/tokens/avg_logprob/no_speech_prob`` and, when the job has word
    timings, ``words[]`` of ``word/start/end/probability`` (without them openai-whisper leaves ``words`` out
    too), ``language``. podscribe's own fields sit beside them: the segment's ``piece``, ``language``, ``flags``
    (and ``speaker``); the file's ``path``, ``file_id``, ``duration_s``, ``word_timings``, ``speakers``, ``cues``.
    ``tokens`` is empty: the tables keep no token ids of a done file's segments (the pieces table counts them,
    ``n_tokens``, and keeps only the ids a second chance added; a piece's ids live in its checkpoint until the
    file is done)."""
    labelled = rules.speakers and any(s.get("speaker") for s in segments)
    ordered = sorted(segments, key=lambda s: s["segment"])

    def word(w: WordRow) -> dict:
        out = {"word": w["word"], "start": w["start_s"], "end": w["end_s"], "probability": w["probability"]}
        return {**out, "speaker": w.get("speaker")} if labelled else out

    def segment(s: SegmentRow) -> dict:
        out = {
            "id": s["segment"],
            "start": s["start_s"],
            "end": s["end_s"],
            "text": s["text"],
            "tokens": [],
            "avg_logprob": s.get("avg_logprob"),
            "no_speech_prob": s.get("no_speech_prob"),
            **({"words": [word(w) for w in s.get("words") or ()]} if timed else {}),
            "piece": s.get("piece"),
            "language": s.get("language"),
            "flags": s.get("flags") or [],
        }
        return {**out, "speaker": s.get("speaker")} if labelled else out

    doc = {
        "text": " ".join(s["text"].strip() for s in ordered),
        "segments": [segment(s) for s in ordered],
        "language": file_row["language"],
        "path": file_row["path"],
        "file_id": file_row["file_id"],
        "duration_s": file_row["duration_s"],
        "word_timings": "aligned" if timed else "proportional",
        **(
            {"speakers": sorted({s["speaker"] for s in segments if s.get("speaker")}, key=_speaker_order)}
            if labelled
            else {}
        ),
        "cues": [  # the Cue fields but SRT's lines (and the speaker, unlabelled); not asdict: it deep-copies each
            {
                "start_s": c.start_s,
                "end_s": c.end_s,
                "lines": c.lines,
                "flags": c.flags,
                **({"speaker": c.speaker} if labelled else {}),
            }
            for c in cues
        ],
    }
    return json.dumps(doc, ensure_ascii=False)  # on one line, as openai-whisper writes it (and 8x faster)


# -- a job dir -----------------------------------------------------------------------------

# What the files write of a files row (a job of 2,000 inputs reads 2,000 rows: no more of each than needed).
EXPORT_COLUMNS = ["file_id", "path", "paths", "status", "duration_s", "language"]


@dataclass
class Exported(Written):
    """What an export wrote, and what it could not: inputs whose row is failed, inputs of the job without a row
    yet (pending: an unfinished job)."""

    failed: int = 0
    pending: int = 0


def export_job(
    job_dir: Path,
    formats: list[str],
    out_dir: Path | None = None,
    rules: CueRules = DEFAULT_RULES,
    problems: list[str] | None = None,
    only: set[str] | None = None,
    named: Iterable[str] = (),
) -> Exported:
    """One subtitle file per done input path and format, named after it (``outputs.output_names`` over every
    input of the job and ``named``); never over a file a person changed (``outputs.OutputDir``).

    Copies (one content at several paths) get a file for each path. ``only``: just these input paths (whisper
    mode writes the inputs named in the command). A table that cannot be read skips its input and is described
    in ``problems``.
    """
    unknown = sorted(set(formats) - set(ALL_FORMATS))
    if unknown:
        raise UsageProblem(f"unknown subtitle format(s) {', '.join(unknown)}; choose from {', '.join(ALL_FORMATS)}")
    job = JobDir(job_dir)
    out_dir = Path(out_dir) if out_dir else Path(job_dir) / "subtitles"
    rows = job.file_rows(EXPORT_COLUMNS)
    names = output_names([p for row in rows for p in row_paths(row)] + [str(p) for p in named])
    files = [r for r in rows if r["status"] == "done" and (only is None or set(row_paths(r)) & only)]
    segments_by_file: dict[str, list[SegmentRow]] = {}
    for seg in job.read("segments", {r["file_id"] for r in files}).to_pylist():
        segments_by_file.setdefault(seg["file_id"], []).append(seg)
    damage = job.take_damage()
    damaged = {path.stem for path, _ in damage}
    if problems is not None:
        problems += [damage_hint(path, error) for path, error in damage]
    written = Exported()
    listed = {p for row in rows for p in row_paths(row)}
    with contextlib.suppress(DamagedState):
        inputs = (job.read_job() or {}).get("inputs", [])
        written.pending = sum(os.path.abspath(p) not in listed for p in inputs if only is None or p in only)
    written.failed = sum(r["status"] != "done" and (only is None or bool(set(row_paths(r)) & only)) for r in rows)
    with OutputDir(out_dir).open() as folder:  # one hold and one reading of its record for the whole job
        for row in sorted(files, key=lambda r: r["path"]):
            if row["file_id"] not in damaged:
                segments = segments_by_file.get(row["file_id"], [])
                written.add(write_outputs(row, segments, formats, folder, rules, names, only, problems))
    return written


def named_speakers(segments: list[SegmentRow], names: tuple[str, ...]) -> list[SegmentRow]:
    """Segments (and their words) with ``Speaker N`` called ``names[N - 1]`` (``--speaker-names``); the manifest
    keeps the numbered labels."""
    if not names:
        return segments

    def name(label: str | None) -> str | None:
        return named(label, names)

    return [
        {
            **s,
            "speaker": name(s.get("speaker")),
            "words": [{**w, "speaker": name(w.get("speaker"))} for w in s["words"]]
            if s.get("words")
            else s.get("words"),
        }
        for s in segments
    ]


_NAMED: set[str] = set()  # paths whose changed name was said already (once per run, not once per write)


def write_outputs(
    row: dict,
    segments: list[SegmentRow],
    formats: list[str],
    out_dir: Path | Writer,
    rules: CueRules,
    names: dict[str, str],
    only: set[str] | None = None,
    problems: list[str] | None = None,
) -> Written:
    """One done file's outputs, for each of its paths (``only``: those among them), as its row turns done, into a
    folder (or a folder held for many files: ``OutputDir.open``). An output that cannot be written for its own
    name is skipped and described in ``problems``."""
    ordered = sorted(segments, key=lambda seg: seg["segment"])
    laid_out: dict[tuple[str, ...], tuple] = {}  # per set of speaker names (copies may be in several shows)
    contents: dict[str, bytes] = {}
    sources: dict[str, tuple[str, str]] = {}  # file name -> (input path, extension)
    for path in row_paths(row):
        if only is not None and path not in only:
            continue
        speakers = names_for(path, rules.speaker_names, rules.show_speaker_names)
        if speakers not in laid_out:
            named = named_speakers(ordered, speakers)
            laid_out[speakers] = (named, *build_cues(named, rules, row["duration_s"]))
        segments, cues, timed = laid_out[speakers]
        name = names.get(path) or output_names([path])[path]
        if name != Path(path).stem and path not in _NAMED:
            _NAMED.add(path)
            why = "is too long a name for files" if too_long(Path(path).stem) else "shares its name with another input"
            log.warning("%s %s: its files are named %s.*", path, why, name)
        for fmt in formats:
            text = _render(fmt, {**row, "path": path}, segments, cues, timed, rules)
            ext = EXTRA_FORMATS.get(fmt, fmt)
            contents[f"{name}.{ext}"] = text.encode("utf-8")
            sources[f"{name}.{ext}"] = (path, ext)
    if isinstance(out_dir, Writer):
        return out_dir.write(contents, problems, sources)
    return OutputDir(out_dir).write(contents, problems, sources)


def check_writable(folder: Path) -> None:
    """Subtitles can be written into ``folder``: checked before any decoding, so a read-only -o is not found at
    the end of the night. A folder not made yet is not made here: its nearest existing parent is asked."""
    folder = Path(folder).absolute()
    try:
        if folder.is_dir():
            fd, probe = tempfile.mkstemp(dir=folder, prefix=".podscribe-write-check-")
            os.close(fd)
            os.unlink(probe)
            return
        parent = next(p for p in folder.parents if p.exists())
        if not parent.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, f"{parent} is a file", str(parent))
        if not os.access(parent, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EROFS if _read_only(parent) else errno.EACCES))
    except OSError as exc:
        raise UsageProblem(f"subtitles cannot be written into {folder}: {exc.strerror or exc}") from exc


def _read_only(path: Path) -> bool:
    return bool(os.statvfs(path).f_flag & os.ST_RDONLY)


def _speaker_order(name: str) -> tuple[int, str]:
    number = name.rsplit(" ", 1)[-1]
    return (int(number), name) if number.isdigit() else (1 << 30, name)


def to_tsv(segments: list[SegmentRow], rules: CueRules = DEFAULT_RULES) -> str:
    """openai-whisper's TSV: ``start``, ``end`` (integer milliseconds) and ``text``, one segment a line; a
    diarized job's has a ``speaker`` column after them (readers of whisper's three columns still read these)."""
    labelled = rules.speakers and any(s.get("speaker") for s in segments)
    lines = ["start\tend\ttext\tspeaker" if labelled else "start\tend\ttext"] + [
        f"{round(1000 * s['start_s'])}\t{round(1000 * s['end_s'])}\t"
        + s["text"].strip().replace(chr(9), " ")
        + (f"\t{s.get('speaker') or ''}" if labelled else "")
        for s in sorted(segments, key=lambda s: s["segment"])
    ]
    return "\n".join(lines) + "\n"


def _render(fmt: str, row: dict, segments: list[SegmentRow], cues: list[Cue], timed: bool, rules: CueRules) -> str:
    if fmt == "tsv":
        return to_tsv(segments, rules)
    if fmt == "srt":
        return to_srt(cues)
    if fmt == "vtt":
        return to_vtt(cues, timed)
    if fmt == "txt":
        return to_txt(segments, rules)
    if fmt == "podcast":
        return to_podcast(segments, rules)
    return to_json(row, segments, cues, timed, rules)


def export_recorded(
    root: Path, recorded: dict, problems: list[str], only: set[str] | None = None, named: Iterable[str] = ()
) -> Written:
    """The recorded subtitles written; an output that cannot be written for its own name is described in
    ``problems`` and the others are written."""
    rules = CueRules(**recorded["cue_rules"])
    return export_job(
        root, recorded["subtitles"], agreed.folder(root, recorded), rules, problems, only=only, named=named
    )
