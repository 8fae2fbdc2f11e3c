#!/usr/bin/env bash
# MoK vs classic dispatch benchmark, both regimes, one command:
#   tools/bench_mok.sh                 # local ranks R = 2, 4 and, when mpirun exists, 2 MPI processes
# Environment: BUILD (build folder, default build), STEPS (timed steps, default 5),
# OUT (results folder, default $BUILD/bench_mok), CONFIGS (default the two presets).
# Writes $OUT/results.jsonl (one JSON object per row) and $OUT/table.txt, and prints the
# table with ratios against classic (bytes, training and inference speed-up).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
STEPS=${STEPS:-5}
OUT=${OUT:-$BUILD/bench_mok}
CONFIGS=${CONFIGS:-"experiments/mok_coarse.yaml experiments/mok_kitten.yaml"}
BIN=$BUILD/tools/bench/bench_mok
if [ -z "${NO_BUILD:-}" ]; then cmake --build "$BUILD" --target bench_mok; fi
mkdir -p "$OUT"
: > "$OUT/results.jsonl"
{
  echo "# bench_mok $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname), $(nproc) cores"
  echo "## local ranks"
  "$BIN" --ranks 2,4 --links nvlink,ib --steps "$STEPS" --json "$OUT/results.jsonl" $CONFIGS
  if command -v mpirun >/dev/null 2>&1; then
    echo "## 2 MPI processes"
    MPIFLAGS="--oversubscribe --bind-to none"
    [ "$(id -u)" = 0 ] && MPIFLAGS="$MPIFLAGS --allow-run-as-root"
    OMPI_MCA_btl_vader_single_copy_mechanism=none mpirun -np 2 $MPIFLAGS \
      "$BIN" --links nvlink,ib --steps "$STEPS" --json "$OUT/results.jsonl" $CONFIGS
  else
    echo "## 2 MPI processes: skipped (no mpirun)"
  fi
} | tee "$OUT/table.txt"
