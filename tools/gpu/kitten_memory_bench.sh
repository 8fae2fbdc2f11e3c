#!/usr/bin/env bash
# Kitten activations on one GPU, measured through `mok train` (bf16):
#   1. exact vs kittens.mode: kitten at batch 16 × 1024: training tokens/s (median of the
#      steps after warm-up), peak saved-activation bytes, peak device bytes, and what
#      `mok plan` predicted for the same config;
#   2. under a device memory cap (CAP, default 16GiB: one H200 standing in for a 16 GB
#      card): the largest batch of BATCHES that trains under the cap, exact vs kitten, and
#      tokens/s at that batch.
#   tools/gpu/kitten_memory_bench.sh BIN_DIR [OUT_DIR]     (BIN_DIR from tools/gpu/pack.sh)
#   SHAPES=moe8,dense  CAP=16GiB  BATCHES="16 24 32 48 64 96"  WARMUP=2  STEPS=4
#   VARIANTS=exact,kitten[,kitten_linear]   (kitten_linear: low-bit linear inputs only, the
#   elementwise tensors exact — where the time goes)  CAP_VARIANTS=exact,kitten
set -uo pipefail
export NCCL_NVLS_ENABLE=0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$(cd "${1:-$ROOT/build-gpu}" && pwd)"
OUT_DIR="${2:-${OUT:-/tmp/mok-kitten-bench}}"
SHAPES="${SHAPES:-moe8,dense}"
CAP="${CAP:-16GiB}"
BATCHES="${BATCHES:-16 24 32 48 64 96}"
WARMUP="${WARMUP:-2}"
STEPS="${STEPS:-4}"
mkdir -p "$OUT_DIR"
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT
cd "$ROOT"

yaml_for() {
  case "$1" in
    moe8) echo experiments/gpu/moe_8x1024.yaml ;;
    moe64) echo experiments/gpu/moe_64x256.yaml ;;
    dense) echo experiments/gpu/dense_85m.yaml ;;
  esac
}
mode_sets() {  # variant → --set arguments
  case "$1" in
    exact) echo "--set kittens.mode=exact" ;;
    kitten) echo "--set kittens.mode=kitten" ;;
    kitten_linear) echo "--set kittens.mode=kitten --set kittens.elementwise=exact" ;;
  esac
}
train() {  # name, yaml, then mok train arguments; exit status of mok
  local name="$1" yaml="$2"; shift 2
  timeout "${MOK_TIMEOUT:-240}" "$BIN/mok" train "$yaml" --json --quiet --db "$SCRATCH/$name.db" \
    --set parallel.device=cuda --set "train.steps=$((WARMUP + STEPS))" --set train.eval_every=100000 \
    --set "logging.checkpoint_dir=$SCRATCH/ckpt-$name" "$@" > "$OUT_DIR/$name.json" 2> "$OUT_DIR/$name.err"
  local rc=$?
  "$BIN/mok" runs export-csv 1 --db "$SCRATCH/$name.db" --out "$OUT_DIR/$name.csv" > /dev/null 2>&1
  return $rc
}

IFS=',' read -r -a SHAPE_LIST <<< "$SHAPES"
IFS=',' read -r -a VARIANT_LIST <<< "${VARIANTS:-exact,kitten}"
CAP_VARIANTS=",${CAP_VARIANTS:-exact,kitten},"
for shape in "${SHAPE_LIST[@]}"; do
  yaml="$(yaml_for "$shape")"
  for variant in "${VARIANT_LIST[@]}"; do
    # shellcheck disable=SC2046
    "$BIN/mok" plan "$yaml" --json $(mode_sets "$variant") --set train.batch=16 2>/dev/null | tail -n 1 \
      > "$OUT_DIR/plan_${shape}_${variant}.json"
    # shellcheck disable=SC2046
    train "b16_${shape}_${variant}" "$yaml" --set train.batch=16 $(mode_sets "$variant")
    echo "b16_${shape}_${variant}: exit $?"
    best=0
    [[ "$CAP_VARIANTS" == *",$variant,"* ]] || continue
    for b in $BATCHES; do
      # shellcheck disable=SC2046
      if train "cap_${shape}_${variant}_b$b" "$yaml" --set "train.batch=$b" \
          --set "parallel.device_memory_limit=$CAP" $(mode_sets "$variant"); then
        best=$b
      else
        echo "cap_${shape}_${variant}_b$b: $(tail -n 1 "$OUT_DIR/cap_${shape}_${variant}_b$b.err" | cut -c1-200)"
        break
      fi
    done
    echo "$best" > "$OUT_DIR/largest_${shape}_${variant}"
  done
done

python3 - "$OUT_DIR" "$SHAPES" "$WARMUP" "$CAP" "${VARIANTS:-exact,kitten}" <<'PY'
import csv, json, sys
out, shapes, warmup, cap = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), sys.argv[4]
variants = sys.argv[5].split(",")
def median(v):
    v = sorted(v)
    return v[len(v) // 2] if v else float("nan")
def last_json(path):
    try:
        return json.loads(open(path).read().strip().splitlines()[-1])
    except Exception:
        return {}
def tps(name):
    try:
        rows = list(csv.DictReader(open(f"{out}/{name}.csv")))
    except OSError:
        return float("nan")
    return median([float(r["value"]) for r in rows if r["name"] == "perf/tokens_per_s" and int(r["step"]) > warmup])
G = 2**30
print(f"{'shape':6s} {'saved':13s} {'tokens/s b16':>12s} {'saved GiB':>10s} {'peak GiB':>9s} {'plan GiB':>9s}"
      f" {'largest batch ≤ ' + cap:>20s} {'tokens/s there':>14s}")
for s in shapes:
    base = None
    for v in variants:
        j = last_json(f"{out}/b16_{s}_{v}.json")
        p = last_json(f"{out}/plan_{s}_{v}.json")
        try:
            best = int(open(f"{out}/largest_{s}_{v}").read())
        except Exception:
            best = 0
        t = tps(f"b16_{s}_{v}")
        t_best = tps(f"cap_{s}_{v}_b{best}") if best else float("nan")
        saved = j.get("peak_saved_activation_bytes", float("nan"))
        peak = j.get("peak_device_bytes", float("nan"))
        print(f"{s:6s} {v:13s} {t:12.0f} {saved / G:10.2f} {peak / G:9.2f} {p.get('total_bytes', float('nan')) / G:9.2f}"
              f" {best:20d} {t_best:14.0f}")
        if v == "exact":
            base = (t, saved, peak, best, t_best)
        elif base:
            print(f"{s:6s} {'  ratio':13s} {t / base[0]:12.2f} {saved / base[1]:10.2f} {peak / base[2]:9.2f} {'':9s}"
                  f" {best / base[3] if base[3] else float('nan'):20.2f} {t_best / base[4] if base[4] else float('nan'):14.2f}")
PY
echo "written under $OUT_DIR"
