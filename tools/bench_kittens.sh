#!/usr/bin/env bash
# Kitten activations benchmark: exact vs kitten settings at equal batch, the largest batch
# under a saved-activation cap, and a quality/memory frontier over methods and ranks.
#
#   tools/bench_kittens.sh [--mok build/app/cli/mok] [--steps 300] [--db runs/bench_kittens.db]
#                          [--cap-mb 64] [--quick]
#
# Every run is `mok train experiments/quickstart.yaml --json --set …` (results go into the
# run store given by --db); the script prints a table with the kitten/exact ratios side by
# side and appends rows (command, machine, date) to docs/benchmarks.md.
set -euo pipefail

MOK=build/app/cli/mok
STEPS=300
DB=runs/bench_kittens.db
CAP_MB=64
QUICK=0
CONFIG=experiments/quickstart.yaml
while [[ $# -gt 0 ]]; do
  case "$1" in
    --mok) MOK="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --db) DB="$2"; shift 2 ;;
    --cap-mb) CAP_MB="$2"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    *) echo "bench_kittens: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -x "$MOK" ]] || { echo "bench_kittens: $MOK not found (build the mok target first)" >&2; exit 2; }
mkdir -p "$(dirname "$DB")"

# run NAME BATCH SET... → prints the train --json line (last line of output)
run() {
  local name="$1" batch="$2"; shift 2
  local sets=(--set "train.steps=$STEPS" --set "train.batch=$batch" --set "train.eval_every=$STEPS")
  for s in "$@"; do sets+=(--set "$s"); done
  "$MOK" train "$CONFIG" --db "$DB" --json "${sets[@]}" 2>/dev/null | tail -n 1
}
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2], "nan"))' "$1" "$2"; }
ratio() { python3 -c 'import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f"{100*a/b:.1f}%" if b else "n/a")' "$1" "$2"; }

BATCH=16
echo "== equal batch ($BATCH), $STEPS steps"
EXACT=$(run exact $BATCH kittens.mode=exact)
KITTEN=$(run kitten $BATCH kittens.mode=kitten)
printf "%-34s %14s %14s %9s\n" metric exact kitten ratio
for f in peak_saved_activation_bytes peak_bytes val_bpb val_ppl val_loss tokens_per_s wall_s; do
  e=$(field "$EXACT" $f); k=$(field "$KITTEN" $f)
  printf "%-34s %14s %14s %9s\n" "$f" "$e" "$k" "$(ratio "$k" "$e")"
done

echo "== largest batch under a saved-activation cap of ${CAP_MB} MB"
CAP=$((CAP_MB * 1024 * 1024))
declare -A BEST
for mode in exact kitten; do
  BEST[$mode]=0
  for b in 4 8 12 16 24 32 48 64 96 128; do
    out=$("$MOK" train "$CONFIG" --db "$DB" --json --set train.steps=2 --set train.eval_every=2 \
          --set train.batch=$b --set kittens.mode=$mode 2>/dev/null | tail -n 1)
    bytes=$(field "$out" peak_saved_activation_bytes)
    python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)' "$bytes" "$CAP" || break
    BEST[$mode]=$b
  done
  tps=nan
  if [[ ${BEST[$mode]} -gt 0 ]]; then
    out=$(run "cap-$mode" "${BEST[$mode]}" kittens.mode=$mode); tps=$(field "$out" tokens_per_s)
  fi
  printf "%-8s largest batch %4s  tokens/s %s\n" "$mode" "${BEST[$mode]}" "$tps"
done

echo "== frontier: method × rank (linear inputs only, elementwise exact)"
printf "%-22s %14s %10s %10s\n" setting saved_bytes val_bpb ratio_mem
FRONTIER=("lowbit bits=8" "lowbit bits=4" "sketch rank=16" "rsvd rank=16" "subspace rank=16")
[[ $QUICK == 1 ]] || FRONTIER+=("sketch rank=32" "rsvd rank=8" "rsvd rank=32" "subspace rank=32" "subspace rank=8")
EB=$(field "$EXACT" peak_saved_activation_bytes)
for s in "${FRONTIER[@]}"; do
  read -r method kv <<<"$s"
  out=$(run "$s" $BATCH kittens.mode=custom kittens.method=$method "kittens.${kv}" kittens.elementwise=exact)
  b=$(field "$out" peak_saved_activation_bytes)
  printf "%-22s %14s %10s %10s\n" "$s" "$b" "$(field "$out" val_bpb)" "$(ratio "$b" "$EB")"
done

# Rows for docs/benchmarks.md
DOC=docs/benchmarks.md
[[ -f $DOC ]] || printf "# Benchmarks\n\n" > "$DOC"
{
  echo ""
  echo "## Kitten activations ($(date -u +%Y-%m-%d), $(uname -m), $(nproc) cores)"
  echo ""
  echo "Command: \`tools/bench_kittens.sh --steps $STEPS\` (quickstart shape, batch $BATCH)"
  echo ""
  echo "| metric | exact | kitten | kitten/exact |"
  echo "|---|---|---|---|"
  for f in peak_saved_activation_bytes val_bpb val_ppl tokens_per_s wall_s; do
    e=$(field "$EXACT" $f); k=$(field "$KITTEN" $f)
    echo "| $f | $e | $k | $(ratio "$k" "$e") |"
  done
  echo "| largest batch under ${CAP_MB} MB saved | ${BEST[exact]} | ${BEST[kitten]} | |"
} >> "$DOC"
echo "rows appended to $DOC"
