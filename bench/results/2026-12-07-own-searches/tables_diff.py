"""Two job dirs of the same files, row by row: segments only in one, and the pieces whose passes or scores moved.

python bench/results/2026-12-07-later-windows/tables_diff.py OLD_JOB NEW_JOB
"""

from __future__ import annotations

import sys

import pyarrow.dataset as ds

COLUMNS = ("passes", "avg_logprob", "compression_ratio", "n_tokens", "skipped")


def load(job: str) -> tuple[list[tuple], dict]:
    segments = ds.dataset(f"{job}/segments").to_table().to_pylist()
    pieces = ds.dataset(f"{job}/pieces").to_table().to_pylist()
    names = {r["file_id"]: r["path"].split("/")[-1] for r in ds.dataset(f"{job}/files").to_table().to_pylist()}
    rows = sorted(
        (names[s["file_id"]], s["piece"], round(s["start_s"], 2), round(s["end_s"], 2), s["text"])
        for s in segments
        if s["file_id"] in names
    )
    return rows, {(names[p["file_id"]], p["piece"]): p for p in pieces if p["file_id"] in names}


def main(old_job: str, new_job: str) -> None:
    old, old_pieces = load(old_job)
    new, new_pieces = load(new_job)
    gone, came = set(old) - set(new), set(new) - set(old)
    print("segments", len(old), len(new), "only old", len(gone), "only new", len(came))
    for row in sorted(gone):
        print("  old:", row)
    for row in sorted(came):
        print("  new:", row)
    print("passes", sum(p["passes"] for p in old_pieces.values()), sum(p["passes"] for p in new_pieces.values()))
    for key in sorted(old_pieces):
        before, after = old_pieces[key], new_pieces.get(key)
        if after is None:
            print("missing", key)
            continue
        moved = {c: (before[c], after[c]) for c in COLUMNS if before[c] != after[c]}
        if moved:
            print(" ", key, moved)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
