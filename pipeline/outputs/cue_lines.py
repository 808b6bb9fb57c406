"""Cue text: where a cue's lines break, where a run of words is cut into cues, SRT's speaker labels.

The text side of the cue engine (``cues.py`` does the timing and the layout repairs): at most
``max_lines`` lines of at most ``max_line_chars`` characters, broken between words, preferably after
punctuation or before a conjunction or preposition (``BREAK_BEFORE``); a run of words is cut into cues
at a long pause, at the maximum duration, or where the lines would overflow, at its best break past the
first third. Pure functions of words and ``CueRules`` (defined here, the lower of the two modules).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..facts.rows import SegmentRow


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
class TimedWord:
    text: str  # stripped
    start_s: float
    end_s: float


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
    # The best break by (score, balance), ties to the smaller pair of lines; from the lines' lengths, the lines
    # themselves joined only for the tied best (an export lays out every cue word by word: this runs a lot).
    best_key, best = None, []
    first_len, n = -1, len(words)
    for i in range(1, n):
        first_len += len(words[i - 1]) + 1  # len(" ".join(words[:i]))
        second_len = len(text) - first_len - 1
        if (first_len <= limit or i == 1) and (second_len <= limit or i == n - 1):
            key = (-_break_score(words, i), abs(first_len - second_len))
            if best_key is None or key < best_key:
                best_key, best = key, [i]
            elif key == best_key:
                best.append(i)
    return min([" ".join(words[:i]), " ".join(words[i:])] for i in best) if best else None


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


def _speaker_heads(segments: list[SegmentRow], rules: CueRules) -> dict[int, str]:
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
