#!/usr/bin/env bash
# The GPU checks in one command (bench/gpu.py says what they measure); nothing to download.
# On the device machine:  run(command="bash bench/gpu.sh", timeout_s=540)  -> $OUT/gpu.json, $OUT/gpu.log
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python
export PYTHONUNBUFFERED=1
out=${OUT:-bench/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
$PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'cuda', torch.cuda.is_available())"
timeout 480 $PY -m bench.gpu --out "$out/gpu.json" 2>&1 | tee "$out/gpu.log"
# A distilled `base` draft (podscribe distill, trained elsewhere: DRAFT=dir) against `base` alone on the long-form set.
if [ -n "${DRAFT:-}" ] && [ -d "${LONGFORM:-../shared/longform}" ]; then
  timeout 300 $PY -m bench.bench_distill --draft "$DRAFT" --device cuda --longform "${LONGFORM:-../shared/longform}" \
    --work "$out/distill" --pieces 32 2>&1 | tee "$out/distill.log"
fi
