#!/usr/bin/env bash
# Kitten activations benchmark on the quickstart shape: exact vs kitten settings at equal
# batch, the largest batch under a saved-activation cap, and a quality/memory frontier.
#
#   tools/bench_kittens.sh [--mok PATH] [--steps 300] [--eval-every 100] [--out DIR]
#                          [--cap-mb 64] [--tps-steps 10] [--jobs 1] [--quick]
#                          [--only equal|cap|frontier] [--frontier "name|set set…" …]
#
# Every run is `mok train experiments/quickstart.yaml --json --set …`; its --json line is
# kept in DIR/<name>.json and its metric rows in DIR/bench.db. A run whose .json already
# exists is not run again, so an interrupted benchmark continues where it stopped and the
# report can be rebuilt from the files alone. --jobs 2 runs two trainings at a time (quality
# figures are deterministic; step times of concurrent runs share the machine). --quick keeps
# the run time bounded: fewer cap candidates and a three-point frontier.
# The report (markdown, also DIR/report.md) is printed at the end; paste it into
# docs/benchmarks.md with the machine's load average.
set -euo pipefail

MOK=""
STEPS=300
EVAL_EVERY=100
OUT=runs/bench_kittens
CAP_MB=64
TPS_STEPS=10
JOBS=1
QUICK=0
ONLY=""
CONFIG=experiments/quickstart.yaml
EXTRA_FRONTIER=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --mok) MOK="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --eval-every) EVAL_EVERY="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --cap-mb) CAP_MB="$2"; shift 2 ;;
    --tps-steps) TPS_STEPS="$2"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --only) ONLY="$2"; shift 2 ;;
    --frontier) EXTRA_FRONTIER+=("$2"); shift 2 ;;
    -h|--help) sed -n 2,17p "$0"; exit 0 ;;
    *) echo "bench_kittens: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ -z $MOK ]]; then
  for m in build/app/mok build/app/cli/mok; do [[ -x $m ]] && { MOK=$m; break; }; done
fi
[[ -n $MOK && -x $MOK ]] || { echo "bench_kittens: mok not found (build the mok target, or pass --mok)" >&2; exit 2; }
mkdir -p "$OUT"
DB="$OUT/bench.db"
BATCH=16

