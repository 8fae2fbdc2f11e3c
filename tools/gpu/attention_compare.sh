#!/usr/bin/env bash
# The project's flash attention against cuDNN's fused attention on one GPU: the kernel checks
# (both against the CPU reference), their timings, and short training runs of the benchmark
# models with each (MOK_ATTENTION=own | cudnn, through tools/gpu/switch_compare.sh), the cuDNN
# run twice for bitwise repeatability.
#   tools/gpu/attention_compare.sh [BIN_DIR] [OUT_DIR]      STEPS (30)
set -uo pipefail
export NCCL_NVLS_ENABLE=0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$(cd "${1:-$ROOT/build-gpu}" && pwd)"
OUT_DIR="${2:-${OUT:-/tmp/mok-attention}}"
STEPS="${STEPS:-30}"
mkdir -p "$OUT_DIR"
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cd "$ROOT"

nvidia-smi -L
"$BIN/mok-gpu-check" --checks attention --timings attention > "$OUT_DIR/checks.txt" 2>&1
echo "mok-gpu-check: exit $?"
grep -E "cudnn|cuDNN|FAIL" "$OUT_DIR/checks.txt" | head -80
sed -n '/causal flash attention/,$p' "$OUT_DIR/checks.txt"

# name, config, extra settings: the kitten run keeps no attention output (backward makes it again)
STEPS="$STEPS" "$ROOT/tools/gpu/switch_compare.sh" MOK_ATTENTION own cudnn "$BIN" "$OUT_DIR" <<'RUNS'
dense_85m dense_85m
moe_8x1024 moe_8x1024
moe_8x1024_kitten moe_8x1024 --set kittens.mode=kitten
moe_8x1024_checkpoint moe_8x1024 --set train.activation_checkpointing=true
RUNS

python3 - "$OUT_DIR" <<'PY'
import csv, sys
out = sys.argv[1]
def series(name):
    try:
        return {int(r["step"]): float(r["value"]) for r in csv.DictReader(open(f"{out}/{name}.csv"))
                if r["name"] == "train/loss"}
    except OSError:
        return {}
for v in ("own", "cudnn"):
    a, b = (series(f"{n}-{v}") for n in ("moe_8x1024", "moe_8x1024_checkpoint"))
    print(f"activation checkpointing with {v} attention: losses bitwise those of exact keeping: {bool(a) and a == b}")
PY
