"""Fast tests (no model) of segment making and clean-up on hand-made input: Whisper's segment split
against transformers' own, words attached and clamped, non-speech and voiceless segments dropped."""

from __future__ import annotations

import random

import torch
from transformers.models.whisper.generation_whisper import WhisperGenerationMixin

from pipeline.decode.generate import split_segments
from pipeline.decode.segments import attach_words, clamp_words, clean, drop_repeats, ends_sentence, truncate_long_words
from pipeline.facts.records import RawSegment, Word

TS = 50364  # <|0.00|>


def _random_pass(rng: random.Random) -> list[int]:
    """A pass as Whisper writes one: timestamp pairs around text, ending in one or two timestamps or in text."""
    seq, t = [], rng.randrange(0, 100)
    for _ in range(rng.randrange(0, 5)):
        seq += [TS + t, *(rng.randrange(0, 50000) for _ in range(rng.randrange(1, 6)))]
        t += rng.randrange(1, 300)
        seq.append(TS + min(t, 1500))
    ending = rng.choice(["pair", "single", "text", "none"])
    if ending == "pair" and seq:
        seq.append(seq[-1])
    elif ending == "text":
        seq += [rng.randrange(0, 50000) for _ in range(rng.randrange(1, 4))]
    return seq or [rng.randrange(0, 50000)]


def test_segments_and_seek_are_transformers_own():
    rng = random.Random(0)
    for _ in range(500):
        seq, offset_s, window = _random_pass(rng), rng.choice([0.0, 12.34]), rng.choice([3000, 1234])
        ours, moved = split_segments(seq, TS, offset_s, window)
        theirs, their_move = WhisperGenerationMixin._retrieve_segment(
            torch.tensor(seq),
            [{}],
            torch.tensor([offset_s], dtype=torch.float64),
            TS,
            torch.tensor([window]),
            0.02,
            0.01,
            2,
            0,
            0,
            False,
            torch.zeros(1, 3),
        )
        assert [s["tokens"] for s in ours] == [s["tokens"].tolist() for s in theirs], seq
        for a, b in zip(ours, theirs):
            assert abs(a["start"] - float(b["start"])) < 1e-9 and abs(a["end"] - float(b["end"])) < 1e-9, seq
        assert moved == int(their_move), seq


def test_clamped_words_stay_inside_their_segment_in_order():
    words = [Word(" a", -0.5, 0.2, 0.9), Word(" b", 0.1, 0.15, 0.9), Word(" c", 0.3, 9.0, 0.9)]
    out = clamp_words(words, 0.0, 2.0, offset_s=0.0004)
    assert [(w.start_s, w.end_s) for w in out] == [(0.0, 0.2), (0.2, 0.2), (0.3, 2.0)]
    assert all(a.end_s <= b.start_s for a, b in zip(out, out[1:]))


def test_words_go_to_the_segment_whose_text_they_spell():
    segments = [RawSegment(0.0, 1.0, "Hello there."), RawSegment(1.5, 3.0, "General Kenobi!")]
    words = [
        Word(" Hello", 0.0, 0.4, 0.9),
        Word(" there.", 0.4, 1.2, 0.9),
        Word(" General", 1.1, 2.0, 0.8),
        Word(" Ken", 2.0, 2.4, 0.7),
        Word("obi!", 2.4, 2.9, 0.7),
    ]
    attach_words(segments, words)
    assert [[w.word for w in s.words] for s in segments] == [[" Hello", " there."], [" General", " Ken", "obi!"]]
    assert segments[0].words[-1].end_s == 1.0 and segments[1].words[0].start_s == 1.5  # clamped into each segment


def test_clean_drops_non_speech_and_voiceless_segments_and_collapses_loops_only_when_asked():
    speech = [(0.0, 4.0)]
    segments = [
        RawSegment(0.0, 1.0, "one"),
        RawSegment(1.0, 2.0, "♪ ♪"),
        RawSegment(2.0, 3.0, "one"),
        RawSegment(10.0, 11.0, "far from any voice"),
    ]
    assert [s.text for s in clean(list(segments), None, speech, looped=False)] == ["one", "one"]
    assert [s.text for s in clean(list(segments), None, speech, looped=True)] == ["one"]
    assert [s.text for s in clean(list(segments), None, None, looped=False)] == ["one", "one", "far from any voice"]


def test_a_loop_stuck_on_one_instant_loses_its_echoes_and_speech_that_takes_time_stays():
    """The loop of a noisy-room episode no tuning saw: a phrase repeated with its timestamps stuck on 20.53 s,
    the piece's compression ratio under the loop threshold."""
    stuck = [RawSegment(20.53, 20.53, "the book,") for _ in range(9)]
    segments = [
        RawSegment(15.4, 20.4, "Produced the block books, the true printed book,"),
        RawSegment(20.4, 20.53, "the book,"),
        *stuck,
        RawSegment(20.53, 20.53, "you."),  # no time, but nothing said before: not an echo
        RawSegment(21.2, 27.9, "Now, as all books"),
    ]
    assert [s.text for s in drop_repeats(segments, stalled_only=True)] == [
        "Produced the block books, the true printed book,",
        "the book,",
        "you.",
        "Now, as all books",
    ]
    speech = [(0.0, 30.0)]
    assert [s.text for s in clean(list(segments), None, speech, looped=False)].count("the book,") == 1
    # said again, taking time: a person repeating themselves (or two people saying the same) is kept
    said_twice = [RawSegment(1.0, 1.4, "Yes."), RawSegment(2.0, 2.4, "yes."), RawSegment(3.0, 3.3, "Yes.")]
    assert drop_repeats(said_twice, stalled_only=True) == said_twice
    # a repeat further back than the window is not this loop's echo
    far = [RawSegment(0.0, 1.0, "the book,"), *(RawSegment(i, i + 1.0, f"line {i}") for i in range(1, 6))]
    assert drop_repeats([*far, RawSegment(6.0, 6.0, "the book,")], stalled_only=True)[-1].text == "the book,"


