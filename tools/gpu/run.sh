#!/usr/bin/env bash
# Builds and runs the CUDA checks and kernel timings on a GPU machine that has only CUDA
# (nvcc, cuBLAS) — no Qt or project libraries needed.
#   tools/gpu/run.sh [OUT_DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${1:-$ROOT/build-gpu}"
mkdir -p "$OUT"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
"$NVCC" -std=c++17 -O3 -arch=sm_90 -I"$ROOT" \
  "$ROOT"/kernels/*.cu "$ROOT"/kernels/cuda_op_checks.cpp "$ROOT"/tools/gpu/gpu_check_main.cpp \
  -lcublas -o "$OUT/mok-gpu-check"
"$OUT/mok-gpu-check" | tee "$OUT/gpu_check.txt"
