#!/usr/bin/env bash
# Run a command with the CPU kernels capped to one x86-64 family, so that a claim which holds only on the
# machine it was written on fails where it is written:
#   bash scripts/isa.sh avx2   .venv/bin/python -m pytest -q -m "not model or identity"
#   bash scripts/isa.sh avx512 .venv/bin/python -m pytest -q      # AVX-512 (VNNI, BF16) without AMX
#   bash scripts/isa.sh native CMD...                              # whatever this CPU has
# Each library that picks kernels by instruction set is capped: ATen's vectorised ops, oneDNN (float and
# bfloat16 products, AMX), MKL (float32 GEMM), fbgemm (int8 GEMM) and CTranslate2 (the benchmark's peer).
# A cap only lowers: on a CPU without AMX, `avx512` is what the CPU runs anyway; AMX itself cannot be emulated.
set -euo pipefail
family=${1:-}
shift || true
case "$family" in
  avx2)
    export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2
    export FBGEMM_ENABLE_INSTRUCTIONS=AVX2 CT2_FORCE_CPU_ISA=AVX2
    ;;
  avx512)
    export ATEN_CPU_CAPABILITY=avx512 ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 MKL_ENABLE_INSTRUCTIONS=AVX512_E1
    export FBGEMM_ENABLE_INSTRUCTIONS=AVX512_E1 CT2_FORCE_CPU_ISA=AVX512
    ;;
  native) ;;
  *)
    echo "usage: bash scripts/isa.sh avx2|avx512|native COMMAND..." >&2
    exit 2
    ;;
esac
[ $# -gt 0 ] || { echo "usage: bash scripts/isa.sh avx2|avx512|native COMMAND..." >&2; exit 2; }
exec "$@"
