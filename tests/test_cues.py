"""Cue rules on hand-made cues (no model)."""

from __future__ import annotations

import html

from pipeline.export import Cue, to_vtt


def test_webvtt_cue_text_is_escaped_and_parses_back_to_the_same_text():
    import webvtt

    texts = ["Route 17 --> the hospital", "R&B <i>and</i> jazz", "1 < 2 > 0 &amp; more", "plain words"]
    cues = [Cue(1.0 + 2 * k, 2.5 + 2 * k, [t]) for k, t in enumerate(texts)]
    vtt = to_vtt(cues)
    body = vtt.split("\n\n", 1)[1]
    assert all("-->" not in line for line in body.splitlines() if not line[:2].isdigit())
    parsed = webvtt.from_string(vtt).captions
    assert [html.unescape(c.text) for c in parsed] == texts
    assert [(c.start, c.end) for c in parsed] == [(f"00:00:0{1 + 2 * k}.000", f"00:00:0{2 + 2 * k}.500")
                                                  for k in range(len(texts))]
