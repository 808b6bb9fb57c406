"""Cost of persisting every decoded batch (resume inside a file): a job with checkpoints on vs off.

    .venv/bin/python bench/bench_persistence.py [--speech ../shared/speech] [--model base] [--rounds 2]

Runs the same job (the human-referenced English clips, or --long for one long
file built from them) alternately with piece checkpoints on and off, in one
process with the model loaded once, and prints the wall times and the overhead.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.decode import DecodeOptions  # noqa: E402
from pipeline.models.load import load_models  # noqa: E402
from pipeline.runner import JobOptions, run  # noqa: E402
from pipeline.runtime import pick_runtime  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speech", type=Path, default=Path(os.environ.get("PODSCRIBE_SPEECH_DIR", "../shared/speech")))
    parser.add_argument("--model", default="base")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import transformers

    transformers.logging.set_verbosity_error()
    rows = [json.loads(line) for line in (args.speech / "references.jsonl").read_text().splitlines()]
    inputs = [str(args.speech / r["audio"]) for r in rows if r["language"] == "en" and r["ref_type"] == "human"]
    inputs.append(str(args.speech / "long_gb0" / "gb0.wav"))  # one long file: many checkpoints inside it
    models = load_models(args.model, "none", pick_runtime("cpu"))
    folder = Path(tempfile.mkdtemp(prefix="podscribe-persist-"))
    times = {True: [], False: []}
    for i in range(args.rounds):
        for checkpoint in (True, False) if i % 2 == 0 else (False, True):
            out = folder / f"job-{checkpoint}-{i}"
            options = JobOptions(out_dir=out, decode=DecodeOptions(language="en"), progress=False,
                                 checkpoint_pieces=checkpoint)
            start = time.perf_counter()
            summary = run(inputs, options, models=models)
            times[checkpoint].append(time.perf_counter() - start)
            assert summary.done == len(inputs)
    on, off = min(times[True]), min(times[False])
    print(f"{len(inputs)} files; checkpoints on: {on:.1f} s, off: {off:.1f} s (best of {args.rounds}); "
          f"overhead {100 * (on - off) / off:+.1f}%")
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