# start NAME STEPS EVAL SET... : runs one training in the background unless NAME.json exists.
PIDS=()
start() {
  local name="$1" steps="$2" eval="$3"; shift 3
  [[ -s "$OUT/$name.json" ]] && return 0
  local sets=(--set "train.steps=$steps" --set "train.eval_every=$eval" --set "logging.checkpoint_dir=$OUT/checkpoints")
  for s in "$@"; do sets+=(--set "$s"); done
  while [[ ${#PIDS[@]} -ge $JOBS ]]; do wait "${PIDS[0]}" || true; PIDS=("${PIDS[@]:1}"); done
  echo "run $name: $MOK train $CONFIG ${sets[*]}" >&2
  ( "$MOK" train "$CONFIG" --db "$DB" --json --quiet "${sets[@]}" > "$OUT/$name.out" 2> "$OUT/$name.err" || true
    tail -n 1 "$OUT/$name.out" > "$OUT/$name.json.tmp" && mv "$OUT/$name.json.tmp" "$OUT/$name.json" ) &
  PIDS+=($!)
}
finish() { for p in "${PIDS[@]}"; do wait "$p" || true; done; PIDS=(); }
field() { python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1])).get(sys.argv[2], "nan"))
except Exception: print("nan")' "$OUT/$1.json" "$2"; }
pct() { python3 -c 'import sys
a,b=float(sys.argv[1]),float(sys.argv[2])
print(f"{100*a/b:.1f}%" if b==b and a==a and b else "n/a")' "$1" "$2"; }
delta() { python3 -c 'import sys
a,b=float(sys.argv[1]),float(sys.argv[2])
print(f"{100*(a/b-1):+.2f}%" if b==b and a==a and b else "n/a")' "$1" "$2"; }
# val_at NAME METRIC STEP: a metric row of the run from the store.
val_at() { python3 - "$DB" "$(field "$1" run_id)" "$2" "$3" <<'EOF'
import sqlite3, sys
db, run, name, step = sys.argv[1:]
try:
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    r = c.execute("select m.value from metrics m join metric_names n on n.id = m.name_id "
                  "where m.run_id = ? and n.name = ? and m.step = ?", (int(run), name, int(step))).fetchone()
    print(r[0] if r else "nan")
except Exception:
    print("nan")
EOF
}

REPORT="$OUT/report.md"
: > "$REPORT"
say() { echo "$*" | tee -a "$REPORT"; }

LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
say "Machine: $(uname -m), $(nproc) cores, load average $LOAD at start; $(date -u +%Y-%m-%d)."
say ""

# --- equal batch -------------------------------------------------------------------------
if [[ -z $ONLY || $ONLY == equal ]]; then
  start exact "$STEPS" "$EVAL_EVERY" kittens.mode=exact "train.batch=$BATCH"
  start kitten "$STEPS" "$EVAL_EVERY" kittens.mode=kitten "train.batch=$BATCH"
  finish
  say "### Equal batch ($BATCH × 128 tokens, $STEPS steps)"
  say ""
  say "\`tools/bench_kittens.sh --steps $STEPS --eval-every $EVAL_EVERY\` (runs \`$MOK train $CONFIG --set train.steps=$STEPS --set train.eval_every=$EVAL_EVERY --set kittens.mode=exact|kitten\`)"
  say ""
  say "| metric | exact | kitten | kitten vs exact |"
  say "|---|---|---|---|"
  for f in peak_saved_activation_bytes peak_bytes tokens_per_s; do
    e=$(field exact $f); k=$(field kitten $f)
    say "| $f | $e | $k | $(pct "$k" "$e") |"
  done
  for ((s = EVAL_EVERY; s <= STEPS; s += EVAL_EVERY)); do
    for m in val/bpb val/ppl; do
      e=$(val_at exact $m $s); k=$(val_at kitten $m $s)
      say "| $m at step $s | $e | $k | $(delta "$k" "$e") |"
    done
  done
  say ""
fi

# --- largest batch under a saved-activation cap ------------------------------------------
if [[ -z $ONLY || $ONLY == cap ]]; then
  CAP=$((CAP_MB * 1024 * 1024))
  CANDIDATES=(8 16 24 32 48 64 96 128)
  [[ $QUICK == 1 ]] && CANDIDATES=(8 16 32 48 64 96)
  say "### Largest batch under ${CAP_MB} MiB of saved activations"
  say ""
  say "Saved bytes from 2-step runs per batch; tokens/s from a ${TPS_STEPS}-step run at the largest batch that fits."
  say ""
  say "| mode | largest batch | peak saved bytes | tokens/s |"
  say "|---|---|---|---|"
  for mode in exact kitten; do
    best=0
    for b in "${CANDIDATES[@]}"; do
      start "cap-$mode-b$b" 2 2 "kittens.mode=$mode" "train.batch=$b" "train.eval_batches=1"
      finish
      bytes=$(field "cap-$mode-b$b" peak_saved_activation_bytes)
      python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)' "$bytes" "$CAP" || break
      best=$b
    done
    tps=nan; bytes=nan
    if [[ $best -gt 0 ]]; then
      start "tps-$mode-b$best" "$TPS_STEPS" "$TPS_STEPS" "kittens.mode=$mode" "train.batch=$best" "train.eval_batches=1"
      finish
      tps=$(field "tps-$mode-b$best" tokens_per_s); bytes=$(field "tps-$mode-b$best" peak_saved_activation_bytes)
    fi
    say "| $mode | $best | $bytes | $tps |"
  done
  say ""
fi

# --- frontier ----------------------------------------------------------------------------
# Each entry: "name|set set …". Besides the kitten defaults, every linear input uses one
# method (mode custom) and the elementwise tensors are kept 8-bit (no recompute), so only
# the treatment of linear inputs varies between the custom points.
if [[ -z $ONLY || $ONLY == frontier ]]; then
  C="kittens.mode=custom kittens.elementwise=lowbit kittens.bits=8"
  FRONTIER=(
    "lowbit4|kittens.mode=kitten"
    "rsvd16|$C kittens.method=rsvd kittens.rank=16"
    "sketch16|$C kittens.method=sketch kittens.rank=16"
  )
  [[ $QUICK == 1 ]] || FRONTIER+=(
    "subspace16|$C kittens.method=subspace kittens.rank=16"
    "lowbit8|$C kittens.method=lowbit"
    "rsvd8|$C kittens.method=rsvd kittens.rank=8"
    "rsvd32|$C kittens.method=rsvd kittens.rank=32"
    "subspace32|$C kittens.method=subspace kittens.rank=32"
    "sketch32|$C kittens.method=sketch kittens.rank=32"
  )
  FRONTIER+=("${EXTRA_FRONTIER[@]}")
  for entry in "${FRONTIER[@]}"; do
    name=${entry%%|*}
    IFS=$'\x1f' read -r -a sets <<<"$(python3 -c 'import shlex,sys; print("\x1f".join(shlex.split(sys.argv[1])))' "${entry#*|}")"
    # lowbit4 is the kitten run of the equal-batch comparison.
    if [[ $name == lowbit4 && -s $OUT/kitten.json ]]; then cp "$OUT/kitten.json" "$OUT/f-$name.json"; fi
    start "f-$name" "$STEPS" "$STEPS" "${sets[@]}" "train.batch=$BATCH"
  done
  finish
  [[ -s $OUT/exact.json ]] || { start exact "$STEPS" "$EVAL_EVERY" kittens.mode=exact "train.batch=$BATCH"; finish; }
  say "### Quality / memory frontier ($STEPS steps, batch $BATCH; lowbit4 = kitten defaults; the others: one method on every linear input, elementwise 8-bit)"
  say ""
  say "| linear inputs | saved bytes | of exact | val/bpb | vs exact | val/ppl | vs exact |"
  say "|---|---|---|---|---|---|---|"
  EB=$(field exact peak_saved_activation_bytes); EBPB=$(field exact val_bpb); EPPL=$(field exact val_ppl)
  say "| exact (mode exact) | $EB | 100% | $EBPB | | $EPPL | |"
  for entry in "${FRONTIER[@]}"; do
    name=${entry%%|*}
    b=$(field "f-$name" peak_saved_activation_bytes); bpb=$(field "f-$name" val_bpb); ppl=$(field "f-$name" val_ppl)
    say "| $name | $b | $(pct "$b" "$EB") | $bpb | $(delta "$bpb" "$EBPB") | $ppl | $(delta "$ppl" "$EPPL") |"
  done
  say ""
fi
say "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
echo "report: $REPORT" >&2
