"""What Whisper's condition-on-previous-text would buy podscribe, measured before building it.

    .venv/bin/python -m bench.bench_previous_text [--longform ../shared/longform] [--episodes ...] [--out r.json]

podscribe decodes a file's pieces in batches, each piece with only its own audio: no "previous text"
prompt. openai-whisper (and faster-whisper by default) give every 30 s window the text before it
(`<|startofprev|>` + up to 223 tokens), which steers spelling, names and punctuation and can also carry
a loop from one window into the next. A prompt that depends on the previous piece's output makes pieces of
one file sequential (batch 1 within a file), so it has to buy something to be worth that.

Both configurations here decode the same pieces (podscribe's own cutting, VAD gate, second chances,
`base`, the default compute type) through `Transcriber`, stitched as the runner stitches them, and are
scored with the long-form set's score.py:

  podscribe, no prompt         the pieces of a file in batches of 4 (what the runner does);
  podscribe, previous text     one piece at a time, each prompted with the text of the pieces before it
                               (the last 223 tokens; the prompt is cleared after a piece that failed
                               Whisper's checks, as openai-whisper clears it after a high-temperature
                               fallback, so a loop is not fed forward).

Wall time is decoding only (pieces cut beforehand, models loaded before the clock starts).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

from bench.bench_longform import print_table, table_rows
from bench.common import LONGFORM, discover_episodes, episode_files, load_scorer, score


def transcribe(transcriber, pieces, previous_text: bool) -> list:
    if not previous_text:
        out = []
        size = transcriber.options.batch_size
        for at in range(0, len(pieces), size):
            out += transcriber.transcribe([p.samples for p in pieces[at : at + size]])
        return out
    out, text = [], []
    o = transcriber.options
    for p in pieces:
        transcriber.context = transcriber.plain.context(" ".join(text) or None, None)
        (r,) = transcriber.transcribe([p.samples])
        out.append(r)
        failed = r.compression_ratio > o.compression_ratio_threshold or r.avg_logprob < o.logprob_threshold
        if failed or any(d.reason.startswith("fallback") for d in r.redecodes):
            text = []
        elif not r.skipped:
            text += [s.text.strip() for s in r.segments]
    transcriber.context = []
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--longform", type=Path, default=LONGFORM)
    parser.add_argument("--episodes", default=None, help="comma-separated episode names (default: all)")
    parser.add_argument("--compute-type", default="auto")
    parser.add_argument("--out", type=Path, help="write the scores and hypotheses as JSON")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    from pipeline.audio import media
    from pipeline.decode import DecodeOptions
    from pipeline.decode.stitch import stitch
    from pipeline.decode.transcriber import Transcriber
    from pipeline.facts.runtime import pick_runtime
    from pipeline.models.load import load_models

    longform = args.longform.resolve()
    scorer = load_scorer(longform)
    names = [n.strip() for n in args.episodes.split(",") if n.strip()] if args.episodes else discover_episodes(longform)
    files = episode_files(longform, names)
    models = load_models("base", "none", pick_runtime("auto", args.compute_type))
    transcriber = Transcriber(models, DecodeOptions(), use_assistant=False)
    cut = {name: list(media.pieces(path)) for name, path in files.items()}
    print(f"episodes: {', '.join(names)}; {sum(len(p) for p in cut.values())} pieces; {models.runtime.describe()}")

    results = {}
    for label, previous in [("podscribe, no prompt", False), ("podscribe, previous text", True)]:
        print(f"{label} ...", flush=True)
        episodes = {}
        for name, pieces in cut.items():
            start = time.perf_counter()
            found = transcribe(transcriber, pieces, previous)
            wall = time.perf_counter() - start
            duration = sum(p.n_samples for p in pieces) / media.SAMPLE_RATE
            segments = stitch(pieces, found, duration)
            episodes[name] = {
                "wall_s": wall,
                "duration_s": duration,
                "rows": [
                    {"audio": files[name].name, "start": s.start_s, "end": s.end_s, "text": s.text} for s in segments
                ],
            }
        results[label] = {"episodes": episodes}
    scores = {label: score(scorer, longform, r) for label, r in results.items()}
    print()
    print_table([row for label in results for row in table_rows(label, scores[label], results[label])])
    if args.out:
        args.out.write_text(json.dumps({"scores": scores, "results": results}, indent=1))


if __name__ == "__main__":
    main()
