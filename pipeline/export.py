"""Export stage: subtitle cues from the segments manifest, written as SRT / WebVTT / TXT / JSON.

A Whisper segment is not a cue: cues follow the Netflix English timed-text
guide and the BBC guidelines (all configurable through ``CueRules``):

- at most 2 lines of at most 42 characters, broken between words, preferably
  after punctuation or before a conjunction or preposition;
- a cue lasts 5/6 s to 7 s and reads at no more than 17 characters per second:
  its end is extended into the following gap where needed, never over the next
  cue, and 2 frames (~0.083 s) always separate two cues; where the following
  gap is too short, its start moves earlier into the gap before it, never over
  the previous cue and at most 0.3 s before its first word;
- a pause of more than 1.5 s in speech always starts a new cue; a cue starts
  with its first word, earlier only as above, so it never anticipates speech
  by more than 0.3 s (later only where word timings overlap or nearly so, by
  what keeps the gap);
- a cue never spans two segments, so the cues' text is the segments' text;
- no cue is empty (its end is always after its start).

Where timing alone cannot meet the duration and reading speed, a cue is laid
out again with a neighbour of its segment: the two merge, when the merged cue
fits the lines and the duration and then meets every rule, or one to three
words move across the border between them, when fewer cues then break a rule
and none nearby falls shorter of its rules than before. Where speech is
faster than any of this allows (fast exchanges, fast speakers: no room before,
after, or in a neighbour), the later cue of a tight run gets its time first,
and a cue that cannot get its time keeps what it can get and carries flags
naming the rules it breaks: ``"short"`` (under the minimum duration) and/or
``"fast"`` (over the reading speed). The flags are in the JSON export
(``cues[].flags``); SRT, WebVTT and TXT do not show them.

Cue text in WebVTT is escaped (``&amp;``, ``&lt;``, ``&gt;``), so ``-->`` or a
``<`` in speech never breaks a cue.

Without word timings (a job run without them), segments are split in
proportion to characters, and the files say so.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path

from .errors import StorageError, UsageProblem
from .manifest import JobDir, damage_hint, row_paths
from .outputs import OutputDir, Written, output_names
from .speaker_names import names_for

log = logging.getLogger("podscribe")
FORMATS = ("txt", "vtt", "srt", "tsv", "json")  # the order of openai-whisper's `all`
# Formats beyond whisper's (not in `all`), with their file extension: Podcasting 2.0's transcript JSON.
EXTRA_FORMATS = {"podcast": "podcast.json"}
ALL_FORMATS = (*FORMATS, *EXTRA_FORMATS)
BREAK_BEFORE = {
    "and",
    "but",
    "or",
    "nor",
    "so",
    "yet",
    "because",
    "although",
    "though",
    "while",
    "if",
    "when",
    "that",
    "which",
    "who",
    "where",
    "to",
    "of",
    "in",
    "on",
    "at",
    "for",
    "with",
    "from",
    "by",
    "about",
    "into",
    "than",
    "as",
}
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
    max_lead_s: float = 0.3
    speakers: bool = True  # a diarized job's labels in the files (cues never span a speaker change either way)
    speaker_names: tuple[str, ...] = ()  # names for Speaker 1, 2, ... (numbered by first appearance)
    show_speaker_names: tuple = ()  # (folder or glob, names) per show, first match wins (speaker_names.py)


@dataclass
class Cue:
    start_s: float
    end_s: float
    lines: list[str]
    flags: list[str] = field(default_factory=list)  # the rules it breaks where no timing or merge could meet them
    speaker: str | None = None  # its segment's, when the job was diarized
    srt_lines: list[str] | None = None  # at a change of speaker: its lines with SRT's label, within the line rule

    @property
    def text(self) -> str:
        return " ".join(self.lines)


@dataclass
class TimedWord:
    text: str  # stripped
    start_s: float
    end_s: float


# -- laying words out ---------------------------------------------------------------

_REPAIR_REACH = 6  # cues on each side of a change of layout that are timed again to judge it


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


def _cue_groups(words: list[TimedWord], rules: CueRules, head: str | None = None) -> list[list[TimedWord]]:
    """``head``: a label the first cue's first line starts with (SRT's ``[Speaker N]``), counted in its lines."""
    groups: list[list[TimedWord]] = []
    current: list[TimedWord] = []
    for w in words:
        if current:
            candidate = current + [w]
            pause = w.start_s - current[-1].end_s
            too_long = w.end_s - current[0].start_s > rules.max_duration_s
            texts = ([head] if head and not groups else []) + [x.text for x in candidate]
            if pause > rules.pause_split_s or too_long or split_lines(texts, rules) is None:
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


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def _ms_up(seconds: float) -> int:
    """Whole milliseconds, never under ``seconds`` (so a rule met in ms is met in seconds)."""
    return math.ceil(round(seconds * 1000, 6))


def _ms_down(seconds: float) -> int:
    return math.floor(round(seconds * 1000, 6))


def _needed_ms(chars: int, rules: CueRules) -> tuple[int, int]:
    """(minimum duration, duration for the reading speed) of a cue of ``chars`` characters, in ms."""
    return _ms_up(rules.min_duration_s), _ms_up(chars / rules.max_cps)


def _schedule(
    spans: list[tuple[int, int]],
    chars: list[int],
    rules: CueRules,
    end_ms: int | None,
    prev_start_ms: int | None = None,
) -> list[tuple[int, int]]:
    """(start, end) in ms of cues whose speech spans ``spans`` (ms, in order) and that must end by
    ``end_ms`` (the file's end, or the start of the cue after them less the gap; None: no limit), after
    a cue that starts at ``prev_start_ms`` (if any).

    A backward pass finds each cue's latest start: its first word, or earlier where the cue needs the
    time for its minimum duration and reading speed before the next cue's latest start (less the gap),
    but never more than ``max_lead_s`` before its first word. A forward pass starts each cue there, or
    later where the previous cue's start plus the gap and a millisecond demands it (overlapping word
    timings), so no cue is empty. Each cue ends at its last word or when its rules are met, whichever
    is later, but never later than ``max_duration_s`` after its start, than the next cue's start less
    the gap, or than the file's end. So a cue first takes the gap after it, then the gap before it, and
    where speech is too fast for both cues, the later one gets its time and the earlier one falls short.
    """
    gap, lead, longest = _ms_up(rules.min_gap_s), _ms_down(rules.max_lead_s), _ms_down(rules.max_duration_s)
    needs = [min(max(_needed_ms(c, rules)), longest) for c in chars]
    latest = [0] * len(spans)
    nxt = end_ms
    for i in reversed(range(len(spans))):
        first = spans[i][0]
        want = first if nxt is None else min(first, nxt - needs[i])
        latest[i] = max(want, first - lead, 0)
        nxt = latest[i] - gap
    starts: list[int] = []
    for i in range(len(spans)):
        prev = starts[-1] if starts else prev_start_ms
        starts.append(latest[i] if prev is None else max(latest[i], prev + 1 + gap))
    out = []
    for i, (start, (_, last_end)) in enumerate(zip(starts, spans)):
        end = min(max(last_end, start + needs[i]), start + longest)
        limit = starts[i + 1] - gap if i + 1 < len(starts) else end_ms
        if limit is not None:
            end = min(end, limit)
        out.append((start, max(end, start + 1)))
    return out


def _cue_flags(start_ms: int, end_ms: int, chars: int, rules: CueRules) -> list[str]:
    """The rules a cue so timed breaks: "short" (under the minimum duration), "fast" (over the reading speed)."""
    shortest, reading = _needed_ms(chars, rules)
    duration = end_ms - start_ms
    return [flag for flag, broken in (("short", duration < shortest), ("fast", duration < reading)) if broken]


def segment_words(segment: dict) -> tuple[list[TimedWord], bool]:
    """(words, timed): the segment's own word timings, or words placed in proportion to characters."""
    if segment.get("words"):
        return [
            TimedWord(w["word"].strip(), w["start_s"], w["end_s"]) for w in segment["words"] if w["word"].strip()
        ], True
    texts = segment["text"].split()
    total = sum(len(t) + 1 for t in texts) or 1
    span = segment["end_s"] - segment["start_s"]
    out, pos = [], 0
    for t in texts:
        start = segment["start_s"] + span * pos / total
        pos += len(t) + 1
        out.append(TimedWord(t, round(start, 3), round(segment["start_s"] + span * pos / total, 3)))
    return out, False


