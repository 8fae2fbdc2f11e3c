#!/usr/bin/env bash
# Fingerprints of short training runs, so that a change meant to leave results alone can
# show it did: run before and after, compare the lines. Per experiment two hashes over the
# metric values the run stores: "results" (losses, bits per byte, gradient norms, expert
# load, kitten ranks and errors, bytes between ranks) and "memory" (the mem/* figures, which
# a change of buffer layout may move without changing any result). Wall-time and throughput
# figures are left out.
#   tools/fingerprint_runs.sh [MOK_BINARY] [CSV_DIR]   (default build/app/mok; CSVs kept in CSV_DIR)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOK="${1:-$ROOT/build/app/mok}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
KEEP="${2:-}"
[ -n "$KEEP" ] && mkdir -p "$KEEP"
cd "$ROOT"

common=(--set train.steps=12 --set train.eval_every=6 --set train.eval_batches=2
        --set logging.checkpoint_dir="$TMP/ckpt" --set logging.progress=false)
run() {  # name yaml [--set ...]
  local name="$1" yaml="$2"; shift 2
  local db="$TMP/$name.db"
  "$MOK" train "$yaml" --db "$db" "${common[@]}" "$@" --json > "$TMP/$name.json" 2>"$TMP/$name.err" ||
    { echo "$name: FAILED"; cat "$TMP/$name.err"; return; }
  "$MOK" runs export-csv 1 --db "$db" --out "$TMP/$name.csv" > /dev/null 2>&1
  [ -n "$KEEP" ] && cp "$TMP/$name.csv" "$KEEP/"
  local results memory n_results n_memory
  results=$(awk -F, 'NR > 1 && $4 !~ /^(perf|mem)\// && $4 !~ /wall/ { print $1, $4, $5 }' "$TMP/$name.csv")
  memory=$(awk -F, 'NR > 1 && $4 ~ /^mem\// { print $1, $4, $5 }' "$TMP/$name.csv")
  n_results=$(printf '%s\n' "$results" | wc -l)
  n_memory=$(printf '%s\n' "$memory" | wc -l)
  printf '%-18s results %s (%4d values)   memory %s (%4d values)\n' "$name" \
    "$(printf '%s\n' "$results" | sha256sum | cut -c1-16)" "$n_results" \
    "$(printf '%s\n' "$memory" | sha256sum | cut -c1-16)" "$n_memory"
}

run moe_classic       experiments/quickstart.yaml
run moe_shared_cap    experiments/quickstart.yaml --set model.shared_expert=true --set routing.capacity_factor=1.0 \
                      --set model.moe_layers=every_2
run dense             experiments/quickstart.yaml --set model.experts=0
run kitten            experiments/kittens_quickstart.yaml
run mok_2ranks        experiments/mok_kitten.yaml --set parallel.ranks=2 --set train.batch=16
run classic_2ranks    experiments/quickstart.yaml --set parallel.ranks=2
run grad_accum_thr1   experiments/quickstart.yaml --set train.grad_accum=2 --set parallel.threads=1
