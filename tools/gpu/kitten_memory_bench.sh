#!/usr/bin/env bash
# Kitten activations on one GPU, measured through `mok train` (bf16):
#   1. each variant at batch 16 × 1024: training tokens/s (median of the steps after
#      warm-up), peak saved-activation bytes, peak device bytes, and what `mok plan`
#      predicted for the same config;
#   2. under a device memory cap (CAP, default 16GiB: one H200 standing in for a 16 GB
#      card): the largest batch of BATCHES that trains under the cap, and tokens/s there;
#   3. quality (QUALITY_STEPS > 0): each of QUALITY_VARIANTS trained QUALITY_STEPS steps
#      on the same tokens (lr QUALITY_LR, cosine after QUALITY_WARMUP), then validation bits
#      per byte over QUALITY_EVAL_BATCHES batches; `exact_seed2` (exact, another seed) gives
#      the seed-to-seed spread to read the others against; with seeds on both sides
#      (exact_seedN, kitten_seedN) each setting's difference from exact seed by seed, its mean
#      and standard error. frontier.csv: saved bytes vs bpb.
#   tools/gpu/kitten_memory_bench.sh BIN_DIR [OUT_DIR]     (BIN_DIR from tools/gpu/pack.sh)
#   SHAPES=moe8,dense  CAP=16GiB  BATCHES="16 24 32 48 64 96"  WARMUP=2  STEPS=4
#   VARIANTS=exact,kitten (none: quality alone)  CAP_VARIANTS=exact,kitten  QUALITY_STEPS=0
#   QUALITY_VARIANTS=$VARIANTS  QUALITY_SEEDS=A-B (each quality variant for seeds A … B, seed
#   by seed, so that a run cut short still holds pairs: exact,kitten with 1-3 runs exact,
#   kitten, exact_seed2, kitten_seed2, exact_seed3, kitten_seed3)  QUALITY_PARALLEL=1 (N: N
#   quality runs side by side on the GPU, a seed's runs in one lane; about 1.2–1.4× the runs an
#   hour for N = 2–3 on an H200 at these shapes; step times are then left out)
# Variants:
#   exact          every saved tensor as it is
#   checkpoint     plain activation checkpointing: each block's input, the block run again
#   kitten         kittens.mode: kitten (4-bit linear inputs, 8-bit elementwise, norm outputs
#                  recomputed)
#   kitten4        kitten with the elementwise tensors 4-bit too
#   kitten_act4    kitten with the SwiGLU pre-activations 4-bit (q/k/v, norm inputs 8-bit)
#   kitten4_qkv8   kitten4 with q/k/v 8-bit;  kitten4_norm8: kitten4 with the norm inputs 8-bit
#                  (kitten4's elementwise: lowbit turns the recompute of norm outputs and SwiGLU
#                  hidden off: they are kept 4-bit)
#   kitten_4bit_qkv8  kitten (norm outputs and SwiGLU hidden recomputed) with every copy 4-bit
#                  but q/k/v 8-bit: the fewest bytes that train
#   kitten_linear  low-bit linear inputs only, elementwise exact (where the time goes)
#   NAME_seedN     any of these with seed 1233 + N (the configs' seed is 1234): exact_seed2,
#                  kitten_seed3, … (quality spread)
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
# Checked before any run, so that a typo costs no device time.
if [[ -n "${QUALITY_SEEDS:-}" && ! "$QUALITY_SEEDS" =~ ^[0-9]+-[0-9]+$ ]]; then
  echo "QUALITY_SEEDS=$QUALITY_SEEDS: expected A-B, e.g. 1-6" >&2
  exit 2
fi
QUALITY_PARALLEL="${QUALITY_PARALLEL:-1}"
if [[ ! "$QUALITY_PARALLEL" =~ ^[1-9][0-9]*$ ]]; then
  echo "QUALITY_PARALLEL=$QUALITY_PARALLEL: expected a count of runs side by side, e.g. 3" >&2
  exit 2
