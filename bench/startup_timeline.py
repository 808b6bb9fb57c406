"""Where a CLI run's start-up goes, as a timeline: each named function's start, end and seconds, on which thread,
with the first import of the heavy libraries and every wait on a future (a packed layer, a probe) over 2 ms, and the
process's minor page faults while each ran (every thread's: memory touched for the first time costs system time).

    python bench/startup_timeline.py pipeline.models.load:load_models,pipeline.audio.vad:voice \\
        -- transcribe one.wav --model base --out /tmp/job

Run as a script, not with ``-m``: the bench package loads CTranslate2 first (bench/__init__.py), which a CLI run
does not.

A profiler's stacks hide what runs at once (the packing thread beside the main one) and slow a run's Python several
times over; these are wall-clock stamps around whole calls, in one real process (decision 0048 was found with it).
The functions are ``module:attribute`` or ``module:Class.method``; the run is ``podscribe`` with the arguments after
``--``.
"""

from __future__ import annotations

import atexit
import builtins
import concurrent.futures
import importlib
import resource
import runpy
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's pipeline

WATCHED = {"torch", "pyarrow", "pyarrow.parquet", "pandas", "onnxruntime", "tokenizers", "safetensors", "tqdm"}

t0 = time.perf_counter()
events: list[tuple[float, float, str, str, int]] = []  # start s, end s, thread, what, minor faults meanwhile


def faults() -> int:
    """The process's minor page faults so far, all threads."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def stamp(start: float, what: str, faults_at_start: int) -> None:
    events.append(
        (start - t0, time.perf_counter() - t0, threading.current_thread().name, what, faults() - faults_at_start)
    )


def wrap(target: str) -> None:
    """Replace ``module:attr`` (or ``module:Class.method``) by a function that stamps each call."""
    module_name, attr = target.split(":")
    owner = importlib.import_module(module_name)
    *path, name = attr.split(".")
    for part in path:
        owner = getattr(owner, part)
    original = getattr(owner, name)

    def stamped(*args, **kwargs):
        start, at = time.perf_counter(), faults()
        try:
            return original(*args, **kwargs)
        finally:
            stamp(start, target, at)

    setattr(owner, name, stamped)


def watch_imports() -> None:
    real = builtins.__import__

    def importing(name, *args, **kwargs):
        if name in WATCHED and name not in sys.modules:
            start, at = time.perf_counter(), faults()
            try:
                return real(name, *args, **kwargs)
            finally:
                stamp(start, f"import {name}", at)
        return real(name, *args, **kwargs)

    builtins.__import__ = importing


def watch_waits() -> None:
    real = concurrent.futures.Future.result

    def result(self, *args, **kwargs):
        start, at = time.perf_counter(), faults()
        try:
            return real(self, *args, **kwargs)
        finally:
            if time.perf_counter() - start > 0.002:
                stamp(start, "wait on a future", at)

    concurrent.futures.Future.result = result


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[2] != "--":
        sys.exit(__doc__)
    watch_imports()
    watch_waits()
    import pipeline.job.run  # noqa: F401  (the modules whose functions are wrapped, as the CLI imports them)

    for target in sys.argv[1].split(","):
        wrap(target)
    sys.argv = ["podscribe", *sys.argv[3:]]
    # an atexit handler: the command ends with os._exit after running them (pipeline/cli/console.py, decision 0053)
    atexit.register(report)
    runpy.run_module("podscribe", run_name="__main__")


def report() -> None:
    print(f"wall {time.perf_counter() - t0:.2f} s, {faults():,} minor page faults", file=sys.stderr)
    for start, end, thread, what, touched in sorted(events):
        print(
            f"{start:6.2f} {end:6.2f} {end - start:5.2f}  {thread[:14]:14} {what}  (+{touched:,} faults)",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
