#!/usr/bin/env bash
# MoK dispatch benchmark suite through the real trainer and generator, one command:
#
#   tools/bench_mok_suite.sh
#
# For each regime (experiments/mok_coarse.yaml: the quickstart shape; experiments/mok_kitten.yaml:
# 32 experts of hidden 64, top-4, a large batch), each rank set-up (2 and 4 local ranks, 2 MPI
# processes) and each emulated link (NVLink-like 250 GB/s, InfiniBand-like 25 GB/s, and a slow
# 0.1 GB/s link that gives transfers the share of a step they have on GPUs; the ranks sleep the
# modeled link time, so wall-clock figures include it), it trains three runs —
# classic dispatch, MoK exact, MoK with the locality policy — for STEPS steps with `mok train`,
# then generates with `mok generate --batch` over the same ranks, link and dispatcher from each
# run's final checkpoint, and records the inference figures into the run (`mok runs record`).
# Every run lands in one run store ($OUT/suite.db, tagged `mok-suite`); the report
# ($OUT/report.md) holds one `mok runs compare --markdown` table per group, ratios against
# classic. A quality leg then trains classic and MoK+locality for QUALITY_STEPS steps (each
# regime of QUALITY_REGIMES, 2 local ranks, NVLink-like) and compares validation bits per byte.
#
# Environment (defaults in brackets): BUILD [build], OUT [$BUILD/bench_mok_suite], STEPS [12],
# SKIP [2] (warm-up steps left out of the means), REGIMES [mok_coarse mok_kitten],
# SETUPS [local2 local4 mpi2], LINKS [nvlink ib slow], INFER_TOKENS [24], INFER_BATCH [32],
# QUALITY_STEPS [400; 0 skips the quality leg], QUALITY_REGIMES [mok_coarse mok_kitten],
# NO_BUILD (set: do not build). REGIMES="" runs the quality leg alone.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/bench_mok_suite}
STEPS=${STEPS:-12}
SKIP=${SKIP:-2}
REGIMES=${REGIMES-"mok_coarse mok_kitten"}
SETUPS=${SETUPS:-"local2 local4 mpi2"}
LINKS=${LINKS:-"nvlink ib slow"}
INFER_TOKENS=${INFER_TOKENS:-24}
INFER_BATCH=${INFER_BATCH:-32}
QUALITY_STEPS=${QUALITY_STEPS:-400}
QUALITY_REGIMES=${QUALITY_REGIMES:-"mok_coarse mok_kitten"}
MOK=$BUILD/app/mok
DB=$OUT/suite.db
REPORT=$OUT/report.md
METRICS="comm/remote_bytes,comm/dispatch_bytes,comm/local_tokens,perf/step_ms,perf/tokens_per_s,infer/tokens_per_s,infer/remote_bytes_per_token,val/bpb"

if [ -z "${NO_BUILD:-}" ]; then cmake --build "$BUILD" --target mok; fi
mkdir -p "$OUT"
rm -f "$DB" "$DB-wal" "$DB-shm"

MPIRUN=()
if command -v mpirun >/dev/null 2>&1; then
  MPIRUN=(mpirun -np 2 --oversubscribe --bind-to none)
  [ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
fi

# nvlink: NVLink-like, 250 GB/s (NCCL all-to-all bus bandwidth measured between two H200s);
# ib: 200 Gb/s InfiniBand-like, 25 GB/s; slow: 0.1 GB/s, a link slowed in proportion to this
# CPU's compute — on a CPU the other two links take under 1 % of a step, while on GPUs, whose
# expert compute is ~10⁴ times faster, the all-to-all is a large share of it; at 0.1 GB/s it is
# a comparable share here, so the effect of moving fewer bytes on step time shows.
link_gbps() { case $1 in nvlink) echo 250 ;; ib) echo 25 ;; slow) echo 0.1 ;; *) echo "unknown link $1" >&2; exit 2 ;; esac; }
link_latency_us() { case $1 in nvlink) echo 1 ;; *) echo 2 ;; esac; }
# A field of the last JSON line on stdin (numbers and plain strings only).
json_field() { tail -n 1 | sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\).*/\1/p"; }

