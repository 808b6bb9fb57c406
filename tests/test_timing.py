"""Fast tests (no model) of word timing's DTW: a path planted in a random cost matrix is found
(openai/whisper's test_timing in spirit)."""

from __future__ import annotations

import numpy as np

from pipeline.decode.timing import dtw


def _planted(n: int, m: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    path, i, j = [(0, 0)], 0, 0
    while (i, j) != (n - 1, m - 1):
        moves = [(di, dj) for di, dj in ((1, 1), (1, 0), (0, 1)) if i + di < n and j + dj < m]
        di, dj = moves[rng.integers(len(moves))]
        i, j = i + di, j + dj
        path.append((i, j))
    return path


def test_dtw_finds_a_planted_path():
    rng = np.random.default_rng(0)
    for n, m in [(1, 1), (3, 40), (40, 3), (20, 20), (60, 300)]:
        path = _planted(n, m, rng)
        cost = rng.uniform(1.0, 2.0, (n, m))
        for i, j in path:  # negative: a path that skips a planted cell (a diagonal shortcut) costs more
            cost[i, j] = -1.0
        rows, cols = dtw(cost)
        assert list(zip(rows.tolist(), cols.tolist())) == path, (n, m)