def _truncated(segments: list[RawSegment], words: list[tuple[str, float, float]]) -> list[list[tuple[float, float]]]:
    """``words`` (text, start, end) attached to ``segments`` and truncated (``truncate_long_words``): each
    segment's word spans."""
    attach_words(segments, [Word(text, start, end, 0.9) for text, start, end in words])
    truncate_long_words(segments)
    return [[(w.start_s, w.end_s) for w in seg.words] for seg in segments]


def test_a_long_word_after_a_pause_or_a_sentence_starts_late_as_openai_whisper_has_it():
    # the diagnosed piece (unseen audio, 2026-12-07): the text skipped "For a full hour ..." (8.05-12.6 s of voice)
    # and DTW gave the skipped sentence's seconds to the next sentence's first word
    segments = [RawSegment(0.67, 7.0, "And then leisure."), RawSegment(7.0, 23.0, "For although the Chinese.")]
    words = [(" And", 0.7, 1.0), (" then", 1.0, 1.3), (" leisure.", 1.3, 1.7)]
    words += [(" For", 7.9, 13.4), (" although", 13.5, 13.8), (" the", 13.8, 14.0), (" Chinese.", 14.0, 22.9)]
    # "For": 5.5 s, the skipped sentence's time; "Chinese.": the pause after the sentence
    spans = _truncated(segments, words)
    median = 0.3  # of the seven words' durations
    (first_start, first_end), last = spans[1][0], spans[1][-1]
    assert first_end == 13.4 and abs(first_start - (13.4 - 2 * median)) < 1e-9  # starts twice the median before its end
    assert spans[0][-1] == (1.3, 1.7)  # short words are left alone
    assert last == (14.0, 22.9)  # a sentence's last word keeps its end (the pause is not skipped speech)
    # a long first word right after the segment before (no pause) and not after a sentence's end is left alone
    hello = [(" Hello", 0.0, 0.3), (" there", 0.3, 0.6), (" Fine", 2.0, 3.0)]
    assert _truncated([RawSegment(0.0, 2.0, "Hello there"), RawSegment(2.0, 9.0, "Fine")], hello)[1][0] == (2.0, 3.0)
    # the same word after a pause (the segment before ends 1.5 s earlier, more than four medians) starts late;
    # median 0.3: the word is 1.0 s, ends 2.5 s after the last speech
    hello = [(" Hello", 0.0, 0.3), (" there", 0.3, 0.5), (" Fine", 2.0, 3.0)]
    assert _truncated([RawSegment(0.0, 0.5, "Hello there"), RawSegment(2.0, 9.0, "Fine")], hello)[1][0] == (2.4, 3.0)
    # after a pause, a short first word shares a long second word's time (openai-whisper's boundary) before it;
    # median 0.25: the boundary at 5.0 - 0.5, the first word 0.5 before it
    shared = [(" Hi", 0.0, 0.3), (" there", 0.3, 0.5), (" a", 2.0, 2.2), (" big", 2.2, 5.0)]
    spans = _truncated([RawSegment(0.0, 0.5, "Hi there"), RawSegment(2.0, 9.0, "a big")], shared)
    assert spans[1] == [(4.0, 4.5), (4.5, 5.0)]
    # inside a segment, only after a sentence's end; the median is held to 0.7 s: median 2.0, held to 0.7, "Two"
    # starts 1.4 s before its end, "three" is left
    inside = [(" One.", 0.0, 1.0), (" Two", 1.0, 3.0), (" three", 3.0, 6.0)]
    assert _truncated([RawSegment(0.0, 9.0, "One. Two three")], inside) == [[(0.0, 1.0), (1.6, 3.0), (3.0, 6.0)]]
    # a word that ends a sentence itself carries the pause after it: never moved, after a sentence or a pause
    final = [(" Right.", 0.0, 0.3), (" Yes.", 0.3, 4.0), (" We", 4.0, 4.3), (" went", 4.3, 4.6), (" home.", 4.6, 4.9)]
    assert _truncated([RawSegment(0.0, 8.0, "Right. Yes. We went home.")], final)[0][1] == (0.3, 4.0)
    alone = [(" Hi", 0.0, 0.3), (" there", 0.3, 0.5), (" Yes.", 2.0, 5.0)]
    assert _truncated([RawSegment(0.0, 0.5, "Hi there"), RawSegment(2.0, 9.0, "Yes.")], alone)[1][0] == (2.0, 5.0)
    assert ends_sentence(" home.") and ends_sentence("?") and not ends_sentence(" Well...") and not ends_sentence(" ")
    # no word with a duration: nothing to measure a median by, nothing changes
    assert _truncated([RawSegment(0.0, 1.0, "a")], [(" a", 0.5, 0.5)]) == [[(0.5, 0.5)]]