fi
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
    *_seed[0-9]*) echo "$(mode_sets "${1%_seed*}") --set seed=$((1233 + ${1##*_seed}))" ;;
    checkpoint) echo "--set kittens.mode=exact --set train.activation_checkpointing=true" ;;
    kitten) echo "--set kittens.mode=kitten" ;;
    kitten4) echo "--set kittens.mode=kitten --set kittens.elementwise=lowbit --set kittens.bits=4" ;;
    kitten_act4) echo "--set kittens.mode=kitten --set kittens.kinds.moe.expert.act.method=lowbit" \
                      "--set kittens.kinds.moe.expert.act.bits=4 --set kittens.kinds.mlp.act.method=lowbit" \
                      "--set kittens.kinds.mlp.act.bits=4" ;;
    kitten4_qkv8) echo "$(mode_sets kitten4) --set kittens.kinds.attn.qkv.method=lowbit --set kittens.kinds.attn.qkv.bits=8" ;;
    kitten4_norm8) echo "$(mode_sets kitten4)" \
                        "--set kittens.kinds.attn_norm.method=lowbit --set kittens.kinds.attn_norm.bits=8" \
                        "--set kittens.kinds.ffn_norm.method=lowbit --set kittens.kinds.ffn_norm.bits=8" \
                        "--set kittens.kinds.final_norm.method=lowbit --set kittens.kinds.final_norm.bits=8" ;;
    kitten_4bit_qkv8) echo "--set kittens.mode=kitten --set kittens.bits=4 --set kittens.kinds.attn.qkv.method=lowbit" \
                           "--set kittens.kinds.attn.qkv.bits=8" ;;
    kitten_linear) echo "--set kittens.mode=kitten --set kittens.elementwise=exact" ;;
    *) echo "unknown variant $1" >&2; echo "--set kittens.mode=unknown-variant" ;;
  esac
}
train() {  # name, yaml, then mok train arguments; exit status of mok
  local name="$1" yaml="$2"; shift 2
  timeout "${MOK_TIMEOUT:-240}" "$BIN/mok" train "$yaml" --json --quiet --no-checkpoints --db "$SCRATCH/$name.db" \
    --set parallel.device=cuda --set "train.steps=$((WARMUP + STEPS))" --set train.eval_every=100000 \
    --set "logging.checkpoint_dir=$SCRATCH/ckpt-$name" "$@" > "$OUT_DIR/$name.json" 2> "$OUT_DIR/$name.err"
  local rc=$?
  # The run's own series only: the per-layer ones (mem/saved/…, moe/…) are 97 % of the rows,
  # about 8 MB a 500-step run, more than a device call brings back for a dozen runs.
  "$BIN/mok" runs export-csv 1 --db "$SCRATCH/$name.db" --out "$SCRATCH/$name.csv" > /dev/null 2>&1
  awk -F, 'NR == 1 || $4 !~ /^(mem\/saved\/|moe\/)/' "$SCRATCH/$name.csv" > "$OUT_DIR/$name.csv" 2>/dev/null
  return $rc
}

IFS=',' read -r -a SHAPE_LIST <<< "$SHAPES"
IFS=',' read -r -a VARIANT_LIST <<< "${VARIANTS:-exact,kitten}"
CAP_VARIANTS=",${CAP_VARIANTS:-exact,kitten},"
for shape in "${SHAPE_LIST[@]}"; do
  yaml="$(yaml_for "$shape")"
  for variant in "${VARIANT_LIST[@]}"; do
    [[ "$variant" == none ]] && continue
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

