"""Export stage: subtitle cues from the segments manifest, written as SRT / WebVTT / TXT / JSON.

A Whisper segment is not a cue: cues follow the Netflix English timed-text
guide and the BBC guidelines (all configurable through ``CueRules``):

- at most 2 lines of at most 42 characters, broken between words, preferably
  after punctuation or before a conjunction or preposition;
- a cue lasts 5/6 s to 7 s and reads at no more than 17 characters per second:
  its end is extended into the following gap where needed, never over the next
  cue, and 2 frames (~0.083 s) always separate two cues;
- a pause of more than 1.5 s in speech always starts a new cue; a cue starts
  with its first word, so it never anticipates speech;
- a cue never spans two segments, so the cues' text is the segments' text.

Cue text in WebVTT is escaped (``&amp;``, ``&lt;``, ``&gt;``), so ``-->`` or a
``<`` in speech never breaks a cue.

Without word timings (a job run without them), segments are split in
proportion to characters, and the files say so.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from .manifest import JobDir, atomic_write_bytes, damage_hint

FORMATS = ("srt", "vtt", "txt", "json")
BREAK_BEFORE = {"and", "but", "or", "nor", "so", "yet", "because", "although", "though", "while", "if", "when",
                "that", "which", "who", "where", "to", "of", "in", "on", "at", "for", "with", "from", "by",
                "about", "into", "than", "as"}
PUNCTUATION_END = re.compile(r"[.,;:!?…)\]\"”]$")
SENTENCE_END = re.compile(r"[.!?…][\"”)]?$")


@dataclass(frozen=True)
class CueRules:
    max_line_chars: int = 42
    max_lines: int = 2
    min_duration_s: float = 5 / 6
    max_duration_s: float = 7.0
    max_cps: float = 17.0
    min_gap_s: float = 2 / 24
    pause_split_s: float = 1.5


@dataclass
class Cue:
    start_s: float
    end_s: float
    lines: list[str]

    @property
    def text(self) -> str:
        return " ".join(self.lines)


@dataclass
class TimedWord:
    text: str  # stripped
    start_s: float
    end_s: float


# -- laying words out ---------------------------------------------------------------


def _break_score(words: list[str], i: int) -> int:
    """How good a place a break before words[i] is: after punctuation, before a conjunction/preposition."""
    before, after = words[i - 1], words[i].lower().strip("\"'“(")
    if SENTENCE_END.search(before):
        return 3
    if PUNCTUATION_END.search(before):
        return 2
    return 1 if after in BREAK_BEFORE else 0


def split_lines(words: list[str], rules: CueRules) -> list[str] | None:
    """The words on at most two lines of at most ``max_line_chars``, or None if they cannot fit.

    A single word longer than a line is the one exception: it stands alone on its line, unbroken.
    """
    text = " ".join(words)
    limit = rules.max_line_chars
    if len(text) <= limit or len(words) == 1:
        return [text]
    if rules.max_lines < 2:
        return None
    options = []
    for i in range(1, len(words)):
        first, second = " ".join(words[:i]), " ".join(words[i:])
        if (len(first) <= limit or i == 1) and (len(second) <= limit or i == len(words) - 1):
            options.append(((-_break_score(words, i), abs(len(first) - len(second))), [first, second]))
    return min(options)[1] if options else None


def _cue_groups(words: list[TimedWord], rules: CueRules) -> list[list[TimedWord]]:
    groups: list[list[TimedWord]] = []
    current: list[TimedWord] = []
    for w in words:
        if current:
            candidate = current + [w]
            pause = w.start_s - current[-1].end_s
            too_long = w.end_s - current[0].start_s > rules.max_duration_s
            if pause > rules.pause_split_s or too_long or split_lines([x.text for x in candidate], rules) is None:
                keep = _best_split(current, rules) if pause <= rules.pause_split_s else len(current)
                groups.append(current[:keep])
                current = current[keep:]
        current.append(w)
    if current:
        groups.append(current)
    return groups


def _best_split(words: list[TimedWord], rules: CueRules) -> int:
    """Where to end a full cue: its best break (punctuation, then a conjunction or preposition) past
    the first third, the later one on a tie; else after all of it."""
    texts = [w.text for w in words]
    best, best_score = len(words), 0
    for i in range(max(1, len(words) // 3), len(words)):
        score = _break_score(texts, i)
        if score >= 1 and score >= best_score:
            best, best_score = i, score
    return best


def _time_cues(cues: list[Cue], rules: CueRules, duration_s: float | None) -> None:
    """Minimum duration and reading speed by extending into the following gap; gaps between cues."""
    for i, cue in enumerate(cues):
        limit = cues[i + 1].start_s - rules.min_gap_s if i + 1 < len(cues) else (duration_s or cue.end_s + 10)
        wanted = max(cue.end_s, cue.start_s + rules.min_duration_s, cue.start_s + len(cue.text) / rules.max_cps)
        wanted = math.ceil(round(wanted * 1000, 6)) / 1000  # whole milliseconds, never under the rule
        cue.end_s = max(cue.start_s, min(wanted, cue.start_s + rules.max_duration_s))
        if cue.end_s > limit:  # speech runs right up to the next cue: keep the gap
            cue.end_s = max(cue.start_s, math.floor(round(limit * 1000, 6)) / 1000)


def segment_words(segment: dict) -> tuple[list[TimedWord], bool]:
    """(words, timed): the segment's own word timings, or words placed in proportion to characters."""
    if segment.get("words"):
        return [TimedWord(w["word"].strip(), w["start_s"], w["end_s"]) for w in segment["words"] if w["word"].strip()], True
    texts = segment["text"].split()
    total = sum(len(t) + 1 for t in texts) or 1
    span = segment["end_s"] - segment["start_s"]
    out, pos = [], 0
    for t in texts:
        start = segment["start_s"] + span * pos / total
        pos += len(t) + 1
        out.append(TimedWord(t, round(start, 3), round(segment["start_s"] + span * pos / total, 3)))
    return out, False