# train REGIME SETUP LINK VARIANT STEPS → prints the run id (progress goes to stderr)
train() {
  local regime=$1 setup=$2 link=$3 variant=$4 steps=$5
  local ranks=${setup#local}; ranks=${ranks#mpi}
  local comm=local launcher=()
  if [[ $setup == mpi* ]]; then comm=mpi; launcher=("${MPIRUN[@]}"); fi
  local dispatcher=mok policy=topk
  case $variant in
    classic) dispatcher=classic ;;
    mok) ;;
    mok+locality) policy=locality ;;
  esac
  local name="$regime $setup $link $variant"
  echo "  train: $name ($steps steps)" >&2
  local out
  out=$("${launcher[@]}" "$MOK" train "experiments/$regime.yaml" --db "$DB" --json --quiet \
    --set "name=$name" --set "train.steps=$steps" --set "train.eval_every=$steps" --set train.eval_batches=4 \
    --set "parallel.ranks=$ranks" --set "parallel.comm=$comm" --set parallel.threads=1 \
    --set "parallel.link_gbps=$(link_gbps "$link")" --set "parallel.link_latency_us=$(link_latency_us "$link")" \
    --set parallel.link_sleep=true --set "routing.dispatcher=$dispatcher" --set "routing.policy=$policy" \
    --set "logging.checkpoint_dir=$OUT/checkpoints")
  local id ckpt
  id=$(json_field run_id <<<"$out")
  ckpt=$(json_field checkpoint <<<"$out")
  [ -n "$id" ] || { echo "no run id from: $out" >&2; exit 1; }
  "$MOK" runs tag "$id" mok-suite "$regime" "$setup" "$link" "$variant" --db "$DB" >/dev/null
  # Inference over the same ranks, link and dispatcher, from the final checkpoint.
  local gen
  gen=$("${launcher[@]}" "$MOK" generate "$ckpt" --json --quiet --prompts-from-data \
    --batch "$INFER_BATCH" --tokens "$INFER_TOKENS" --ranks "$ranks" --comm "$comm" --dispatcher "$dispatcher" \
    --link-gbps "$(link_gbps "$link")" --link-latency-us "$(link_latency_us "$link")")
  local tps bytes new
  tps=$(json_field tokens_per_s <<<"$gen")
  bytes=$(json_field remote_bytes <<<"$gen")
  new=$(json_field new_tokens <<<"$gen")
  "$MOK" runs record "$id" "infer/tokens_per_s=$tps" \
    "infer/remote_bytes_per_token=$(awk -v b="$bytes" -v n="$new" 'BEGIN { printf "%.6g", (n > 0 ? b / n : 0) }')" \
    --db "$DB" >/dev/null
  echo "$id"
}

{
  echo "# MoK dispatch suite: $(date -u +%Y-%m-%dT%H:%MZ), $(hostname), $(nproc) cores"
  echo
  echo "STEPS=$STEPS (means over steps after the first $SKIP), inference: batch $INFER_BATCH, $INFER_TOKENS new tokens"
  echo "per sequence. Store: $DB. Ratios are against classic in the same group."
} >"$REPORT"

for regime in $REGIMES; do
  for setup in $SETUPS; do
    if [[ $setup == mpi* && ${#MPIRUN[@]} -eq 0 ]]; then
      echo "## $regime $setup: skipped (no mpirun)" | tee -a "$REPORT"
      continue
    fi
    for link in $LINKS; do
      echo "## $regime, $setup, $link" >&2
      ids=()
      for variant in classic mok mok+locality; do ids+=("$(train "$regime" "$setup" "$link" "$variant" "$STEPS")"); done
      {
        echo
        echo "### $regime, $setup, $link ($(link_gbps "$link") GB/s)"
        echo
        "$MOK" runs compare "${ids[@]}" --db "$DB" --skip "$SKIP" --metrics "$METRICS" --markdown
      } >>"$REPORT"
    done
  done
done

if [ "$QUALITY_STEPS" -gt 0 ]; then
  for regime in $QUALITY_REGIMES; do
    echo "## quality: $regime, local2, nvlink, $QUALITY_STEPS steps" >&2
    ids=()
    for variant in classic mok+locality; do ids+=("$(train "$regime" local2 nvlink "$variant" "$QUALITY_STEPS")"); done
    {
      echo
      echo "### Quality: $regime, local2, nvlink, $QUALITY_STEPS steps"
      echo
      "$MOK" runs compare "${ids[@]}" --db "$DB" --skip "$SKIP" \
        --metrics "val/bpb,comm/local_tokens,comm/remote_bytes,perf/step_ms,infer/tokens_per_s" --markdown
    } >>"$REPORT"
  done
fi

cat "$REPORT"
