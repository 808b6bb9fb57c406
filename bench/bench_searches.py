"""The fallback ladder's rungs, podscribe's loop beside transformers' generate, on one stretch of real audio.

    .venv/bin/python -m bench.bench_searches AUDIO [--start 0] [--seconds 27.43] [--model base]
        [--compute-type auto] [--rounds 2]

Each rung (beams, then seeded samples at each temperature; ``recover.fallbacks``) is run by transformers' generate
(``hf_generate``) and by podscribe's loop (``second_chances.again``: ``search.py``), alternated, ``--rounds``
times, with the tokens each pass may take for the stretch (``fallback_tokens``). Prints, per rung, whether the
token ids are the same, the steps, and each one's seconds (median) and milliseconds a step. transformers' import
is timed apart, first, in a fresh process (what the first second chance of a job used to pay).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import warnings

import torch

from pipeline.audio import media
from pipeline.decode import DecodeOptions, Transcriber, recover, second_chances
from pipeline.decode.generate import encode
from pipeline.facts.runtime import pick_runtime
from pipeline.models.load import load_models


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("audio")
    parser.add_argument("--start", type=float, default=0.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--model", default="base")
    parser.add_argument("--compute-type", default="auto")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")

    code = "import time; t = time.perf_counter(); import transformers.models.whisper.modeling_whisper, "
    code += "transformers.generation.utils; print(time.perf_counter() - t)"
    took = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout)
    print(f"transformers' Whisper model and generate imported in a fresh process: {took:.2f} s")

    models = load_models(args.model, "none", pick_runtime("cpu", args.compute_type))
    samples = media.decode(args.audio)
    samples = samples[int(args.start * media.SAMPLE_RATE) : int((args.start + args.seconds) * media.SAMPLE_RATE)]
    t = Transcriber(models, DecodeOptions(language="en"), use_assistant=False)
    with torch.inference_mode():
        features = t.features([samples])
        encoded = encode(models.main, features)
    most = second_chances.fallback_tokens(t, "en", len(samples) / media.SAMPLE_RATE)
    model = models.transformers_main()
    print(
        f"{args.model} {models.runtime.describe()}, {args.audio} {args.start:.2f}+{len(samples) / media.SAMPLE_RATE:.2f}"
        f" s, {most} tokens a pass, {torch.get_num_threads()} threads, {args.rounds} rounds alternated"
    )
    print("rung             same  steps  transformers s  ms/step   podscribe s  ms/step")
    for label, beams, temperature in recover.fallbacks(5):
        times = {"transformers": [], "podscribe": []}
        for _ in range(args.rounds):
            start = time.perf_counter()
            theirs = transformers_attempt(model, features, encoded, beams, temperature, most)
            times["transformers"].append(time.perf_counter() - start)
            start = time.perf_counter()
            ours = second_chances.again(t, features, encoded, "en", beams, temperature, most)
            times["podscribe"].append(time.perf_counter() - start)
        steps = ours.stats.main_calls
        hf, own = (statistics.median(times[k]) for k in ("transformers", "podscribe"))
        print(
            f"{label:16} {'yes' if ours.tokens == theirs else 'NO':4}  {steps:5}  {hf:14.2f}  {1000 * hf / steps:7.1f}"
            f"   {own:11.2f}  {1000 * own / steps:7.1f}"
        )


def transformers_attempt(model, features, encoded, beams: int, temperature: float, most: int) -> list[int]:
    """One rung by transformers' own generate, seeded as the ladder seeds it: the token ids."""
    from pipeline.decode.hf_generate import hf_generate

    with torch.random.fork_rng():
        torch.manual_seed(recover.SEED)
        ((ids, _, _),) = hf_generate(
            model, features, ["en"], True, None, encoded, num_beams=beams, temperature=temperature, max_new_tokens=most
        )
    return ids


if __name__ == "__main__":
    main()
