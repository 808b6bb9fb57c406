"""From window labels to speaker turns, and from turns to labelled segments and words (pure, no torch).

The embedding windows lie over the speech the transcript covers: its words when word timings were
computed, else its segments (already pulled in to the VAD's voice by the decode stage). A window labels
the time nearest to its centre; a segment takes the speaker with most time inside it, a word the speaker
at its span; a segment whose words change speaker is split there (its text is its words').
"""

from __future__ import annotations

from ..facts.records import Turn
from ..facts.rows import SegmentRow, WordRow


def label(index: int) -> str:
    return f"Speaker {index + 1}"


def windows(regions: list[tuple[float, float]], window_s: float, hop_s: float) -> list[tuple[float, float]]:
    """Windows of ``window_s`` spread evenly over each region at most ``hop_s`` apart; a region shorter than a
    window is one window of its own length (a short turn is not mixed with its neighbours' voices)."""
    out = []
    for lo, hi in regions:
        length = hi - lo
        if length <= window_s:
            out.append((lo, hi))
            continue
        steps = int(-(-(length - window_s) // hop_s))  # ceil
        out += [
            (lo + i * (length - window_s) / steps, lo + i * (length - window_s) / steps + window_s)
            for i in range(steps + 1)
        ]
    return out  # not rounded: every full window is exactly window_s long, so windows batch together


def region_index(regions: list[tuple[float, float]], spans: list[tuple[float, float]]) -> list[int]:
    """For each window (in time order, as ``windows`` made them), the index of its region."""
    out, r = [], 0
    for lo, _ in spans:
        while r + 1 < len(regions) and lo >= regions[r][1]:
            r += 1
        out.append(r)
    return out


def between(a: tuple[float, float], b: tuple[float, float], n: int) -> list[tuple[float, float]]:
    """``n`` windows as long as ``a`` evenly between windows ``a`` and ``b`` (their starts)."""
    length = a[1] - a[0]
    step = (b[0] - a[0]) / (n + 1)
    return [(a[0] + k * step, a[0] + k * step + length) for k in range(1, n + 1)]


def turns(regions: list[tuple[float, float]], spans: list[tuple[float, float]], labels: list[int]) -> list[Turn]:
    """Each region split between its windows at the midpoints of neighbouring centres; neighbours with one
    speaker merged. ``spans``/``labels``: the windows (in time order) and their speakers."""
    parts: list[list] = []  # [start, end, who]
    i = 0
    for lo, hi in regions:
        inside = []
        while i < len(spans) and spans[i][0] < hi and spans[i][1] > lo - 1e-6:
            inside.append((0.5 * (spans[i][0] + spans[i][1]), labels[i]))
            i += 1
        start = lo
        for k, (centre, who) in enumerate(inside):
            end = hi if k == len(inside) - 1 else 0.5 * (centre + inside[k + 1][0])
            if parts and parts[-1][2] == who and parts[-1][1] == start:
                parts[-1][1] = end
            else:
                parts.append([start, end, who])
            start = end
    return [Turn(round(a, 3), round(b, 3), label(who)) for a, b, who in parts]


def speaker_at(turns: list[Turn], start_s: float, end_s: float) -> str | None:
    """The speaker with most time in [start_s, end_s]; for a span no turn touches, the nearest turn's."""
    if not turns:
        return None
    time: dict[str, float] = {}
    for t in turns:
        overlap = min(end_s, t.end_s) - max(start_s, t.start_s)
        if overlap > 0:
            time[t.speaker] = time.get(t.speaker, 0.0) + overlap
    if time:
        return max(time, key=lambda s: (time[s], s))
    middle = 0.5 * (start_s + end_s)
    return min(turns, key=lambda t: (max(t.start_s - middle, middle - t.end_s, 0.0), t.start_s)).speaker


def label_rows(rows: list[SegmentRow], turns: list[Turn]) -> list[SegmentRow]:
    """Segment rows with ``speaker`` set (and each word's), split where their words change speaker; the
    ``segment`` numbers run 0, 1, ... again. Every other column is kept; a split part's text is its words'."""
    out = []
    for row in rows:
        words = row.get("words")
        if not words:
            out.append({**row, "speaker": speaker_at(turns, row["start_s"], row["end_s"])})
            continue
        words = [{**w, "speaker": speaker_at(turns, w["start_s"], w["end_s"])} for w in words]
        if "".join(w["word"] for w in words).split() != row["text"].split():
            # words that do not spell the whole text (an alignment that stopped early): splitting would lose the
            # rest, so the segment stays whole with the speaker that has most time in it
            out.append({**row, "words": words, "speaker": speaker_at(turns, row["start_s"], row["end_s"])})
            continue
        runs: list[list[WordRow]] = []
        for w in words:
            if runs and runs[-1][-1]["speaker"] == w["speaker"]:
                runs[-1].append(w)
            else:
                runs.append([w])
        if len(runs) == 1:
            out.append({**row, "words": words, "speaker": words[0]["speaker"]})
            continue
        for k, run in enumerate(runs):
            out.append(
                {
                    **row,
                    "start_s": row["start_s"] if k == 0 else run[0]["start_s"],
                    "end_s": row["end_s"] if k == len(runs) - 1 else max(run[-1]["end_s"], run[0]["start_s"]),
                    "text": "".join(w["word"] for w in run).strip(),
                    "words": run,
                    "speaker": run[0]["speaker"],
                }
            )
    return [{**row, "segment": i} for i, row in enumerate(out)]


def count(rows: list[SegmentRow]) -> int:
    return len({r["speaker"] for r in rows if r.get("speaker")})
