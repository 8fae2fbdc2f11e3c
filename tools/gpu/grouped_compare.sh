#!/usr/bin/env bash
# The expert products on the mma.sync grouped kernel against the Hopper (TMA + wgmma) one, on
# one H100/H200: the GEMM checks (every grouped kernel against the CPU reference), the GEMM
# timings (every grouped method at both expert shapes), and short training runs of the MoE
# benchmark models with each (MOK_GROUPED_KERNEL=mma | wgmma, tools/gpu/switch_compare.sh), the
# wgmma run twice for bitwise repeatability. The training runs are skipped when a check fails.
#   tools/gpu/grouped_compare.sh [BIN_DIR] [OUT_DIR]      STEPS (30)
set -uo pipefail
export NCCL_NVLS_ENABLE=0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$(cd "${1:-$ROOT/build-gpu}" && pwd)"
OUT_DIR="${2:-${OUT:-/tmp/mok-grouped}}"
STEPS="${STEPS:-30}"
mkdir -p "$OUT_DIR"
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cd "$ROOT"

nvidia-smi -L
timeout 400 "$BIN/mok-gpu-check" --checks gemm --timings gemm > "$OUT_DIR/checks.txt" 2>&1
status=$?
echo "mok-gpu-check --checks gemm --timings gemm: exit $status"
grep -E "grouped kernel|FAIL|failed|wgmma" "$OUT_DIR/checks.txt" | head -60
sed -n '/^experts/,$p' "$OUT_DIR/checks.txt"
if [ "$status" -ne 0 ]; then
  echo "a check failed or did not finish: no training runs"
  exit 1
fi

STEPS="$STEPS" "$ROOT/tools/gpu/switch_compare.sh" MOK_GROUPED_KERNEL mma wgmma "$BIN" "$OUT_DIR" <<'RUNS'
moe_8x1024 moe_8x1024
moe_64x256 moe_64x256
RUNS
