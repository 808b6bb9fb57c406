"""Cue rules on hand-made word timings (no model): every cue obeys every rule, or says which it breaks."""

from __future__ import annotations

import html
import json
import random

import pytest

from pipeline.outputs.cues import (
    Cue,
    CueRules,
    TimedWord,
    _Block,
    _cue_groups,
    _ms_up,
    _repair,
    build_cues,
    segment_words,
)
from pipeline.outputs.export import to_json, to_srt, to_vtt

RULES = CueRules()
FLAGGABLE = {"short", "fast"}  # the rules a cue may break where speech leaves no room, saying so in its flags


def segment(index: int, words: list[tuple[str, float, float]], timed: bool = True) -> dict:
    """A segments-table row from (word, start, end) triples; without word timings when not ``timed``."""
    return {
        "segment": index,
        "start_s": words[0][1],
        "end_s": words[-1][2],
        "text": " ".join(w for w, _, _ in words),
        "words": [{"word": " " + w, "start_s": s, "end_s": e, "probability": 0.9} for w, s, e in words]
        if timed
        else None,
    }


def rule_breaks(
    cues: list[Cue], segments: list[dict], rules: CueRules = RULES, duration_s: float | None = None
) -> list[tuple[int, str]]:
    """Every (cue index, rule) broken, flags or not. Cue words are matched to the segments' words in order."""
    words = [w for s in sorted(segments, key=lambda s: s["segment"]) for w in segment_words(s)[0]]
    assert " ".join(c.text for c in cues).split() == [w.text for w in words], "the cues' text is the segments' text"
    out, pos = [], 0
    for i, cue in enumerate(cues):
        mine, pos = words[pos : pos + len(cue.text.split())], pos + len(cue.text.split())
        duration = cue.end_s - cue.start_s
        broken = {
            "empty": duration <= 0,
            "lines": not 1 <= len(cue.lines) <= rules.max_lines
            or any(len(line) > rules.max_line_chars and " " in line for line in cue.lines),
            "short": duration < rules.min_duration_s - 1e-6,
            "long": duration > rules.max_duration_s + 1e-6,
            "fast": len(cue.text) > rules.max_cps * duration + 1e-6,
            "gap": i + 1 < len(cues) and cues[i + 1].start_s - cue.end_s < rules.min_gap_s - 1e-6,
            "outside": cue.start_s < 0 or (duration_s is not None and cue.end_s > duration_s + 1e-6),
            "anticipates": cue.start_s < mine[0].start_s - rules.max_lead_s - 1e-6,
            "pause": any(b.start_s - a.end_s > rules.pause_split_s for a, b in zip(mine, mine[1:])),
        }
        out += [(i, rule) for rule, yes in broken.items() if yes]
    return out


def assert_rules_or_flags(
    cues: list[Cue], segments: list[dict], rules: CueRules = RULES, duration_s: float | None = None
) -> list[tuple[int, str]]:
    """Each broken rule is a flaggable one and flagged, each flag names a broken rule; the breaks."""
    breaks = rule_breaks(cues, segments, rules, duration_s)
    unflagged = [(i, rule, cues[i]) for i, rule in breaks if rule not in FLAGGABLE or rule not in cues[i].flags]
    assert not unflagged, unflagged
    assert sorted((i, f) for i, c in enumerate(cues) for f in c.flags) == sorted(breaks), "a flag for a rule met"
    return breaks


def test_a_zero_length_word_gets_the_minimum_duration_where_there_is_room():
    segments = [segment(0, [("Yes.", 5.0, 5.0)])]
    cues, timed = build_cues(segments, RULES, 10.0)
    assert timed and [(c.start_s, c.end_s, c.flags) for c in cues] == [(5.0, 5.0 + _ms_up(5 / 6) / 1000, [])]
    assert not assert_rules_or_flags(cues, segments, duration_s=10.0)