@dataclass
class _Block:
    """The words of one cue to be, and the segment they come from."""

    segment: int
    words: list[TimedWord]
    head: str | None = None  # SRT's speaker label before its first word (counted in its lines, not its reading)

    @property
    def texts(self) -> list[str]:
        return ([self.head] if self.head else []) + [w.text for w in self.words]

    @cached_property
    def chars(self) -> int:
        return len(" ".join(w.text for w in self.words))

    @cached_property
    def span(self) -> tuple[int, int]:
        start = _ms(self.words[0].start_s)
        return start, max(start, max(_ms(w.end_s) for w in self.words))


def _fits(block: _Block, rules: CueRules) -> bool:
    """Whether words may make one cue: no long pause inside, within the maximum duration and the lines."""
    words = block.words
    if not words or any(b.start_s - a.end_s > rules.pause_split_s for a, b in zip(words, words[1:])):
        return False
    if len(words) > 1 and max(w.end_s for w in words) - words[0].start_s > rules.max_duration_s:
        return False
    return max(_needed_ms(block.chars, rules)) <= _ms_down(rules.max_duration_s) or len(words) == 1


def _timed_blocks(
    blocks: list[_Block], rules: CueRules, end_ms: int | None, prev_start_ms: int | None = None
) -> tuple[list[tuple[int, int]], list[float]]:
    """The blocks' times (see ``_schedule``), and how far each falls short of its rules: the time it
    needs over the time it gets (over 1 breaks a rule)."""
    times = _schedule([b.span for b in blocks], [b.chars for b in blocks], rules, end_ms, prev_start_ms)
    return times, [max(_needed_ms(b.chars, rules)) / (e - s) for (s, e), b in zip(times, blocks)]


