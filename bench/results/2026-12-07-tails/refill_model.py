"""What a decoding loop refilled from the next pieces would cost, from the greedy calls a run made (their rows'
token counts: steps_by_rows.py writes them) and a step's cost fitted to the steps it measured (a fixed part plus a
part a row). Today: each call's steps, its live rows falling as rows finish. Refilled: the first-pass rows in
order, at most eight live, a finished row's place taken by the next at the cost of its prompt's prefill, from each
file's own pieces or from the whole job's. The files' first-pass calls, in the run's order: ``CALLS_A_FILE``.

    python3 bench/results/2026-12-07-tails/refill_model.py
"""

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
STEP_MS = {1: 12.08, 2: 16.42, 3: 20.33, 4: 21.25, 5: 22.03, 6: 26.04, 7: 29.26, 8: 31.27}  # seed 59, experiments.txt
PER_ROW_MS, FIXED_MS = np.polyfit(list(STEP_MS), list(STEP_MS.values()), 1)
CALLS_A_FILE = {"seed59": 2, "dev": 3}  # a batch of 8 and the rest (seed 59); 8, 8 or 7, and the rest (dev)


def step_ms(live: int) -> float:
    return FIXED_MS + PER_ROW_MS * live


def today_s(calls) -> float:
    total = 0.0
    for part, lengths in calls:
        if part == "first":
            total += sum(step_ms(sum(n > s for n in lengths)) for s in range(max(lengths)))
    return total / 1000


def refilled_s(calls, width: int = 8) -> float:
    waiting = [n for part, lengths in calls if part == "first" for n in lengths]
    live: list[int] = []
    total = 0.0
    while waiting or live:
        while waiting and len(live) < width:
            live.append(waiting.pop(0))
            total += step_ms(1)  # the newcomer's prompt, prefilled alone
        total += step_ms(len(live))
        live = [n - 1 for n in live if n > 1]
    return total / 1000


print(f"a step: {FIXED_MS:.1f} ms + {PER_ROW_MS:.2f} ms a live row (fitted)")
for name, per_file in CALLS_A_FILE.items():
    calls = [c for c in json.loads((HERE / f"greedy-calls-{name}.json").read_text()) if c[0] == "first"]
    within = sum(refilled_s(calls[at : at + per_file]) for at in range(0, len(calls), per_file))
    print(
        f"{name}: first passes' steps today {today_s(calls):.1f} s, refilled within each file {within:.1f} s, "
        f"across the job {refilled_s(calls):.1f} s"
    )
