#!/usr/bin/env bash
# Short training runs of the benchmark models under two values of one kernel switch (an
# environment variable such as MOK_ATTENTION or MOK_GROUPED_KERNEL), the second value twice for
# bitwise repeatability: median step time, the speed ratio, losses and peak reserved memory.
#   tools/gpu/switch_compare.sh VAR BASE NEW [BIN_DIR] [OUT_DIR] < CASES      STEPS (30)
# CASES: one run per line, "name config [mok train options]", config from experiments/gpu/.
# BASE and NEW are values, or LABEL=VALUE where the value is no name for a file (a library
# path: LD_LIBRARY_PATH with system=build-gpu pip=build-gpu:/…/cudnn/lib).
# Each run leaves OUT_DIR/NAME-LABEL.{json,err,csv} (the repeat: NAME-NEW_again).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
VAR="$1"
label_of() { [[ "$1" == *=* ]] && echo "${1%%=*}" || echo "$1"; }
value_of() { [[ "$1" == *=* ]] && echo "${1#*=}" || echo "$1"; }
BASE="$(label_of "$2")" NEW="$(label_of "$3")"
declare -A VALUE=(["$BASE"]="$(value_of "$2")" ["$NEW"]="$(value_of "$3")")
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$(cd "${4:-$ROOT/build-gpu}" && pwd)"
OUT_DIR="${5:-${OUT:-/tmp/mok-switch}}"
STEPS="${STEPS:-30}"
mkdir -p "$OUT_DIR"
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT
cd "$ROOT"

CASES=()
while read -r case yaml sets; do
  [ -n "$case" ] || continue
  CASES+=("$case")
  for variant in "$BASE" "$NEW" "${NEW}_again"; do
    name="$case-$variant"
    env "$VAR=${VALUE[${variant%_again}]}" timeout 240 "$BIN/mok" train "experiments/gpu/$yaml.yaml" --json --quiet \
      --no-checkpoints --db "$SCRATCH/$name.db" --set parallel.device=cuda --set "train.steps=$STEPS" \
      --set train.eval_every=100000 --set "logging.checkpoint_dir=$SCRATCH/ckpt-$name" $sets \
      < /dev/null > "$OUT_DIR/$name.json" 2> "$OUT_DIR/$name.err"
    echo "$name: exit $?; $(grep -v '^$' "$OUT_DIR/$name.err" | tail -n 2 | cut -c1-300)"
    "$BIN/mok" runs export-csv 1 --db "$SCRATCH/$name.db" --out "$OUT_DIR/$name.csv" < /dev/null > /dev/null 2>&1
  done
done

python3 - "$OUT_DIR" "$BASE" "$NEW" "${CASES[@]}" <<'PY'
import csv, json, statistics, sys
out, base, new, cases = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def rows(name):
    try:
        return list(csv.DictReader(open(f"{out}/{name}.csv")))
    except OSError:
        return []
def series(rs, metric):
    return {int(r["step"]): float(r["value"]) for r in rs if r["name"] == metric}
def peak(name):
    try:
        return json.loads(open(f"{out}/{name}.json").read().strip().splitlines()[-1]).get("peak_reserved_bytes", 0) / 2**30
    except Exception:
        return float("nan")
warm = 5
med = lambda s: statistics.median([v for k, v in s.items() if k > warm]) if len(s) > warm else float("nan")
for case in cases:
    b, n, again = (rows(f"{case}-{v}") for v in (base, new, f"{new}_again"))
    lb, ln, la = (series(r, "train/loss") for r in (b, n, again))
    if not lb or not ln:
        print(f"{case}: missing runs"); continue
    mb, mn = (med(series(r, "perf/step_ms")) for r in (b, n))
    last = max(lb)
    diff = max(abs(ln[k] - lb[k]) / abs(lb[k]) for k in lb if k in ln)
    print(f"{case}: step ms {base} {mb:.2f} {new} {mn:.2f} (×{mb / mn:.3f} tokens/s); "
          f"loss at step {last} {base} {lb[last]:.5f} {new} {ln.get(last, float('nan')):.5f}; "
          f"max rel. loss diff {diff:.2e}; {new} repeat bitwise: {ln == la}; "
          f"peak reserved GiB {base} {peak(f'{case}-{base}'):.2f} {new} {peak(f'{case}-{new}'):.2f}")
PY
