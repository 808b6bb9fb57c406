"""OpenMP's wait settings, idle and beside busy processes: base's encoder and decoding of eight clips.

    .venv/bin/python -m bench.bench_contention [--busy 0,2] [--clips 8] [--compute-type int8]

Each setting runs in a fresh process (libgomp reads its environment once, as torch loads), one after the
other, with N processes busy-looping on the CPUs beside it (``--busy``, one pass per value). The settings:
libgomp's own spin count (300,000 turns, podscribe before decision 0041), podscribe's (1,000:
``pipeline/facts/runtime.OPENMP_WAIT``), no spin (0), ``OMP_WAIT_POLICY=PASSIVE``, and one torch thread. Printed per
setting: wall and CPU seconds of the encoder (one batch of all clips) and of the decoding (batches of 4, plain
greedy, no draft), and the tokens (equal across settings: the arithmetic is the same). Wall seconds are what
contention stretches; compare settings within one pass.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

SETTINGS = {
    "libgomp's spin (300,000)": {"GOMP_SPINCOUNT": "300000"},
    "podscribe's spin (1,000)": {"GOMP_SPINCOUNT": "1000"},
    "no spin (0)": {"GOMP_SPINCOUNT": "0"},
    "OMP_WAIT_POLICY=PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
    "one torch thread": {"GOMP_SPINCOUNT": "300000", "BENCH_THREADS": "1"},
}


def child(clips: int, compute_type: str) -> dict:
    """One setting, in this process: the encoder once to warm up, then timed; then the decoding."""
    import torch

    from bench.common import english_clips
    from pipeline.audio import media
    from pipeline.decode.generate import Generator, encode, log_mel
    from pipeline.facts.runtime import pick_runtime, quiet_libraries
    from pipeline.models.load import load_models

    quiet_libraries()
    if os.environ.get("BENCH_THREADS"):
        torch.set_num_threads(int(os.environ["BENCH_THREADS"]))
    models = load_models("base", "none", pick_runtime("cpu", compute_type))
    pieces = [media.decode(c.path) for c in english_clips(count=clips)]
    features = log_mel(models.processor.feature_extractor, pieces, "cpu", models.runtime.dtype)
    generator = Generator(models, use_assistant=False)
    prompt = generator.prompt("en")
    with torch.inference_mode():
        encode(models.main, features[:1])
        wall, cpu = time.perf_counter(), time.process_time()
        encoded = encode(models.main, features)
        enc_wall, enc_cpu = time.perf_counter() - wall, time.process_time() - cpu
        wall, cpu = time.perf_counter(), time.process_time()
        tokens = []
        for i in range(0, len(pieces), 4):
            rows = slice(i, i + 4)
            n = len(pieces[rows])
            tokens += [g.tokens for g in generator.generate(features[rows], [prompt] * n, encoded[rows])]
        dec_wall, dec_cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "threads": torch.get_num_threads(),
        "encoder_wall_s": round(enc_wall, 2),
        "encoder_cpu_s": round(enc_cpu, 2),
        "decoding_wall_s": round(dec_wall, 2),
        "decoding_cpu_s": round(dec_cpu, 2),
        "tokens": sum(len(t) for t in tokens),
        "tokens_digest": hash(tuple(tuple(t) for t in tokens)) & 0xFFFFFFFF,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--busy", default="0,2", help="busy-looping processes beside each pass, e.g. 0,2")
    parser.add_argument("--clips", type=int, default=8)
    parser.add_argument("--compute-type", default="int8")
    parser.add_argument("--out", help="write the results as JSON")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.clips, args.compute_type)))
        return
    base = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "BENCH_THREADS")}
    results = []
    print(f"CPU threads: {os.cpu_count()}; base {args.compute_type}, {args.clips} clips", flush=True)
    for busy in [int(b) for b in args.busy.split(",")]:
        loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
        try:
            for label, env in SETTINGS.items():
                command = [sys.executable, "-m", "bench.bench_contention", "--child", "--clips", str(args.clips)]
                command += ["--compute-type", args.compute_type]
                run = subprocess.run(command, env={**base, **env}, capture_output=True, text=True, check=True)
                row = {"busy": busy, "setting": label, **json.loads(run.stdout.strip().splitlines()[-1])}
                row["load_avg"] = round(os.getloadavg()[0], 1)
                results.append(row)
                print(
                    f"busy {busy} | {label:26} | encoder {row['encoder_wall_s']:6.2f} s wall "
                    f"{row['encoder_cpu_s']:6.2f} CPU | decoding {row['decoding_wall_s']:6.2f} s wall "
                    f"{row['decoding_cpu_s']:6.2f} CPU | {row['tokens']} tokens ({row['tokens_digest']:08x}) "
                    f"| load {row['load_avg']}",
                    flush=True,
                )
        finally:
            for loop in loops:
                loop.kill()
                loop.wait()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