def test_a_zero_length_one_word_segment_squeezed_between_two_is_never_empty_and_is_flagged():
    # the 00:01:14,033 --> 00:01:14,033: a one-word segment right between two others
    segments = [
        segment(0, [("Right,", 72.9, 73.3), ("sure.", 73.35, 73.9)]),
        segment(1, [("Yes.", 74.033, 74.033)]),
        segment(2, [("And", 74.1, 74.3), ("the", 74.3, 74.4), ("library", 74.4, 74.9), ("roof?", 74.9, 75.5)]),
    ]
    cues, _ = build_cues(segments, RULES, 80.0)
    assert [c.text for c in cues] == ["Right, sure.", "Yes.", "And the library roof?"]
    breaks = assert_rules_or_flags(cues, segments, duration_s=80.0)
    yes = cues[1]
    assert breaks == [(1, "short")] and yes.flags == ["short"]
    # it got all the room there is: max_lead_s before its word, up to the gap before the next cue
    assert yes.start_s == pytest.approx(74.033 - RULES.max_lead_s) and yes.end_s > yes.start_s
    assert cues[2].start_s - yes.end_s == pytest.approx(_ms_up(RULES.min_gap_s) / 1000)


def test_very_fast_words_back_to_back_are_flagged_fast_and_never_empty():
    words = [(f"word{k:02d}", round(10 + 0.08 * k, 3), round(10 + 0.08 * (k + 1), 3)) for k in range(40)]
    words += [("end.", 13.2, 13.2), ("Done.", 13.2, 13.2)]  # and two zero-length words at the same instant
    segments = [segment(0, words), segment(1, [("Next", 13.3, 13.6), ("one.", 13.6, 14.0)])]
    for timed in (True, False):
        segs = [
            segment(s["segment"], [(w["word"].strip(), w["start_s"], w["end_s"]) for w in s["words"]], timed)
            for s in segments
        ]
        cues, _ = build_cues(segs, RULES, 20.0)
        breaks = assert_rules_or_flags(cues, segs, duration_s=20.0)
        # 60+ characters a second: no layout can help, every cue of it is too fast (the last one short too)
        assert {rule for _, rule in breaks} <= FLAGGABLE and all("fast" in c.flags for c in cues[:-1]), breaks
        assert all(c.end_s > c.start_s for c in cues)
        assert cues[-1].text == "Next one." and not cues[-1].flags  # the slow cue after them keeps its time


def test_a_one_word_cue_at_the_end_of_a_full_cue_takes_words_from_it_instead_of_breaking_a_rule():
    # 80 characters with no good break, then "Yes." in the same segment: the first layout leaves "Yes."
    # alone in a cue of 0.3 s right before the next segment; moving words over gives it its time.
    texts = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike ok".split()
    words, t = [], 20.0
    for w in texts:
        words.append((w, round(t, 3), round(t + 0.33, 3)))
        t += 0.35
    words.append(("Yes.", round(t, 3), round(t + 0.3, 3)))
    nxt = round(t + 0.35, 3)
    segments = [
        segment(0, words),
        segment(1, [("Then", nxt, nxt + 0.5), ("we", nxt + 0.5, nxt + 0.8), ("voted.", nxt + 0.8, nxt + 1.6)]),
    ]
    assert [len(g) for g in _cue_groups(segment_words(segments[0])[0], RULES)] == [len(texts), 1]
    cues, _ = build_cues(segments, RULES, 40.0)
    assert not assert_rules_or_flags(cues, segments, duration_s=40.0)
    assert cues[1].text.endswith("Yes.") and cues[1].text != "Yes."


def test_two_short_cues_of_one_segment_merge_when_the_merged_cue_meets_every_rule():
    words = [
        TimedWord("Well", 10.0, 10.1),
        TimedWord("I", 10.1, 10.2),
        TimedWord("see", 10.2, 10.4),
        TimedWord("you.", 10.45, 10.5),
    ]
    blocks = [_Block(0, words[:3]), _Block(0, words[3:]), _Block(1, [TimedWord("Right.", 10.7, 11.1)])]
    merged, times = _repair(blocks, RULES, 20_000)
    assert [[w.text for w in b.words] for b in merged] == [["Well", "I", "see", "you."], ["Right."]]
    # up to the gap before the next cue, and only as early as its reading speed needs (0.267 s early)
    assert times[0] == (10616 - _ms_up(len("Well I see you.") / RULES.max_cps), 10616)


