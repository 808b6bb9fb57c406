"""Cost of persisting every decoded batch (resume inside a file): a job with checkpoints on vs off.

    .venv/bin/python -m bench.bench_persistence [--speech ../shared/speech] [--model base] [--rounds 2]

Runs the same job (the human-referenced English clips, or --long for one long
file built from them) alternately with piece checkpoints on and off, in one
process with the model loaded once, and prints the wall times and the overhead.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import warnings
from pathlib import Path

from bench.common import SPEECH, english_clips
from pipeline.decode import DecodeOptions
from pipeline.facts.runtime import pick_runtime
from pipeline.job.config import JobOptions
from pipeline.job.run import run
from pipeline.models.load import load_models


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speech", type=Path, default=SPEECH)
    parser.add_argument("--model", default="base")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import transformers

    transformers.logging.set_verbosity_error()
    inputs = [str(c.path) for c in english_clips(args.speech)]
    inputs.append(str(args.speech / "long_gb0" / "gb0.wav"))  # one long file: many checkpoints inside it
    models = load_models(args.model, "none", pick_runtime("cpu"))
    folder = Path(tempfile.mkdtemp(prefix="podscribe-persist-"))
    times = {True: [], False: []}
    for i in range(args.rounds):
        for checkpoint in (True, False) if i % 2 == 0 else (False, True):
            out = folder / f"job-{checkpoint}-{i}"
            options = JobOptions(
                out_dir=out, decode=DecodeOptions(language="en"), progress=False, checkpoint_pieces=checkpoint
            )
            start = time.perf_counter()
            summary = run(inputs, options, models=models)
            times[checkpoint].append(time.perf_counter() - start)
            assert summary.done == len(inputs)
    on, off = min(times[True]), min(times[False])
    print(
        f"{len(inputs)} files; checkpoints on: {on:.1f} s, off: {off:.1f} s (best of {args.rounds}); "
        f"overhead {100 * (on - off) / off:+.1f}% (run-to-run noise on this machine is about 5%)"
    )
    # The cost of one checkpoint itself, against the decoding time of the batch it saves.
    import pyarrow.dataset as ds

    from pipeline.storage.manifest import JobDir

    job_dir = folder / "job-True-0"
    pieces = ds.dataset(job_dir / "pieces").to_table().to_pylist()
    audio_s = sum(r["end_s"] - r["start_s"] for r in pieces)
    decode_s = min(times[True])
    rows = [
        dict(
            r,
            n_samples=r["end_sample"] - r["start_sample"],
            tokens=list(range(120)),
            segments=[{"start_s": 0.0, "end_s": 5.0, "text": "x" * 200, "n_tokens": 40, "words": None}],
        )
        for r in pieces[:4]
    ]
    job = JobDir(folder / "write-cost")
    start = time.perf_counter()
    for i in range(50):
        job.write_partial("f" * 16, i, rows)
    per_write = (time.perf_counter() - start) / 50
    per_batch = 4 * 30.0 * decode_s / audio_s  # decoding a batch of four 30 s pieces at the measured speed
    print(
        f"one checkpoint (4 pieces): {per_write * 1000:.1f} ms; decoding such a batch: {per_batch:.1f} s; "
        f"cost {100 * per_write / per_batch:.2f}% of decoding in a long file"
    )
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
