#!/usr/bin/env bash
# The GPU checks in one command, each part under its own time limit, results kept as each part ends.
#
#   bash bench/gpu_prepare.sh                                        # here, once: wheels, ffmpeg, tiny.en, clips
#   run(command="bash bench/gpu.sh", carry=[".device"], timeout_s=560)   # on the device -> $OUT/*.json, gpu.log
#   GPU_SMOKE=1 bash bench/gpu.sh                                    # anywhere: every part on tiny shapes, CPU
#
# 1. bench.gpu: large-v3's shapes (random weights): step costs, speculation's ceiling, throughput, half-precision
#    token identity with a draft, weight-only int8;
# 2. bench.gpu_real identity: tiny.en's real weights (bench.gpu_pack) on real speech, token ids with and without
#    a distil-shaped draft against transformers' generate, per compute type and batch size;
# 3. bench.gpu_real pipeline: `podscribe transcribe` in real processes at the device's defaults, plain and with
#    the draft: Parquet read back, segments compared, the long-form episode scored, subtitles parsed;
# 4. bench.gpu_real large-v3-shaped: the same pipeline with a model of large-v3's shape (the CUDA default).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=python3
[ -x .venv/bin/python ] && PY=$PWD/.venv/bin/python
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
out=${OUT:-bench/out}
mkdir -p "$out"
exec > >(tee -a "$out/gpu.log") 2>&1
work=${TMPDIR:-/tmp}/podscribe-gpu
rm -rf "$work" && mkdir -p "$work"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "no nvidia-smi"

# what bench/gpu_prepare.sh carried: wheels ahead of the image's packages, ffmpeg, the shims
if [ -d .device/wheels ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$work/site" .device/wheels/*.whl \
    || echo "wheels: install failed"
  export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
fi
if { [ -n "${GPU_CARRIED_FFMPEG:-}" ] || ! command -v ffmpeg >/dev/null; } && [ -f .device/bin/ffmpeg.xz ]; then
  mkdir -p "$work/bin"
  for tool in ffmpeg ffprobe; do xz -dc ".device/bin/$tool.xz" >"$work/bin/$tool" && chmod +x "$work/bin/$tool"; done
  export PATH="$work/bin:$PATH"
fi
for module in av ctranslate2; do
  $PY -c "import $module" 2>/dev/null || { export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/bench/gpu_shims"; break; }
done
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
$PY -c "import sys, torch, transformers, pyarrow; print('python', sys.version.split()[0], 'torch', torch.__version__, 'transformers', transformers.__version__, 'pyarrow', pyarrow.__version__, 'cuda', torch.cuda.is_available())"
ffmpeg -version 2>/dev/null | head -1

part() {  # part NAME SECONDS COMMAND...: one part, its exit code and time in the log, never the end of the script
  local name=$1 limit=$2 start=$SECONDS
  shift 2
  echo "== $name (limit ${limit} s)"
  timeout --kill-after=10 "$limit" "$@"
  echo "== $name: exit $? after $((SECONDS - start)) s"
}

if [ -n "${GPU_SMOKE:-}" ]; then
  tiny=--tiny dtypes=--dtypes=float32 few=--max-clips=2
else
  tiny="--budget-s 150" dtypes= few=
fi
model="$work/tiny.en"
part unpack 60 $PY -m bench.gpu_pack --unpack .device/tiny.en-int8 "$model"
part real-identity 100 $PY -m bench.gpu_real identity --model "$model" --clips .device/clips $dtypes $few --out "$out/real_identity.json"
part pipeline 130 $PY -m bench.gpu_real pipeline --model "$model" --clips .device/clips $few --work "$work/jobs" --out "$out/pipeline.json"
part shapes 180 $PY -m bench.gpu $tiny --out "$out/gpu.json"
[ -z "${GPU_SMOKE:-}" ] && part large-v3-shaped 90 $PY -m bench.gpu_real large-v3-shaped --model "$model" --clips .device/clips --work "$work/large" --out "$out/large_v3_shaped.json"
echo "== all parts ended after $SECONDS s"