def test_without_word_timings_fast_segments_are_flagged_and_slow_ones_obey():
    fast = "so the council has nine members and one mayor who is elected citywide and eight councillors"
    slow = "Sure, go on."
    segments = [
        {"segment": 0, "start_s": 1.0, "end_s": 4.0, "text": fast, "words": None},  # ~30 characters a second
        {"segment": 1, "start_s": 4.05, "end_s": 7.0, "text": fast, "words": None},
        {"segment": 2, "start_s": 9.0, "end_s": 10.0, "text": slow, "words": None},
        {"segment": 3, "start_s": 12.0, "end_s": 15.0, "text": slow + " " + slow, "words": None},
    ]
    cues, timed = build_cues(segments, RULES, 16.0)
    assert not timed
    breaks = assert_rules_or_flags(cues, segments, duration_s=16.0)
    assert breaks and {i for i, _ in breaks} <= {i for i, c in enumerate(cues) if c.text in fast}
    assert "fast" in cues[0].flags and all(not c.flags for c in cues if slow in c.text)


def test_random_word_timings_every_cue_obeys_every_rule_or_is_flagged():
    rng = random.Random(14)
    vocabulary = (
        "a I so and the of council library roof warehouse rezoning, vote. Yes. unanimous! extraordinary".split()
    )
    for trial in range(60):
        segments, t = [], rng.uniform(0, 2)
        for index in range(rng.randint(1, 12)):
            words = []
            for _ in range(rng.randint(1, 30)):
                length = rng.choice([0.0, 0.0, 0.02, 0.1, 0.2, 0.35, 0.6])  # zero-length and very fast words
                words.append((rng.choice(vocabulary), round(t, 3), round(t + length, 3)))
                t += length + rng.choice([0.0, 0.0, 0.01, 0.05, 0.2, 0.5, 1.6])
            segments.append(segment(index, words, timed=trial % 3 != 0))
            t += rng.choice([0.0, 0.05, 0.1, 0.3, 2.0])
        duration = t + rng.choice([0.0, 0.3, 5.0])
        rules = rng.choice([RULES, CueRules(max_line_chars=32), CueRules(max_lines=1, max_cps=20.0)])
        cues, _ = build_cues(segments, rules, duration)
        assert_rules_or_flags(cues, segments, rules, duration)


def test_flags_are_in_the_json_export_only():
    segments = [segment(0, [("Yes.", 74.033, 74.033)]), segment(1, [("No.", 74.1, 74.4)])]
    cues, timed = build_cues(segments, RULES, 80.0)
    assert cues[0].flags == ["short"] and cues[1].flags == []
    row = {"path": "ep.mp3", "file_id": "f", "duration_s": 80.0, "language": "en"}
    doc = json.loads(to_json(row, segments, cues, timed))
    assert [c["flags"] for c in doc["cues"]] == [["short"], []]
    assert "short" not in to_srt(cues) and "short" not in to_vtt(cues, timed)


def test_webvtt_cue_text_is_escaped_and_parses_back_to_the_same_text():
    import webvtt

    texts = ["Route 17 --> the hospital", "R&B <i>and</i> jazz", "1 < 2 > 0 &amp; more", "plain words"]
    cues = [Cue(1.0 + 2 * k, 2.5 + 2 * k, [t]) for k, t in enumerate(texts)]
    vtt = to_vtt(cues)
    body = vtt.split("\n\n", 1)[1]
    assert all("-->" not in line for line in body.splitlines() if not line[:2].isdigit())
    parsed = webvtt.from_string(vtt).captions
    assert [html.unescape(c.text) for c in parsed] == texts
    assert [(c.start, c.end) for c in parsed] == [
        (f"00:00:0{1 + 2 * k}.000", f"00:00:0{2 + 2 * k}.500") for k in range(len(texts))
    ]
