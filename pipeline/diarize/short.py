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
QUIET_DB = 30.0  # a 10 ms frame this far under the file's speech level is part of a pause
FRAME = 160  # 10 ms
MIN_PIECE_S = 0.05  # a sliver of speech between two pauses joins its neighbour


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


def pauses(blocks, pause_s: float = PAUSE_S, quiet_db: float = QUIET_DB) -> list[tuple[float, float]]:
    """Pauses in the audio: runs of 10 ms frames at least ``quiet_db`` under the file's speech level (its 95th
    percentile frame), ``pause_s`` or longer. Word timings cannot place them: DTW stretches a word over the
    pause after it. A file without such quiet (music or noise under the voices) has none."""
    levels, rest = [], np.zeros(0, np.float32)
    for block in blocks:
        x = np.concatenate([rest, block])
        n = len(x) // FRAME
        frames = x[: n * FRAME].reshape(n, FRAME).astype(np.float64)
        levels.append(10 * np.log10(np.mean(np.square(frames), axis=1) + 1e-12))
        rest = x[n * FRAME :]
    if not levels:
        return []
    db = np.concatenate(levels)
    if not len(db):
        return []
    quiet = np.concatenate([[False], db < np.percentile(db, 95) - quiet_db, [False]])
    edges = np.flatnonzero(np.diff(quiet.astype(np.int8)))
    step = FRAME / 16_000
    return [(a * step, b * step) for a, b in zip(edges[::2], edges[1::2]) if (b - a) * step >= pause_s]


def stretches(
    rows: list[dict], quiet: list[tuple[float, float]] = (), pause_s: float = PAUSE_S, pad_s: float = PAD_S
) -> list[Stretch]:
    """The speech of the transcript (its words merged over gaps under ``pause_s``) cut at the audio's pauses
    (``quiet``, from ``pauses``), in time order, each padded within the pauses around it."""
    units = _units(rows)
    merged: list[list[float]] = []
    for lo, hi, _ in units:
        if merged and lo < merged[-1][1] + pause_s:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    spans, q = [], 0
    for lo, hi in merged:
        while q < len(quiet) and quiet[q][1] <= lo:
            q += 1
        k, start, pieces = q, lo, []
        while k < len(quiet) and quiet[k][0] < hi:
            a, b = quiet[k]
            if a - start >= MIN_PIECE_S:
                pieces.append((start, a))
            start = max(start, b)
            k += 1
        if hi - start >= MIN_PIECE_S:
            pieces.append((start, hi))
        spans += pieces or [(lo, hi)]  # words the audio calls quiet all through are labelled all the same
    mids = [0.5 * (u[0] + u[1]) for u in units]
    out = []
    for k, (lo, hi) in enumerate(spans):
        gap_before = lo - spans[k - 1][1] if k else 2 * pad_s
        gap_after = spans[k + 1][0] - hi if k + 1 < len(spans) else 2 * pad_s
        first = next((i for i, m in enumerate(mids) if lo <= m < hi), None)
        opens = False
        if first is not None:
            text = units[first][2].strip()
            before = units[first - 1][2].strip().rstrip("\"')]”") if first else ""
            opens = bool(text) and text[0].isupper() and (not before or before.endswith(ENDS))
        out.append(Stretch(lo, hi, max(0.0, lo - min(pad_s, gap_before / 2)), hi + min(pad_s, gap_after / 2), opens))
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
