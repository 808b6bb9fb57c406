"""Segment clean-up, in one place: the rules that turn what Whisper wrote into segments worth keeping.

Within a piece (piece-relative seconds), after decoding: segment ends pulled in to the voice the VAD
heard (``tighten``), words attached to the segment whose tokens made them (``attach_words``), a long word after a
pause or a sentence started late (``truncate_long_words``), segments that are no words at all or lie outside every
voice dropped (``keep``), a repetition loop collapsed
(``drop_repeats``: its echoes that take no time always, every repeat when the piece looped). The decode stage
applies them through ``clean`` (the coverage check needs the cleaned segments to see what text covers); stitch.py
applies the rules across pieces. Every word's time goes through ``clamp_words``.

Pure functions on ``records`` (no torch, no model): tests/test_segments.py checks them on hand-made input.
"""

from __future__ import annotations

import re
import statistics

from ..audio import vad
from ..facts.records import RawSegment, Word
from ..facts.whisper import TIMESTAMP_S

_NON_SPEECH = re.compile(r"^\s*([\[\(][^\]\)]*[\]\)]\s*)+$")


def is_non_speech_text(text: str) -> bool:
    """Whisper's ways of saying 'no words here': empty, only symbols (♪ ...), or only [bracketed] notes."""
    return not any(c.isalnum() for c in text) or bool(_NON_SPEECH.match(text))


def clamp_words(words: list[Word], start_s: float, end_s: float, offset_s: float = 0.0) -> list[Word]:
    """Words shifted by ``offset_s``, each inside [start_s, end_s], in order (a word starts no earlier than
    the one before it ended), times rounded to the millisecond."""
    out: list[Word] = []
    for w in words:
        start = min(max(w.start_s + offset_s, start_s, out[-1].end_s if out else start_s), end_s)
        end = min(max(w.end_s + offset_s, start), end_s)
        out.append(Word(w.word, round(start, 3), round(end, 3), w.probability))
    return out


def shifted(seg: RawSegment, offset_s: float) -> RawSegment:
    """A clip's segment in its piece's time."""
    words = (
        None
        if seg.words is None
        else [
            Word(w.word, round(w.start_s + offset_s, 3), round(w.end_s + offset_s, 3), w.probability) for w in seg.words
        ]
    )
    return RawSegment(
        round(seg.start_s + offset_s, 3), round(seg.end_s + offset_s, 3), seg.text, seg.n_tokens, words, seg.ids
    )


def tighten(
    segments: list[RawSegment],
    speech: list[tuple[float, float]] | None,
    voice: list[tuple[float, float]] | None = None,
) -> None:
    """Pull each segment's ends in to the voice it covers (Whisper's timestamps often include the silence
    around the words): ends to the padded ``speech``, starts to just before the unpadded ``voice``."""
    if speech is None:
        return
    for seg in segments:
        seg.start_s, seg.end_s = vad.tighten(seg.start_s, seg.end_s, speech, voice)


def attach_words(segments: list[RawSegment], words: list[Word]) -> None:
    """Give each segment the words made of its own tokens (matched by their characters, in order),
    timed inside the segment and monotonic."""
    text_words = iter(w for w in words if w.word.strip())
    pending: Word | None = None
    for seg in segments:
        mine: list[Word] = []
        target = "".join(seg.text.split())
        have = ""
        while len(have) < len(target):
            w = pending or next(text_words, None)
            pending = None
            if w is None:
                break
            piece = "".join(w.word.split())
            if have and not target.startswith(have + piece):
                pending = w
                break
            have += piece
            mine.append(w)
        seg.words = clamp_words(mine, seg.start_s, seg.end_s)


SENTENCE_ENDS = ".。!！?？"


def ends_sentence(word: str) -> bool:
    """A word that ends a sentence: its last character a full stop, question or exclamation mark (not "...")."""
    text = word.strip()
    return bool(text) and text[-1] in SENTENCE_ENDS and not text.endswith("..")