def build_cues(segments: list[dict], rules: CueRules = CueRules(), duration_s: float | None = None) -> tuple[list[Cue], bool]:
    """Cues for one file's segments (in order); also whether real word timings were used throughout."""
    cues: list[Cue] = []
    all_timed = True
    for seg in sorted(segments, key=lambda s: s["segment"]):
        words, timed = segment_words(seg)
        all_timed &= timed
        for group in _cue_groups(words, rules):
            lines = split_lines([w.text for w in group], rules) or [" ".join(w.text for w in group)]
            start = max(group[0].start_s, cues[-1].end_s + rules.min_gap_s if cues else 0.0)
            cues.append(Cue(round(start, 3), round(max(group[-1].end_s, start), 3), lines))
    _time_cues(cues, rules, duration_s)
    return cues, all_timed


# -- formats -----------------------------------------------------------------------------


def _clock(seconds: float, sep: str) -> str:
    ms = int(round(max(0.0, seconds) * 1000))
    h, ms = divmod(ms, 3_600_000)
    m, ms = divmod(ms, 60_000)
    s, ms = divmod(ms, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


PROPORTIONAL_NOTE = "timings of words inside segments are estimated in proportion to characters (no word timestamps)"


def to_srt(cues: list[Cue]) -> str:
    blocks = [f"{i}\n{_clock(c.start_s, ',')} --> {_clock(c.end_s, ',')}\n" + "\n".join(c.lines)
              for i, c in enumerate(cues, 1)]
    return "\n\n".join(blocks) + ("\n" if blocks else "")


def _vtt_escape(text: str) -> str:
    """Cue text as WebVTT wants it: ``&``, ``<`` and ``>`` as character references (so never ``-->``)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_vtt(cues: list[Cue], timed: bool = True) -> str:
    head = "WEBVTT\n\n" + ("" if timed else f"NOTE {PROPORTIONAL_NOTE}\n\n")
    blocks = [f"{_clock(c.start_s, '.')} --> {_clock(c.end_s, '.')}\n" + "\n".join(map(_vtt_escape, c.lines))
              for c in cues]
    return head + "\n\n".join(blocks) + ("\n" if blocks else "")


def to_txt(segments: list[dict]) -> str:
    return "".join(s["text"].strip() + "\n" for s in sorted(segments, key=lambda s: s["segment"]))


def to_json(file_row: dict, segments: list[dict], cues: list[Cue], timed: bool) -> str:
    doc = {"path": file_row["path"], "file_id": file_row["file_id"], "duration_s": file_row["duration_s"],
           "language": file_row["language"], "word_timings": "aligned" if timed else "proportional",
           "segments": [{k: s[k] for k in ("segment", "start_s", "end_s", "text", "words")}
                        for s in sorted(segments, key=lambda s: s["segment"])],
           "cues": [asdict(c) for c in cues]}
    return json.dumps(doc, ensure_ascii=False, indent=1)


# -- a job dir -----------------------------------------------------------------------------


def export_job(job_dir: Path, formats: list[str], out_dir: Path | None = None,
               rules: CueRules = CueRules(), problems: list[str] | None = None) -> list[Path]:
    """One subtitle file per done input path and format, named after it; returns the paths.

    Copies (one content at several paths) get a file for each path. Names are the input's stem;
    stems that occur more than once get ``-<8 hex of the path's hash>``, so no file overwrites another.
    A table that cannot be read skips its input and is described in ``problems``.
    """
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise ValueError(f"unknown subtitle format(s) {', '.join(unknown)}; choose from {', '.join(FORMATS)}")
    job = JobDir(job_dir)
    out_dir = Path(out_dir) if out_dir else Path(job_dir) / "subtitles"
    files = [r for r in job.file_rows() if r["status"] == "done"]
    segments_by_file: dict[str, list[dict]] = {}
    for seg in job.read("segments", {r["file_id"] for r in files}).to_pylist():
        segments_by_file.setdefault(seg["file_id"], []).append(seg)
    damaged = {path.stem for path, _ in job.damaged}
    if problems is not None:
        problems += [damage_hint(path, error) for path, error in job.damaged]
    targets = sorted((Path(p), row) for row in files if row["file_id"] not in damaged
                     for p in (row["paths"] or [row["path"]]))
    stems = [path.stem for path, _ in targets]
    written = []
    for path, row in targets:
        name = path.stem if stems.count(path.stem) == 1 else \
            f"{path.stem}-{hashlib.sha256(str(path).encode('utf-8', 'surrogateescape')).hexdigest()[:8]}"
        segments = sorted(segments_by_file.get(row["file_id"], []), key=lambda seg: seg["segment"])
        cues, timed = build_cues(segments, rules, row["duration_s"])
        for fmt in formats:
            target = out_dir / f"{name}.{fmt}"
            atomic_write_bytes(target, _render(fmt, {**row, "path": str(path)}, segments, cues, timed).encode("utf-8"))
            written.append(target)
    return written


def _render(fmt: str, row: dict, segments: list[dict], cues: list[Cue], timed: bool) -> str:
    if fmt == "srt":
        return to_srt(cues)
    if fmt == "vtt":
        return to_vtt(cues, timed)
    if fmt == "txt":
        return to_txt(segments)
    return to_json(row, segments, cues, timed)
