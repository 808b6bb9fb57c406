#!/usr/bin/env bash
# Build the two-voice example episode, transcribe it with the offline `base` model and export subtitles.
set -euo pipefail
cd "$(dirname "$0")/.."
episode=$(bash scripts/make_example.sh)
.venv/bin/podscribe transcribe "$episode" --model base --language en --subtitles srt,vtt --out manifests/example
.venv/bin/python - <<'PY'
import pyarrow.dataset as ds
rows = sorted(ds.dataset("manifests/example/segments").to_table().to_pylist(), key=lambda r: r["segment"])
for r in rows[:6]:
    print(f"[{r['start_s']:7.2f} -> {r['end_s']:7.2f}] {r['text']}")
print(f"... {len(rows)} segments in manifests/example/segments/, subtitles in manifests/example/subtitles/")
PY
