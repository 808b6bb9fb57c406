"""podscribe and faster-whisper as a user runs them: one fresh process per run, idle and beside busy processes.

    .venv/bin/python -m bench.bench_peers_cli [--audio FILE] [--busy 0,2] [--rounds 2]

Each run is a whole process (imports, model load, start-up included): ``podscribe transcribe FILE --model base``
at its defaults, and a child of this script running faster-whisper int8 greedy with its VAD on the same base
weights (the long-form bench's configuration, ``bench_longform.run_faster_whisper``). The two alternate which goes
first each round; ``--busy`` starts N busy-looping processes beside both runs of a pass. Printed per run, from
the kernel's account of the child (``os.wait4``): wall seconds, user and system CPU seconds, and voluntary and
involuntary context switches — how a program shares the cores when it does not have them (issue 47: "degrades no
worse than its peer"). The walls of this machine spread by 10-15% sitting to sitting: compare within one pass.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import LONGFORM

ROOT = Path(__file__).resolve().parent.parent


def faster_whisper_child(audio: str, work: Path) -> None:
    """One faster-whisper run in this process (the ``--fw-child`` mode): load, transcribe, consume."""
    from faster_whisper import WhisperModel

    from pipeline.models import registry

    start = time.perf_counter()
    model = WhisperModel(
        str(registry.ct2_directory("base", work)), device="cpu", compute_type="int8", cpu_threads=os.cpu_count() or 2
    )
    loaded = time.perf_counter()
    segments, _ = model.transcribe(audio, beam_size=1, temperature=0.0, vad_filter=True)
    count = sum(1 for _ in segments)
    print(json.dumps({"load_s": loaded - start, "transcribe_s": time.perf_counter() - loaded, "segments": count}))


def timed(cmd: list[str]) -> dict:
    """Run ``cmd`` to its end; its wall seconds and the kernel's resource account of it."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise RuntimeError(f"{cmd[:4]} failed ({status}):\n{out[-2000:]}")
    return {
        "wall_s": round(time.perf_counter() - start, 2),
        "user_s": round(usage.ru_utime, 2),
        "sys_s": round(usage.ru_stime, 2),
        "voluntary_switches": usage.ru_nvcsw,
        "involuntary_switches": usage.ru_nivcsw,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--audio", default=str(LONGFORM / "dev01_garden.mp3"))
    parser.add_argument("--busy", default="0,2", help="comma-separated counts of busy-looping processes, a pass each")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--fw-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fw_child:
        faster_whisper_child(args.audio, args.work)
        return
    with tempfile.TemporaryDirectory(prefix="peers-cli-") as tmp:
        work = Path(tmp)
        runs = {
            "podscribe": lambda: [
                sys.executable, "-m", "pipeline.cli", "transcribe", args.audio, "--model", "base", "--out",
                str(work / "job"),
            ],
            "faster-whisper": lambda: [
                sys.executable, "-m", "bench.bench_peers_cli", "--fw-child", "--audio", args.audio, "--work", str(work),
            ],
        }  # fmt: skip
        rows = []
        print(f"{Path(args.audio).name}; CPU threads: {os.cpu_count()}", flush=True)
        for k in range(args.rounds):
            for busy in [int(n) for n in args.busy.split(",")]:
                loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
                try:
                    for name in list(runs) if k % 2 == 0 else list(runs)[::-1]:
                        shutil.rmtree(work / "job", ignore_errors=True)
                        row = {"round": k + 1, "busy": busy, "program": name, **timed(runs[name]())}
                        rows.append(row)
                        print(json.dumps(row), flush=True)
                finally:
                    for loop in loops:
                        loop.kill()
                        loop.wait()
        print("\nmedian wall s (faster-whisper / podscribe):")
        for busy in sorted({r["busy"] for r in rows}):
            med = {}
            for name in runs:
                walls = sorted(r["wall_s"] for r in rows if r["busy"] == busy and r["program"] == name)
                med[name] = walls[len(walls) // 2]
            print(f"  beside {busy} busy: podscribe {med['podscribe']}, faster-whisper {med['faster-whisper']}: "
                  f"{med['faster-whisper'] / med['podscribe']:.2f}x")  # fmt: skip
        if args.out:
            args.out.write_text(json.dumps({"audio": args.audio, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