def _relayouts(blocks: list[_Block], i: int, rules: CueRules):
    """Other layouts of block i's words with a neighbour's (same segment): (first index changed, new blocks).

    Merging with the previous or the next cue first, then moving one to three words across either border.
    """
    for j in (i - 1, i):  # merge j and j + 1
        if 0 <= j and j + 1 < len(blocks) and blocks[j].segment == blocks[j + 1].segment:
            merged = _Block(blocks[j].segment, blocks[j].words + blocks[j + 1].words, blocks[j].head)
            if split_lines(merged.texts, rules) is not None and _fits(merged, rules):
                yield j, [merged]
    for j in (i - 1, i):  # move words between j and j + 1
        if j < 0 or j + 1 >= len(blocks) or blocks[j].segment != blocks[j + 1].segment:
            continue
        both = blocks[j].words + blocks[j + 1].words
        cut = len(blocks[j].words)
        for k in (-3, -2, -1, 1, 2, 3):
            if 0 < cut + k < len(both):
                pair = [
                    _Block(blocks[j].segment, both[: cut + k], blocks[j].head),
                    _Block(blocks[j].segment, both[cut + k :], blocks[j + 1].head),
                ]
                if all(split_lines(b.texts, rules) is not None and _fits(b, rules) for b in pair):
                    yield j, pair


def _repair(blocks: list[_Block], rules: CueRules, end_ms: int | None) -> tuple[list[_Block], list[tuple[int, int]]]:
    """Lays out again the cues that break a rule once timed: merges one with a neighbour, or moves a few
    words across the border between them, where fewer cues then break a rule, a merged cue meets them
    all, and no cue near the change falls shorter of its rules than the worst one there did before;
    the blocks and their times.

    A change is judged on the cues around it (``_REPAIR_REACH`` on each side, timed between their
    neighbours as they are), and the whole file is timed again once it is made.
    """
    gap = _ms_up(rules.min_gap_s)
    times, short = _timed_blocks(blocks, rules, end_ms)
    i = 0
    while i < len(blocks):
        if short[i] <= 1:
            i += 1
            continue
        best = None
        for j, replacement in _relayouts(blocks, i, rules):
            lo, hi = max(j - _REPAIR_REACH, 0), min(j + 2 + _REPAIR_REACH, len(blocks))
            window = blocks[lo:j] + replacement + blocks[j + 2 : hi]
            _, trial = _timed_blocks(
                window, rules, times[hi][0] - gap if hi < len(blocks) else end_ms, times[lo - 1][0] if lo else None
            )
            bad_before, bad_after = sum(x > 1 for x in short[lo:hi]), sum(x > 1 for x in trial)
            k = j - lo  # the replacement's place in the window
            if (len(replacement) == 1 and trial[k] > 1) or bad_after >= bad_before:
                continue
            if max(trial[max(k - 2, 0) : k + len(replacement) + 2]) > max(short[max(j - 2, 0) : j + 4]):
                continue
            if best is None or bad_after - bad_before < best[0]:
                best = (bad_after - bad_before, j, replacement)
        if best is None:
            i += 1
        else:
            _, j, replacement = best
            blocks = blocks[:j] + replacement + blocks[j + 2 :]
            times, short = _timed_blocks(blocks, rules, end_ms)
            i = max(j - 1, 0)
    return blocks, times


