"""Second chances (pipeline/decode/recover.py): the pure decisions, on planted spans.

What the models do with them is tested in tests/test_second_chances.py (base, tiny.en, real clips).
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass

from pipeline.decode import recover
from pipeline.decode.recover import Candidate
from pipeline.facts.records import Word

LP, CR = -1.0, 2.4  # Whisper's thresholds


def test_uncovered_finds_speech_after_the_last_segment_and_inside_long_pauses():
    speech = [(0.5, 9.0), (12.0, 20.0)]
    covered = [(0.6, 4.0), (4.2, 5.0), (12.0, 19.5)]
    assert recover.uncovered(speech, covered, 1.0) == [(5.0, 9.0)]  # 0.5-0.6 and 19.5-20 are below a second
    assert recover.uncovered(speech, covered, 0.05) == [(0.5, 0.6), (4.0, 4.2), (5.0, 9.0), (19.5, 20.0)]
    assert recover.uncovered(speech, [], 1.0) == speech  # a piece that decoded to nothing
    assert recover.uncovered([], covered, 1.0) == []


def test_uncovered_handles_covers_that_overlap_and_straddle_spans():
    speech = [(1.0, 3.0), (4.0, 10.0)]
    covered = [(0.0, 1.5), (1.2, 2.0), (2.5, 4.5), (8.0, 8.5)]
    assert recover.uncovered(speech, covered, 0.3) == [(2.0, 2.5), (4.5, 8.0), (8.5, 10.0)]


def test_a_segment_is_thin_when_its_speech_outlasts_its_words():
    speech = [(0.0, 10.6)]
    assert recover.thin(0.0, 10.6, 8, speech, 1.0)  # one 3 s sentence stretched over 10.6 s of voice
    assert recover.thin(103.3, 106.8, 4, [(103.0, 107.3)], 1.0)  # "the real enemy here." over the next sentence
    assert not recover.thin(0.0, 10.6, 25, speech, 1.0)  # 2.4 words/s: ordinary speech
    assert not recover.thin(0.0, 10.6, 8, [(0.0, 4.0)], 1.0)  # the rest of the span is not voice
    assert recover.voiced(2.0, 5.0, [(0.0, 3.0), (4.0, 4.5), (6.0, 7.0)]) == 1.5


def test_clip_adds_context_inside_the_piece():
    assert recover.clip((5.0, 9.0), 30.0) == (5.0 - recover.CONTEXT_S, 9.0 + recover.CONTEXT_S)
    assert recover.clip((0.1, 29.9), 30.0) == (0.0, 30.0)


def test_a_recovered_segment_belongs_to_its_gap_not_to_the_context():
    gap = (5.0, 9.0)
    assert recover.belongs(5.1, 8.8, gap)
    assert recover.belongs(4.7, 6.0, gap)  # mostly inside
    assert not recover.belongs(4.7, 5.0, gap)  # the context's last word decoded again
    assert not recover.belongs(1.0, 5.3, gap)  # mostly outside, little of the gap
    assert recover.belongs(3.0, 8.0, gap)  # covers most of the gap


def test_a_clip_is_not_tried_twice_but_a_later_start_is_new():
    attempts = [(4.7, 9.3)]
    assert recover.tried((4.7, 9.3), attempts)
    assert recover.tried((4.75, 9.0), attempts)
    assert not recover.tried((6.2, 9.3), attempts)  # the seek moved past what was recovered
    assert not recover.tried((1.0, 3.0), attempts)  # another gap, earlier


@dataclass
class Seg:
    start_s: float
    end_s: float
    words: list[Word] | None = None


def test_merge_orders_segments_and_ends_a_stretched_one_where_the_recovered_starts():
    first = Seg(0.0, 10.6, [Word(" Will", 0.2, 0.5, 0.9), Word(" it?", 0.5, 10.4, 0.9)])
    later = Seg(12.0, 14.0)
    found = Seg(3.5, 10.3)
    out = recover.merge([first, later], [found])
    assert [(s.start_s, s.end_s) for s in out] == [(0.0, 3.5), (3.5, 10.3), (12.0, 14.0)]
    assert [(w.start_s, w.end_s) for w in out[0].words] == [(0.2, 0.5), (0.5, 3.5)]


def test_a_recovered_segment_that_only_repeats_its_neighbours_border_words_is_an_echo():
    before = "The invention of movable metal letters may be considered as the invention of the art of printing."
    after = "And it was a matter of course that in the middle ages, whatever they were."
    # the end of the segment before and the start of the one after, decoded again from the clip's context
    assert recover.echoes("of printing. And it was a", before, after)
    assert recover.echoes("Whatever they were.", after, None)
    assert recover.echoes("And it was", None, after)
    # new words, even beside repeated ones, are speech the first pass lost
    assert not recover.echoes("Will the fruit still be safe to eat?", before, after)
    assert not recover.echoes("of printing. Then it was a", before, after)
    assert not recover.echoes("printing of", before, after)  # not in order at the border
    assert not recover.echoes("the art", before, None)  # inside the segment before, not at its end
    assert not recover.echoes("...", before, after)


def test_an_echo_is_judged_against_the_segments_on_either_side_of_its_gap():
    seg = namedtuple("seg", "start_s text")
    segments = [seg(0.0, "One two three."), seg(4.0, "the art of printing."), seg(9.0, "And it was a matter.")]
    gap = (7.0, 8.5)
    assert recover.echoes_around("of printing. And it was", segments, gap)
    assert not recover.echoes_around("One two three.", segments, gap)  # not a neighbour of this gap
    assert recover.echoes_around("One two three.", segments, (0.5, 3.0))  # the segment before this gap
    assert recover.echoes_around("a matter.", segments, (9.5, 12.0))  # nothing after: the end of the last
    assert not recover.echoes_around("a matter.", [], gap)


def test_whisper_rule_keeps_the_candidate_that_passes():
    looping = Candidate(avg_logprob=-0.2, compression_ratio=3.5)
    unsure = Candidate(avg_logprob=-1.4, compression_ratio=1.6)
    fine = Candidate(avg_logprob=-0.5, compression_ratio=1.7)
    assert recover.fails(looping, LP, CR) and recover.fails(unsure, LP, CR) and not recover.fails(fine, LP, CR)
    assert recover.better(looping, fine, LP, CR)
    assert not recover.better(fine, looping, LP, CR)
    assert recover.better(looping, unsure, LP, CR)  # both fail: the one that does not loop
    assert not recover.better(unsure, looping, LP, CR)
    assert recover.better(unsure, Candidate(-1.2, 1.5), LP, CR)  # both unsure: the higher log-prob
    assert not recover.better(unsure, Candidate(-1.6, 1.5), LP, CR)


def test_an_attempt_gets_tokens_for_its_length_up_to_whispers_sample_length():
    assert recover.rung_tokens(30.0) == recover.MAX_NEW_TOKENS  # a full window: openai-whisper's sample_len
    assert recover.rung_tokens(13.0) == recover.MAX_NEW_TOKENS
    assert recover.rung_tokens(1.6) == 56  # a coverage clip: 32 + ceil(1.6 * 448 / 30)
    assert recover.rung_tokens(0.0) == recover.RUNG_SLACK_TOKENS
    lengths = [recover.rung_tokens(s / 10) for s in range(300)]
    assert lengths == sorted(lengths)
    # fast English (~5 tokens a second, timestamps included) fits with 20 to spare at every length
    assert all(recover.rung_tokens(s / 10) >= 5 * s / 10 + 20 for s in range(300))


def test_an_attempt_that_never_ended_counts_as_a_loop():
    unsure = Candidate(avg_logprob=-1.4, compression_ratio=1.6)
    ran_on = Candidate(avg_logprob=-0.3, compression_ratio=1.9, ran_on=True)  # passes both checks by its numbers
    assert recover.fails(ran_on, LP, CR)
    assert not recover.better(unsure, ran_on, LP, CR)  # the unsure text that ended stays
    assert recover.better(ran_on, unsure, LP, CR)
    looping = Candidate(avg_logprob=-0.2, compression_ratio=3.5)
    assert recover.better(looping, Candidate(-0.2, 3.5, ran_on=True), LP, CR) is False  # both loop: log-prob
    assert recover.better(looping, Candidate(-0.1, 3.5, ran_on=True), LP, CR)


def test_merge_starts_a_segment_after_the_speech_its_text_skipped():
    # the segment's words begin after the recovered sentence: its text skipped the speech at its start
    skipping = Seg(7.0, 23.0, [Word(" For", 12.8, 13.4, 0.9), Word(" although", 13.5, 13.8, 0.9)])
    found = Seg(8.35, 12.75)
    out = recover.merge([skipping], [found])
    assert [(s.start_s, s.end_s) for s in out] == [(8.35, 12.75), (12.75, 23.0)]
    assert [(w.start_s, w.end_s) for w in out[1].words] == [(12.8, 13.4), (13.5, 13.8)]
    # a recovered segment that began in the gap before: the skipping segment still starts after it; a word that
    # begins up to WORD_PAD_S before the recovered end counts as after it, its start clamped to the segment's
    early = Seg(7.0, 23.0, [Word(" For", 12.6, 13.4, 0.9)])
    out = recover.merge([early], [Seg(6.8, 12.75)])
    assert [(s.start_s, s.end_s) for s in out] == [(6.8, 12.75), (12.75, 23.0)]
    assert (out[1].words[0].start_s, out[1].words[0].end_s) == (12.75, 13.4)
    # a recovered segment reaching the segment's end leaves no segment of no time: the rule before applies
    late = Seg(0.0, 10.0, [Word(" hi", 9.8, 10.0, 0.9)])
    out = recover.merge([late], [Seg(2.0, 10.0)])
    assert [(s.start_s, s.end_s) for s in out] == [(0.0, 2.0), (2.0, 10.0)]
    # words from the segment's start: it stretched over speech it did not transcribe, so it ends before
    stretched = Seg(7.0, 23.0, [Word(" For", 7.2, 7.5, 0.9), Word(" although", 7.5, 7.8, 0.9)])
    out = recover.merge([stretched], [Seg(8.35, 12.75)])
    assert [(s.start_s, s.end_s) for s in out] == [(7.0, 8.35), (8.35, 12.75)]
