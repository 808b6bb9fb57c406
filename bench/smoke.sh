#!/usr/bin/env bash
# The benchmarks' smoke test, so they cannot rot unnoticed (CI runs it; 104 s wall, 76 s CPU on a busy 2-core machine):
# every bench module imports, the GPU script's steps run on tiny shapes on the CPU, and the transcribe
# benchmark runs end to end on one clip with tiny.en (no long-form file, no faster-whisper).
# Needs the speech clips (../shared/speech or $PODSCRIBE_SPEECH_DIR) and the offline tiny.en weights.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python
$PY -c "
import importlib, pkgutil, bench
for m in pkgutil.iter_modules(bench.__path__):
    importlib.import_module('bench.' + m.name)
print('bench: every module imports')"
$PY -m bench.gpu --tiny --device cpu >/dev/null
echo "bench.gpu --tiny: ok"
$PY -m bench.bench_transcribe --model tiny.en --clips 1 --compute-types float32 --skip-long --skip-fw
