"""The cue engine: subtitle cues laid out from a file's segments (the writers are in ``export.py``; line
breaks, the cut of words into cues and SRT's speaker labels are in ``cue_lines.py``).

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

import math
from dataclasses import dataclass, field
from functools import cached_property

from ..facts.rows import SegmentRow
from .cue_lines import CueRules, TimedWord, _cue_groups, _speaker_heads, split_lines


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


# -- laying words out ---------------------------------------------------------------

_REPAIR_REACH = 6  # cues on each side of a change of layout that are timed again to judge it


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


def segment_words(segment: SegmentRow) -> tuple[list[TimedWord], bool]:
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
    segments: list[SegmentRow], rules: CueRules = CueRules(), duration_s: float | None = None
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
