"""What beam search would buy: podscribe with every piece decoded by beam search (the main model alone, as its
fallback decodes failing pieces) beside faster-whisper at its own defaults (beam 5, temperature fallback), on
the long-form set, scored as bench.bench_longform scores.

    .venv/bin/python -m bench.bench_beam_ceiling [--longform ../shared/longform] [--beams 5] [--skip-fw]

A measurement, not a mode: podscribe decodes greedily so that speculative decoding gives the main model's
tokens exactly (docs/speculative-decoding.md). This asks how much of the long-form WER is the greedy search and
how much is the model (docs/decisions/0024-greedy-is-the-one-search.md).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path

from bench import bench_longform as bl
from bench.common import LONGFORM, discover_episodes, episode_files, load_scorer, score
from pipeline.audio.media import SAMPLE_RATE
from pipeline.decode import second_chances, transcriber
from pipeline.models import registry


def beams_everywhere(beams: int):
    """Transcriber.generate replaced: each piece by beam search, one at a time (the fallback's: search.py)."""

    def generate(self, features, encoded, languages, audio, results, cross=None):
        out = [
            second_chances.again(
                self,
                features[i : i + 1],
                encoded[i : i + 1],
                languages[i],
                beams,
                0.0,
                second_chances.fallback_tokens(self, languages[i], len(audio[i]) / SAMPLE_RATE),
            )
            for i in range(len(results))
        ]
        for r, g in zip(results, out):
            r.stats = replace(g.stats)
        return out

    return generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--longform", type=Path, default=LONGFORM)
    parser.add_argument("--beams", type=int, default=5)
    parser.add_argument("--skip-fw", action="store_true")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import transformers

    transformers.logging.set_verbosity_error()
    longform = args.longform.resolve()
    scorer = load_scorer(longform)
    files = episode_files(longform, discover_episodes(longform))
    tmp = Path(tempfile.mkdtemp(prefix="podscribe-beams-"))
    results = {}
    greedy = transcriber.Transcriber.generate
    try:
        transcriber.Transcriber.generate = beams_everywhere(args.beams)
        start = time.perf_counter()
        results[f"podscribe beam {args.beams} (every piece)"] = bl.run_podscribe(files, tmp / "job", None)
        print(f"podscribe with beams: {time.perf_counter() - start:.0f} s", flush=True)
    finally:
        transcriber.Transcriber.generate = greedy
    if not args.skip_fw:
        from faster_whisper import WhisperModel

        model = WhisperModel(
            str(registry.ct2_directory("base", tmp)), device="cpu", compute_type="int8", cpu_threads=os.cpu_count() or 2
        )
        temperatures = list(bl.FW_DEFAULT_TEMPERATURES)
        results["fw int8 beam 5 + fallback"] = bl.run_faster_whisper(model, files, temperatures, None, beam_size=5)
    rows = []
    for label, result in results.items():
        rows += bl.table_rows(label, score(scorer, longform, result), result)
    bl.print_table(rows)


if __name__ == "__main__":
    main()