QUALITY_STEPS="${QUALITY_STEPS:-0}"
QUALITY_VARIANTS="${QUALITY_VARIANTS:-${VARIANTS:-exact,kitten}}"
if [[ -n "${QUALITY_SEEDS:-}" ]]; then  # "A-B": every variant for seeds A … B, seed by seed
  IFS=',' read -r -a QV_BASE <<< "$QUALITY_VARIANTS"
  QUALITY_VARIANTS=""
  for ((n = ${QUALITY_SEEDS%-*}; n <= ${QUALITY_SEEDS#*-}; ++n)); do
    for v in "${QV_BASE[@]}"; do
      name="$v"
      if ((n > 1)); then name+="_seed$n"; fi
      QUALITY_VARIANTS+="${QUALITY_VARIANTS:+,}$name"
    done
  done
fi
quality_lane() {  # lane j of QUALITY_PARALLEL: the runs of every QUALITY_PARALLEL-th group
  local lane="$1" i group
  for shape in "${SHAPE_LIST[@]}"; do
    yaml="$(yaml_for "$shape")"
    for ((i = 0; i < ${#QV_LIST[@]}; ++i)); do
      group=$((i / GROUP))
      ((group % QUALITY_PARALLEL == lane)) || continue
      variant="${QV_LIST[$i]}"
      # shellcheck disable=SC2046
      MOK_TIMEOUT="${QUALITY_TIMEOUT:-400}" WARMUP=0 STEPS="$QUALITY_STEPS" \
        train "q_${shape}_${variant}" "$yaml" --set train.batch=16 --set "train.lr=${QUALITY_LR:-1e-3}" \
        --set "train.warmup_steps=${QUALITY_WARMUP:-50}" --set train.schedule=cosine \
        --set "train.eval_every=$QUALITY_STEPS" --set "train.eval_batches=${QUALITY_EVAL_BATCHES:-16}" \
        $(mode_sets "$variant")
      echo "q_${shape}_${variant}: exit $?"
    done
  done
}
if (( QUALITY_STEPS > 0 )); then
  IFS=',' read -r -a QV_LIST <<< "$QUALITY_VARIANTS"
  # QUALITY_PARALLEL=N runs N lanes side by side on the one GPU, a seed's runs (with
  # QUALITY_SEEDS) in one lane one after the other, so that a call cut short still holds pairs.
  # A run's result does not depend on its timing; its step time then means nothing.
  GROUP=1
  if [[ -n "${QUALITY_SEEDS:-}" ]]; then GROUP=${#QV_BASE[@]}; fi
  for ((lane = 0; lane < QUALITY_PARALLEL; ++lane)); do quality_lane "$lane" & done
  wait
fi

python3 - "$OUT_DIR" "$SHAPES" "$WARMUP" "$CAP" "${VARIANTS:-exact,kitten}" "$QUALITY_VARIANTS" "$QUALITY_STEPS" \
  "$QUALITY_PARALLEL" <<'PY'
import csv, json, os, sys
out, shapes, warmup, cap = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), sys.argv[4]
variants, quality_variants, quality_steps = sys.argv[5].split(","), sys.argv[6].split(","), int(sys.argv[7])
shared_gpu = int(sys.argv[8]) > 1  # quality runs side by side: their step times mean nothing
def median(v):
    v = sorted(v)
    return v[len(v) // 2] if v else float("nan")
def last_json(path):
    try:
        return json.loads(open(path).read().strip().splitlines()[-1])
    except Exception:
        return {}
def run_median(name, metric, after):  # median of a per-step metric of run `name` after step `after`
    try:
        rows = list(csv.DictReader(open(f"{out}/{name}.csv")))
    except OSError:
        return float("nan")
    return median([float(r["value"]) for r in rows if r["name"] == metric and int(r["step"]) > after])
def tps(name):
    return run_median(name, "perf/tokens_per_s", warmup)
G = 2**30
print(f"{'shape':6s} {'saved':13s} {'tokens/s b16':>12s} {'saved GiB':>10s} {'peak GiB':>9s} {'plan GiB':>9s}"
      f" {'largest batch ≤ ' + cap:>20s} {'tokens/s there':>14s}")
for s in shapes:
    base = None
    for v in variants:
        if v == "none":
            continue
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
    # Kittens against plain recompute, the baseline they are meant to beat: tokens/s at batch 16.
    if "checkpoint" in variants:
        for v in variants:
            if v.startswith("kitten"):
                print(f"{s:6s} {v + ' / ckpt':13s} {tps(f'b16_{s}_{v}') / tps(f'b16_{s}_checkpoint'):12.2f}")
if quality_steps > 0:
    # After the run's first 5 steps; none where runs shared the GPU.
    step_ms = lambda name: float("nan") if shared_gpu else run_median(name, "perf/step_ms", 5)
    print(f"\nquality after {quality_steps} steps (16 x 1024 tokens each):")
    print(f"{'shape':6s} {'variant':13s} {'val bpb':>9s} {'vs exact':>9s} {'saved GiB':>10s} {'of exact':>9s}"
          f" {'step ms':>8s} {'vs exact':>9s}")
    with open(f"{out}/frontier.csv", "w") as f:
        w = csv.writer(f)
        w.writerow(["shape", "variant", "val_bpb", "saved_bytes", "step_ms"])
        for s in shapes:
            for v in quality_variants:
                # Against exact of the same seed when it ran (exact_seedN), else exact (seed 1).
                n = v.partition("_seed")[2]
                ref = f"q_{s}_exact_seed{n}" if n and os.path.exists(f"{out}/q_{s}_exact_seed{n}.json") else f"q_{s}_exact"
                e = last_json(f"{out}/{ref}.json")
                e_ms = step_ms(ref)
                j = last_json(f"{out}/q_{s}_{v}.json")
                bpb = j.get("val_bpb", float("nan"))
                saved = j.get("peak_saved_activation_bytes", float("nan"))
                ms = step_ms(f"q_{s}_{v}")
                rel = (bpb / e["val_bpb"] - 1) * 100 if e.get("val_bpb") else float("nan")
                frac = saved / e["peak_saved_activation_bytes"] if e.get("peak_saved_activation_bytes") else float("nan")
                times = f"{ms:8.1f} {ms / e_ms:9.2f}" if not shared_gpu else f"{'shared':>8s} {'-':>9s}"
                print(f"{s:6s} {v:13s} {bpb:9.4f} {rel:+8.2f}% {saved / G:10.2f} {frac:9.2f} {times}")
                w.writerow([s, v, bpb, saved, "" if shared_gpu else ms])
    # Seeds paired: NAME_seedN against exact_seedN (NAME and exact alone: seed 1), the difference
    # in % per seed, then its mean and standard error over the seeds both have.
    def seeded(v):
        base, _, n = v.partition("_seed")
        return base, int(n) if n.isdigit() else 1
    for s in shapes:
        runs = {}
        for v in quality_variants:
            bpb = last_json(f"{out}/q_{s}_{v}.json").get("val_bpb")
            if bpb:
                runs.setdefault(seeded(v)[0], {})[seeded(v)[1]] = bpb
        exact = runs.get("exact", {})
        for base, by_seed in runs.items():
            if base == "exact":
                continue
            seeds = sorted(set(by_seed) & set(exact))
            if not seeds:
                continue
            d = [(by_seed[n] / exact[n] - 1) * 100 for n in seeds]
            mean = sum(d) / len(d)
            se = (sum((x - mean) ** 2 for x in d) / (len(d) - 1) / len(d)) ** 0.5 if len(d) > 1 else float("nan")
            # Student's t at 97.5 % for n − 1 degrees of freedom (the table's next lower entry).
            t975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
                    10: 2.23, 12: 2.18, 15: 2.13, 20: 2.09, 25: 2.06, 30: 2.04}
            t = t975[max(k for k in t975 if k <= len(d) - 1)] if len(d) > 1 else float("nan")
            print(f"{s:6s} {base:13s} vs exact over seeds {','.join(map(str, seeds))}: "
                  f"{' '.join(f'{x:+.2f}%' for x in d)}; mean {mean:+.2f}% ± {se:.2f}% (standard error), "
                  f"95% interval {mean - t * se:+.2f}% to {mean + t * se:+.2f}%")
PY
echo "written under $OUT_DIR"