def truncate_long_words(segments: list[RawSegment]) -> None:
    """openai-whisper's corrections of DTW's long words at their start (its ``add_word_timestamps``), in place.

    When Whisper's text skips a sentence, DTW gives the skipped sentence's seconds to the first word after it
    ("For" over 5.5 s of "For a full hour he had paced up and down...", unseen audio of 2026-12-07), and the
    coverage check, which reads a thin segment's words, saw those seconds as covered: the sentence was lost. A word
    longer than twice the median word (the median at most 0.7 s) that follows a sentence's end starts that long
    before its end; so does the first word of a segment that follows a pause (it ends more than four medians after
    the last segment's end), sharing a long second word's time with it first. openai-whisper also ends a long word
    at a sentence's end early (a pause given to it): not here, where the words decide what the coverage check decodes
    again, and a pause after a sentence is not speech the text skipped (on a noisy room it sent the noise after a
    sentence back to the model, which heard "in 1955" in it). A word that ends a sentence itself is never moved:
    podscribe's words carry their punctuation, and its time the pause after it, where openai-whisper's stops ("."
    is an entry of its own there until its words are joined). Words stay inside their segment, in order, to the
    millisecond (decision record 0057)."""
    words = [w for seg in segments for w in seg.words or ()]
    durations = [w.end_s - w.start_s for w in words if w.end_s > w.start_s]
    if not durations:
        return
    median = min(0.7, statistics.median(durations))
    longest = 2 * median
    for before, w in zip(words, words[1:]):
        if w.end_s - w.start_s > longest and ends_sentence(before.word) and not ends_sentence(w.word):
            w.start_s = w.end_s - longest
    last_speech_s = 0.0
    for seg in segments:
        ws = seg.words or []
        if ws and ws[0].end_s - last_speech_s > 4 * median and not ends_sentence(ws[0].word):
            first = ws[0]
            if first.end_s - first.start_s > longest or (len(ws) > 1 and ws[1].end_s - first.start_s > 2 * longest):
                if len(ws) > 1 and ws[1].end_s - ws[1].start_s > longest:
                    first.end_s = ws[1].start_s = max(ws[1].end_s / 2, ws[1].end_s - longest)
                first.start_s = max(0.0, first.end_s - longest)
        if ws:
            seg.words = clamp_words(ws, seg.start_s, seg.end_s)
        last_speech_s = seg.end_s


def keep(seg: RawSegment, speech: list[tuple[float, float]] | None) -> bool:
    """Words (not only symbols or [notes]) where the VAD heard a voice (when it listened)."""
    return not is_non_speech_text(seg.text) and (speech is None or vad.overlaps(seg.start_s, seg.end_s, speech))


def drop_repeats(segments: list[RawSegment], window: int = 4, stalled_only: bool = False) -> list[RawSegment]:
    """Collapse a repetition loop: a segment whose text equals one of the last few kept ones goes.

    ``stalled_only``: only such a segment that takes no time (shorter than one timestamp step), a loop's echo.
    Whisper can repeat a phrase with its timestamps stuck on one instant ("the book, the book, ..." ten times at
    20.53 s in a noisy room, unseen audio of 2026-12-07) while the piece's compression ratio, diluted by the rest of
    its text, stays under the loop threshold. Speech takes time: a repeat that does is kept, as is a new text that
    does not."""
    kept: list[RawSegment] = []
    for seg in segments:
        key = seg.text.strip().lower()
        repeat = key in (k.text.strip().lower() for k in kept[-window:])
        if not repeat or (stalled_only and seg.end_s - seg.start_s >= TIMESTAMP_S):
            kept.append(seg)
    return kept


def clean(
    segments: list[RawSegment], words: list[Word] | None, speech: list[tuple[float, float]] | None, looped: bool
) -> list[RawSegment]:
    """The rest of the clean-up once word timings are known (segments already tightened): words attached,
    non-speech and voiceless segments dropped, a loop's echoes that take no time dropped, repeats collapsed when the
    piece looped."""
    if words is not None:
        attach_words(segments, words)
        truncate_long_words(segments)
    kept = drop_repeats([s for s in segments if keep(s, speech)], stalled_only=True)
    return drop_repeats(kept) if looped else kept
