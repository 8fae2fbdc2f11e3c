#!/usr/bin/env bash
# The project's flash attention against cuDNN's fused attention on one GPU: the kernel checks
# (both against the CPU reference), their timings, and short training runs of the benchmark
# models with each (MOK_ATTENTION=own | cudnn), the cuDNN run twice for bitwise repeatability.
#   tools/gpu/attention_compare.sh [BIN_DIR] [OUT_DIR]      STEPS (30)
set -uo pipefail
export NCCL_NVLS_ENABLE=0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$(cd "${1:-$ROOT/build-gpu}" && pwd)"
OUT_DIR="${2:-${OUT:-/tmp/mok-attention}}"
STEPS="${STEPS:-30}"
mkdir -p "$OUT_DIR"
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT
cd "$ROOT"

nvidia-smi -L
"$BIN/mok-gpu-check" --checks attention --timings attention > "$OUT_DIR/checks.txt" 2>&1
echo "mok-gpu-check: exit $?"
grep -E "cudnn|cuDNN|FAIL" "$OUT_DIR/checks.txt" | head -80
sed -n '/causal flash attention/,$p' "$OUT_DIR/checks.txt"

# name, config, extra settings: the kitten run keeps no attention output (backward makes it again)
while read -r case yaml sets; do
  for variant in own cudnn cudnn_again; do
    name="$case-$variant"
    MOK_ATTENTION="${variant%_again}" timeout 240 "$BIN/mok" train "experiments/gpu/$yaml.yaml" --json --quiet \
      --no-checkpoints --db "$SCRATCH/$name.db" --set parallel.device=cuda --set "train.steps=$STEPS" \
      --set train.eval_every=100000 --set "logging.checkpoint_dir=$SCRATCH/ckpt-$name" $sets \
      > "$OUT_DIR/$name.json" 2> "$OUT_DIR/$name.err"
    echo "$name: exit $?; $(grep -v '^$' "$OUT_DIR/$name.err" | tail -n 2 | cut -c1-300)"
    "$BIN/mok" runs export-csv 1 --db "$SCRATCH/$name.db" --out "$OUT_DIR/$name.csv" > /dev/null 2>&1
  done
done <<'RUNS'
dense_85m dense_85m
moe_8x1024 moe_8x1024
moe_8x1024_kitten moe_8x1024 --set kittens.mode=kitten
moe_8x1024_checkpoint moe_8x1024 --set train.activation_checkpointing=true
RUNS

python3 - "$OUT_DIR" "$STEPS" <<'PY'
import csv, json, statistics, sys
out, steps = sys.argv[1], int(sys.argv[2])
def rows(name):
    try:
        return list(csv.DictReader(open(f"{out}/{name}.csv")))
    except OSError:
        return []
def series(rs, metric):
    return {int(r["step"]): float(r["value"]) for r in rs if r["name"] == metric}
for shape in ("dense_85m", "moe_8x1024", "moe_8x1024_kitten", "moe_8x1024_checkpoint"):
    own, cud, again = (rows(f"{shape}-{v}") for v in ("own", "cudnn", "cudnn_again"))
    lo, lc, la = (series(r, "train/loss") for r in (own, cud, again))
    ms_o, ms_c = (series(r, "perf/step_ms") for r in (own, cud))
    warm = 5
    med = lambda s: statistics.median([v for k, v in s.items() if k > warm]) if len(s) > warm else float("nan")
    if not lo or not lc:
        print(f"{shape}: missing runs"); continue
    last = max(lo)
    diff = max(abs(lc[k] - lo[k]) / abs(lo[k]) for k in lo if k in lc)
    same = lc == la
    peak = lambda v: json.loads(open(f"{out}/{shape}-{v}.json").read().strip().splitlines()[-1]).get("peak_reserved_bytes", 0) / 2**30
    try:
        peaks = f"; peak reserved GiB own {peak('own'):.2f} cudnn {peak('cudnn'):.2f}"
    except Exception:
        peaks = ""
    print(f"{shape}: step ms own {med(ms_o):.2f} cudnn {med(ms_c):.2f} (×{med(ms_o)/med(ms_c):.3f} tokens/s); "
          f"loss at step {last} own {lo[last]:.5f} cudnn {lc.get(last, float('nan')):.5f}; "
          f"max rel. loss diff {diff:.2e}; cudnn repeat bitwise: {same}{peaks}")
for v in ("own", "cudnn"):
    a, b = (series(rows(f"{n}-{v}"), "train/loss") for n in ("moe_8x1024", "moe_8x1024_checkpoint"))
    print(f"activation checkpointing with {v} attention: losses bitwise those of exact keeping: {bool(a) and a == b}")
PY
