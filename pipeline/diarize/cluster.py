"""Who is who: spectral clustering of window embeddings with the speaker count read from the eigengap.

The refinement of the affinity matrix is Google's (Wang et al., "Speaker diarization with LSTM", 2018, and
its ``spectralcluster`` package): cosine similarity, crop the diagonal, keep each row's strongest entries,
symmetrize, diffuse, normalise rows. Their optional Gaussian blur along time is left out: it
smeared neighbouring windows across speaker turns. The number of speakers is where the ratio of
consecutive eigenvalues is largest within the allowed range; k-means (deterministic seeding) on the
leading eigenvectors labels the windows. Fixed-threshold agglomerative clustering was right only in a
narrow threshold band in the feasibility run; this was right in every case
(docs/decisions/0016-diarization-embeddings-windows-clustering.md). The eigengap can say 1 where two voices
trade many short turns (each voice's windows fall into many small groups of neighbours, and no gap stands
out): a count one more is kept while its clusters' centres all stay further apart than one voice's
(``SAME_SPEAKER``, the threshold that merges clusters too), so the count is what the voices allow in both
directions (docs/decisions/0036-short-turn-rule-and-count-by-measurement.md).

Long files: eigen-decomposition is cubic in the number of windows, so past ``MAX_POINTS`` consecutive
windows are averaged in groups before clustering and every window then takes its nearest speaker centre.
Numpy only.
"""

from __future__ import annotations

import numpy as np

MAX_POINTS = 800
P_PERCENTILE = 0.95
SOFT = 0.01
STOP_EIGENVALUE = 1e-2  # of the largest eigenvalue
MIN_NEIGHBOURS = 5  # a short file's rows keep more than 5% of their entries (10 windows: 1 would be itself)
SAME_SPEAKER = 0.8  # clusters whose centres are this close (cosine) are one voice (GE2E: other voices <= 0.75)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-8)


def refined_affinity(embeddings: np.ndarray) -> np.ndarray:
    e = _unit(embeddings.astype(np.float64))
    a = e @ e.T
    n = len(a)
    # crop the diagonal: each row's own similarity replaced by its best other one
    np.fill_diagonal(a, -np.inf)
    best = a.max(axis=1) if n > 1 else np.ones(n)
    np.fill_diagonal(a, best)
    # per row, keep the strongest (1 - p) share, at least MIN_NEIGHBOURS entries; the rest scaled down
    keep = min(n, max(MIN_NEIGHBOURS, int(np.ceil((1 - P_PERCENTILE) * n))))
    cut = np.sort(a, axis=1)[:, n - keep][:, None]
    a = np.where(a < cut, a * SOFT, a)
    a = np.maximum(a, a.T)
    a = a @ a.T
    return a / np.maximum(a.max(axis=1, keepdims=True), 1e-12)


def speaker_count(eigenvalues: np.ndarray, low: int, high: int) -> int:
    """Eigenvalues in decreasing order → the k in [low, high] after which the gap ratio is largest. Eigenvalues
    under STOP_EIGENVALUE of the largest count as that much: a ratio of noise to noise (0.088 / -0.013 in a
    10-window clip of one voice) is not a gap; a clean split (1.9 / 0.0) is one."""
    floor = STOP_EIGENVALUE * max(float(eigenvalues[0]), 1e-12) if len(eigenvalues) else 1.0
    ratios = {
        k: eigenvalues[k - 1] / max(eigenvalues[k], floor)
        for k in range(max(1, low), min(high, len(eigenvalues) - 1) + 1)
        if eigenvalues[k - 1] >= floor
    }
    if not ratios:
        return max(1, min(low, len(eigenvalues)))
    return max(ratios, key=lambda k: (ratios[k], -k))


def kmeans(points: np.ndarray, k: int, iterations: int = 100) -> np.ndarray:
    """Labels 0..k-1; deterministic farthest-point seeding (k-means++ without the randomness)."""
    centres = [points[int(np.argmax(np.linalg.norm(points - points.mean(0), axis=1)))]]
    while len(centres) < k:
        far = np.min([np.linalg.norm(points - c, axis=1) for c in centres], axis=0)
        centres.append(points[int(np.argmax(far))])
    c = np.array(centres)
    labels = np.zeros(len(points), int)
    for _ in range(iterations):
        new = np.argmin(((points[:, None, :] - c[None]) ** 2).sum(-1), axis=1)
        if _ > 0 and np.array_equal(new, labels):
            break
        labels = new
        c = np.array([points[labels == j].mean(0) if np.any(labels == j) else c[j] for j in range(k)])
    return labels


