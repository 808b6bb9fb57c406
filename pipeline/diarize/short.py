"""Short turns: "Right.", "Exactly.", a one-word answer, each with its own voice evidence.

A window of 1.5 s cannot hold a 0.4 s turn: it mixes in the neighbour's voice, and the turn goes to whoever
has most time in it. So the speech is cut where the words pause (``PAUSE_S``), every stretch is windowed on
its own (the windows never cross a pause, so never take in another stretch's words), and a stretch under
``SHORT_S`` is one window over its own span, padded into the pauses around it (half of each pause, at most
``PAD_S``: the DTW word edges are a frame or two early or late; the other half belongs to the neighbour).

A short stretch's window then takes the speaker whose centre (the mean of that speaker's long windows) is
nearest, when it is nearer than the next one by ``MARGIN``. When the evidence is weaker than that, the rule
decides (bench/bench_diarize.py measures them side by side): ``sentence`` (the default) keeps the speaker
of the words around it (both neighbours alike) unless the stretch starts a new sentence after a pause, when
it takes the nearest centre; ``keep`` keeps the speaker around it always; ``nearest`` takes the nearest centre
always.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PAUSE_S = 0.15  # words this far apart are two stretches of speech
SHORT_S = 1.5  # stretches shorter than this are judged on their own embedding
PAD_S = 0.25  # at most this much of the pause on each side goes into a stretch's window
MARGIN = 0.05  # cosine by which the nearest centre must beat the next to decide alone
ENDS = (".", "?", "!", "…")


@dataclass(frozen=True)
class Stretch:
    start_s: float  # the words' span
    end_s: float
    lo_s: float  # the span padded into the pauses around it
    hi_s: float
    new_sentence: bool  # starts with a capital after a word that ends a sentence (or the file's first words)

    @property
    def length_s(self) -> float:
        return self.end_s - self.start_s


def _units(rows: list[dict]) -> list[tuple[float, float, str]]:
    """(start, end, text) of every word, or of a whole segment where there are no word timings."""
    out = []
    for row in rows:
        words = row.get("words")
        if words:
            out += [(w["start_s"], w["end_s"], w["word"]) for w in words if w["end_s"] > w["start_s"]]
        elif row["end_s"] > row["start_s"]:
            out.append((row["start_s"], row["end_s"], row.get("text") or ""))
    return sorted(out, key=lambda u: (u[0], u[1]))


def stretches(rows: list[dict], pause_s: float = PAUSE_S, pad_s: float = PAD_S) -> list[Stretch]:
    """The speech cut at pauses of ``pause_s``, in time order, each padded within the pauses around it."""
    groups: list[list] = []  # [start, end, first text, text before]
    previous = ""
    for lo, hi, text in _units(rows):
        if groups and lo < groups[-1][1] + pause_s:
            groups[-1][1] = max(groups[-1][1], hi)
        else:
            groups.append([lo, hi, text, previous])
        previous = text
    out = []
    for k, (lo, hi, first, before) in enumerate(groups):
        gap_before = lo - groups[k - 1][1] if k else 2 * pad_s
        gap_after = groups[k + 1][0] - hi if k + 1 < len(groups) else 2 * pad_s
        first = first.strip()
        opens = not before.strip() or before.strip().rstrip("\"')]”").endswith(ENDS)
        out.append(
            Stretch(
                lo,
                hi,
                max(0.0, lo - min(pad_s, gap_before / 2)),
                hi + min(pad_s, gap_after / 2),
                bool(first) and first[0].isupper() and opens,
            )
        )
    return out


def centres(embeddings: np.ndarray, labels: np.ndarray, solid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(speaker ids, unit centre per speaker) from the windows in ``solid`` (a boolean mask)."""
    e = embeddings / np.maximum(np.linalg.norm(embeddings, axis=1, keepdims=True), 1e-8)
    ids = np.unique(labels[solid]) if solid.any() else np.unique(labels)
    mask = solid if solid.any() else np.ones(len(labels), bool)
    c = np.array([e[mask & (labels == j)].mean(0) for j in ids])
    return ids, c / np.maximum(np.linalg.norm(c, axis=1, keepdims=True), 1e-8)


def decide(
    who: list[int],
    short: list[int | None],
    vectors: np.ndarray,
    new_sentence: list[bool],
    ids: np.ndarray,
    centre: np.ndarray,
    rule: str = "sentence",
    margin: float = MARGIN,
) -> list[int]:
    """Speakers per stretch (``who``: as the windows labelled them, its first window's) with the short ones
    judged again: ``short[k]`` is the row of ``vectors`` holding stretch k's own embedding (None: a long
    stretch, or no voice to read)."""
    out = list(who)
    for k, row in enumerate(short):
        if row is None or len(ids) < 2 or not np.any(vectors[row]):
            continue
        v = vectors[row] / max(float(np.linalg.norm(vectors[row])), 1e-8)
        sims = centre @ v
        order = np.argsort(-sims)
        nearest = int(ids[order[0]])
        if sims[order[0]] - sims[order[1]] >= margin or rule == "nearest":
            out[k] = nearest
            continue
        around = {out[k - 1] if k else None, who[k + 1] if k + 1 < len(who) else None} - {None}
        if len(around) == 1 and (rule == "keep" or not new_sentence[k]):
            out[k] = around.pop()
        else:
            out[k] = nearest
    return out