def build_cues(
    segments: list[dict], rules: CueRules = CueRules(), duration_s: float | None = None
) -> tuple[list[Cue], bool]:
    """Cues for one file's segments (in order); also whether real word timings were used throughout."""
    blocks: list[_Block] = []
    all_timed = True
    heads = _speaker_heads(segments, rules)
    for seg in sorted(segments, key=lambda s: s["segment"]):
        words, timed = segment_words(seg)
        all_timed &= timed
        head = heads.get(seg["segment"])
        groups = _cue_groups(words, rules, head)
        blocks += [_Block(seg["segment"], group, head if k == 0 else None) for k, group in enumerate(groups)]
    end_ms = _ms_down(duration_s) if duration_s else None
    blocks, times = _repair(blocks, rules, end_ms)
    speaker_of = {seg["segment"]: seg.get("speaker") if rules.speakers else None for seg in segments}
    cues = []
    for block, (start, end) in zip(blocks, times):
        texts = [w.text for w in block.words]
        lines = split_lines(texts, rules) or [" ".join(texts)]
        labelled = None
        if block.head:  # the same break with the label in front, for SRT; the other formats show the voice otherwise
            labelled = split_lines(block.texts, rules) or [" ".join(block.texts)]
            rest = labelled[0][len(block.head) :].strip()
            lines = [rest, *labelled[1:]] if rest else labelled[1:]
        flags = _cue_flags(start, end, block.chars, rules)
        cues.append(Cue(start / 1000, end / 1000, lines, flags, speaker_of.get(block.segment), labelled))
    return cues, all_timed


def _speaker_heads(segments: list[dict], rules: CueRules) -> dict[int, str]:
    """SRT's ``[Speaker N]`` label, per segment where the speaker changes; none when the file has one speaker."""
    speakers = {s.get("speaker") for s in segments if s.get("speaker")}
    if not rules.speakers or len(speakers) < 2:
        return {}
    heads, previous = {}, None
    for seg in sorted(segments, key=lambda s: s["segment"]):
        speaker = seg.get("speaker")
        if speaker and speaker != previous:
            heads[seg["segment"]] = f"[{speaker}]"
        previous = speaker
    return heads


# -- formats -----------------------------------------------------------------------------


def _clock(seconds: float, sep: str) -> str:
    ms = int(round(max(0.0, seconds) * 1000))
    h, ms = divmod(ms, 3_600_000)
    m, ms = divmod(ms, 60_000)
    s, ms = divmod(ms, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


PROPORTIONAL_NOTE = "timings of words inside segments are estimated in proportion to characters (no word timestamps)"


def to_srt(cues: list[Cue]) -> str:
    """A diarized cue whose speaker differs from the cue before starts with ``[Speaker N] `` (SRT has no voices);
    the label is laid out with the cue's words, within the line rules. A file of one speaker has no labels."""
    blocks = [
        f"{i}\n{_clock(c.start_s, ',')} --> {_clock(c.end_s, ',')}\n" + "\n".join(c.srt_lines or c.lines)
        for i, c in enumerate(cues, 1)
    ]
    return "\n\n".join(blocks) + ("\n" if blocks else "")


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


def _speaker(segment: dict, rules: CueRules) -> str | None:
    return segment.get("speaker") if rules.speakers else None


def to_txt(segments: list[dict], rules: CueRules = CueRules()) -> str:
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


def to_podcast(segments: list[dict], rules: CueRules = CueRules()) -> str:
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


def to_json(file_row: dict, segments: list[dict], cues: list[Cue], timed: bool, rules: CueRules = CueRules()) -> str:
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

    def word(w: dict) -> dict:
        out = {"word": w["word"], "start": w["start_s"], "end": w["end_s"], "probability": w["probability"]}
        return {**out, "speaker": w.get("speaker")} if labelled else out

    def segment(s: dict) -> dict:
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
        "cues": [
            {k: v for k, v in asdict(c).items() if (labelled or k != "speaker") and k != "srt_lines"} for c in cues
        ],
    }
    return json.dumps(doc, ensure_ascii=False, indent=1)


