"""The decoding loop's width (``--batch-size``) against the job's wall, the same rows: each width run in turn,
rounds alternating the order, the models loaded once. Rows must be the same at every width (a row's tokens do not
depend on the rows beside it: decision 0044).

    .venv/bin/python bench/results/2026-12-08-width/width.py DIR [WIDTH,...] [ROUNDS]
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import pyarrow.dataset as ds  # noqa: E402

from pipeline.decode import DecodeOptions  # noqa: E402
from pipeline.facts.runtime import pick_runtime  # noqa: E402
from pipeline.job.config import JobOptions  # noqa: E402
from pipeline.job.run import run  # noqa: E402
from pipeline.models.load import load_models  # noqa: E402

folder = Path(sys.argv[1])
widths = [int(w) for w in (sys.argv[2] if len(sys.argv) > 2 else "8,12,16").split(",")]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
files = sorted(str(p) for p in folder.iterdir() if p.suffix in {".mp3", ".m4a", ".ogg", ".wav", ".flac"})
models = None
walls: dict[int, list[float]] = {w: [] for w in widths}
rows: dict[int, list] = {}
with tempfile.TemporaryDirectory() as tmp:
    for r in range(rounds):
        order = widths if r % 2 == 0 else widths[::-1]
        for w in order:
            out = Path(tmp) / f"w{w}-r{r}"
            options = JobOptions(out_dir=out, model="base", decode=DecodeOptions(batch_size=w), progress=False)
            if models is None:
                models = load_models(
                    options.model,
                    options.assistant,
                    pick_runtime(options.device, options.compute_type),
                    options.cache_dir,
                )
            t0 = time.perf_counter()
            run(files, options, models=models)
            wall = time.perf_counter() - t0
            segs = ds.dataset(out / "segments").to_table().to_pylist()
            key = sorted((s["file_id"], s["segment"], s["text"], s["start_s"], s["end_s"]) for s in segs)
            same = rows.setdefault(0, key) == key
            walls[w].append(wall)
            print(f"round {r} width {w}: {wall:.1f} s, {len(key)} segments, same rows as the first run: {same}")
            sys.stdout.flush()
for w in widths:
    print(f"width {w}: median {statistics.median(walls[w]):.1f} s of {[round(x, 1) for x in walls[w]]}")