def _cluster_small(embeddings: np.ndarray, low: int, high: int) -> np.ndarray:
    n = len(embeddings)
    if n == 0:
        return np.zeros(0, int)
    if n == 1 or high == 1:
        return np.zeros(n, int)
    values, vectors = np.linalg.eigh(refined_affinity(embeddings))
    values, vectors = values[::-1], vectors[:, ::-1]
    k = speaker_count(values, low, high) if low != high else min(low, n)
    labels = np.zeros(n, int) if k <= 1 else kmeans(_unit(vectors[:, :k]), k)
    while low != high and k < min(high, n):
        finer = kmeans(_unit(vectors[:, : k + 1]), k + 1)
        if closest_centres(embeddings, finer) >= SAME_SPEAKER:
            break
        k, labels = k + 1, finer
    return labels


def closest_centres(embeddings: np.ndarray, labels: np.ndarray) -> float:
    """The cosine of the two closest cluster centres (1.0 when one cluster)."""
    ids = np.unique(labels)
    if len(ids) < 2:
        return 1.0
    e = _unit(embeddings)
    centres = _unit(np.array([e[labels == j].mean(0) for j in ids]))
    sim = centres @ centres.T
    np.fill_diagonal(sim, -1.0)
    return float(sim.max())


def merge_close(embeddings: np.ndarray, labels: np.ndarray, min_speakers: int) -> np.ndarray:
    """Join the two clusters with the closest centres while they are closer than SAME_SPEAKER (and more than
    ``min_speakers`` remain): spectral clustering splits one voice in two when its windows vary a lot (a
    reader's sentence openings vs endings), and the eigengap cannot say "one speaker"."""
    labels = labels.copy()
    e = _unit(embeddings)
    while True:
        ids = list(np.unique(labels))
        if len(ids) <= max(1, min_speakers):
            return labels
        centres = _unit(np.array([e[labels == j].mean(0) for j in ids]))
        sim = centres @ centres.T
        np.fill_diagonal(sim, -1.0)
        i, j = np.unravel_index(int(np.argmax(sim)), sim.shape)
        if sim[i, j] < SAME_SPEAKER:
            return labels
        labels[labels == ids[j]] = ids[i]


def cluster(
    embeddings: np.ndarray,
    min_speakers: int = 1,
    max_speakers: int = 8,
    exact: int | None = None,
    reliable: np.ndarray | None = None,
) -> np.ndarray:
    """Window embeddings in time order → a speaker label per window, numbered by first appearance.
    ``exact``: that many speakers (``--num-speakers``), no count estimated and nothing merged. ``reliable``: the
    windows long enough to trust (the others, short turns, take the nearest speaker centre, or when they carry
    no vector at all, the speaker of the nearest reliable window in time): a few 0.2 s windows must not make
    speakers of their own."""
    n = len(embeddings)
    if reliable is None:
        reliable = np.ones(n, bool)
    if n and not reliable.any():
        reliable = np.linalg.norm(embeddings, axis=1) > 0
    if not reliable.any():
        return np.zeros(n, int)
    solid = np.flatnonzero(reliable)
    labels = np.zeros(n, int)
    labels[solid] = _cluster_reliable(embeddings[solid], min_speakers, max_speakers, exact)
    e = _unit(embeddings)
    ids = np.unique(labels[solid])
    centres = _unit(np.array([e[solid][labels[solid] == j].mean(0) for j in ids]))
    for k in np.flatnonzero(~reliable):
        if np.linalg.norm(embeddings[k]) > 0:
            labels[k] = ids[int(np.argmax(centres @ e[k]))]
        else:
            labels[k] = labels[solid[int(np.argmin(np.abs(solid - k)))]]
    order: dict[int, int] = {}
    for label in labels:
        order.setdefault(int(label), len(order))
    return np.array([order[int(label)] for label in labels], int)


def _cluster_reliable(embeddings: np.ndarray, min_speakers: int, max_speakers: int, exact: int | None) -> np.ndarray:
    n = len(embeddings)
    if exact:
        min_speakers = max_speakers = exact
    group = max(1, int(np.ceil(n / MAX_POINTS)))
    if group > 1:
        pooled = np.array([embeddings[i : i + group].mean(0) for i in range(0, n, group)])
        coarse = _cluster_small(pooled, min_speakers, max_speakers)
        centres = _unit(np.array([pooled[coarse == j].mean(0) for j in np.unique(coarse)]))
        labels = np.argmax(_unit(embeddings) @ centres.T, axis=1)
    else:
        labels = _cluster_small(embeddings, min_speakers, max_speakers)
    if not exact:
        labels = merge_close(embeddings, labels, min_speakers)
    return labels