# -- a job dir -----------------------------------------------------------------------------


def export_job(
    job_dir: Path,
    formats: list[str],
    out_dir: Path | None = None,
    rules: CueRules = CueRules(),
    problems: list[str] | None = None,
    only: set[str] | None = None,
    named: Iterable[str] = (),
) -> Written:
    """One subtitle file per done input path and format, named after it (``outputs.output_names`` over every
    input of the job and ``named``); never over a file a person changed (``outputs.OutputDir``).

    Copies (one content at several paths) get a file for each path. ``only``: just these input paths (whisper
    mode writes the inputs named in the command). A table that cannot be read skips its input and is described
    in ``problems``.
    """
    unknown = sorted(set(formats) - set(ALL_FORMATS))
    if unknown:
        raise ValueError(f"unknown subtitle format(s) {', '.join(unknown)}; choose from {', '.join(ALL_FORMATS)}")
    job = JobDir(job_dir)
    out_dir = Path(out_dir) if out_dir else Path(job_dir) / "subtitles"
    rows = job.file_rows()
    names = output_names([p for row in rows for p in row_paths(row)] + [str(p) for p in named])
    files = [r for r in rows if r["status"] == "done" and (only is None or set(row_paths(r)) & only)]
    segments_by_file: dict[str, list[dict]] = {}
    for seg in job.read("segments", {r["file_id"] for r in files}).to_pylist():
        segments_by_file.setdefault(seg["file_id"], []).append(seg)
    damaged = {path.stem for path, _ in job.damaged}
    if problems is not None:
        problems += [damage_hint(path, error) for path, error in job.damaged]
    written = Written()
    for row in sorted(files, key=lambda r: r["path"]):
        if row["file_id"] not in damaged:
            segments = segments_by_file.get(row["file_id"], [])
            written.add(write_outputs(row, segments, formats, out_dir, rules, names, only, problems))
    return written


def named_speakers(segments: list[dict], names: tuple[str, ...]) -> list[dict]:
    """Segments (and their words) with ``Speaker N`` called ``names[N - 1]`` (``--speaker-names``); the manifest
    keeps the numbered labels."""
    if not names:
        return segments

    def name(label: str | None) -> str | None:
        number = label.rsplit(" ", 1)[-1] if label and label.startswith("Speaker ") else ""
        return names[int(number) - 1] if number.isdigit() and 0 < int(number) <= len(names) else label

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
    segments: list[dict],
    formats: list[str],
    out_dir: Path,
    rules: CueRules,
    names: dict[str, str],
    only: set[str] | None = None,
    problems: list[str] | None = None,
) -> Written:
    """One done file's outputs, for each of its paths (``only``: those among them), as its row turns done. An
    output that cannot be written for its own name is skipped and described in ``problems``."""
    ordered = sorted(segments, key=lambda seg: seg["segment"])
    laid_out: dict[tuple[str, ...], tuple] = {}  # per set of speaker names (copies may be in several shows)
    contents: dict[str, bytes] = {}
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
            log.warning("%s shares its name with another input: its files are named %s.*", path, name)
        for fmt in formats:
            text = _render(fmt, {**row, "path": path}, segments, cues, timed, rules)
            contents[f"{name}.{EXTRA_FORMATS.get(fmt, fmt)}"] = text.encode("utf-8")
    return OutputDir(out_dir).write(contents, problems)


def _this_name_only(exc: StorageError) -> bool:
    """A write that failed for its own name (too long, a folder of that name), not for the folder or disk."""
    cause = exc.__cause__
    return isinstance(cause, OSError) and cause.errno in (errno.ENAMETOOLONG, errno.EISDIR, errno.ENOTDIR)


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


def to_tsv(segments: list[dict], rules: CueRules = CueRules()) -> str:
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


def _render(fmt: str, row: dict, segments: list[dict], cues: list[Cue], timed: bool, rules: CueRules) -> str:
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
