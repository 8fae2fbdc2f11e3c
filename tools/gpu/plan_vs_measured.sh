#!/usr/bin/env bash
# Planned against measured peak memory on one GPU, for every configuration `mok plan` says
# fits ONE card of each capacity: for each config and cap, training and generation, the
# config as it is when it fits, else every option of the plan's advice that fits without
# more cards (docs/memory_planning.md). Each runs under the cap (parallel.device_memory_limit):
#   training:   `mok train` for STEPS steps; measured = peak_device_bytes of its --json;
#   generation: `mok generate --untrained` of GEN_BATCH sequences (the option's --batch when it
#               has one), prompts of PROMPT validation tokens, TOKENS new tokens, with the
#               config's initial weights (no checkpoint: a 7B one is tens of GB);
#               measured = peak_device_bytes of its --json.
# Prints config, cap, activity, option, planned and measured MiB and their difference; also
# the peak of the run's live blocks (the tensors at their size class: what the
# cap binds, as the allocator gives its cache back before a request fails) and its reserved
# peak (cache included), with the plan against each.
#   tools/gpu/plan_vs_measured.sh BIN_DIR [OUT_DIR]     (BIN_DIR from tools/gpu/pack.sh)
#   CONFIGS="experiments/mok_7b.yaml experiments/mok_27b.yaml experiments/mok_16gb.yaml"
#   CAPS="16GiB 24GiB"  STEPS=3  GEN_BATCH=8  PROMPT=32  TOKENS=16  MOK_TIMEOUT=600
#   DEVICE=cuda  (cpu: the same runs on the CPU, measured = peak_bytes; with EXTRA to shrink
#   the models and small CAPS, a check of this script where no GPU is)
#   EXTRA="--set model.layers=2 ..."  (added to every plan, train and generate)
#   ACTIVITIES="train generate"  (either alone; training writes no checkpoints)
set -uo pipefail
export NCCL_NVLS_ENABLE=0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$(cd "${1:-$ROOT/build-gpu}" && pwd)"
OUT_DIR="${2:-${OUT:-/tmp/mok-plan-vs-measured}}"
CONFIGS="${CONFIGS:-experiments/mok_7b.yaml experiments/mok_27b.yaml experiments/mok_16gb.yaml}"
CAPS="${CAPS:-16GiB 24GiB}"
STEPS="${STEPS:-3}"
GEN_BATCH="${GEN_BATCH:-8}"
PROMPT="${PROMPT:-32}"
TOKENS="${TOKENS:-16}"
DEVICE="${DEVICE:-cuda}"
EXTRA="${EXTRA:-}"
ACTIVITIES="${ACTIVITIES:-train generate}"
MOK="$BIN/mok"
[ -x "$MOK" ] || { echo "no mok in $BIN" >&2; exit 2; }
mkdir -p "$OUT_DIR"
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT
cd "$ROOT" || exit 2

# The device's sets: a CPU run computes in fp32 over local ranks.
DEVICE_SETS=(--set "parallel.device=$DEVICE")
[ "$DEVICE" = cpu ] && DEVICE_SETS+=(--set train.precision=fp32 --set parallel.comm=local)
read -r -a EXTRA_ARGS <<< "$EXTRA"

# 1. Plans, and the candidates each says fit one card: one line per candidate,
#    "name<TAB>config<TAB>cap<TAB>activity<TAB>planned bytes<TAB>option sets<TAB>option flags"
#    (sets and flags space-separated, "-" for none).
: > "$OUT_DIR/candidates.tsv"
for config in $CONFIGS; do
  base="$(basename "$config" .yaml)"
  for cap in $CAPS; do
    for activity in $ACTIVITIES; do
      plan="$OUT_DIR/plan_${base}_${cap}_${activity}.json"
      gen_args=()
      [ "$activity" = generate ] && gen_args=(--generate --batch "$GEN_BATCH" --prompt-tokens "$PROMPT" --tokens "$TOKENS")
      "$MOK" plan "$config" --json --device-memory "$cap" "${DEVICE_SETS[@]}" "${EXTRA_ARGS[@]}" "${gen_args[@]}" \
        2> "$plan.err" | tail -n 1 > "$plan"
      python3 - "$plan" "$base" "$config" "$cap" "$activity" >> "$OUT_DIR/candidates.tsv" <<'PY'
import json, sys
path, base, config, cap, activity = sys.argv[1:]
try:
    p = json.loads(open(path).read())
except Exception:
    sys.exit(0)
rows = []
if p.get("fits"):
    rows.append(("as_is", p["total_bytes"], [], []))
else:
    for i, o in enumerate(p.get("advice", [])):
        more_cards = any(s.startswith("parallel.ranks=") for s in o["sets"]) or "--ranks" in o["flags"]
        if o["fits"] and not more_cards:
            rows.append((f"option{i}", o["total_bytes"], o["sets"], o["flags"]))
for tag, total, sets, flags in rows:
    name = f"{base}_{cap}_{activity}_{tag}"
    # "-" for no sets or flags: read splits on tabs as whitespace, so a field must not be empty
    print("\t".join([name, config, cap, activity, f"{total:.0f}", " ".join(sets) or "-", " ".join(flags) or "-"]))
PY
    done
  done
done
echo "$(wc -l < "$OUT_DIR/candidates.tsv") configuration(s) fit one card; each runs under its cap"

# 2. Runs, each under its cap.
run_train() {  # name config cap sets...: mok train's JSON in OUT_DIR/name.json
  local name="$1" config="$2" cap="$3"; shift 3
  timeout "${MOK_TIMEOUT:-600}" "$MOK" train "$config" --json --quiet --no-checkpoints \
    --db "$SCRATCH/$name.db" "${DEVICE_SETS[@]}" "${EXTRA_ARGS[@]}" --set "train.steps=$STEPS" --set train.eval_every=100000 \
    --set train.eval_batches=1 --set "parallel.device_memory_limit=$cap" "$@" > "$OUT_DIR/$name.json" 2> "$OUT_DIR/$name.err"
}
while IFS=$'\t' read -r name config cap activity _planned sets flags; do
  [ "$sets" = - ] && sets=""
  [ "$flags" = - ] && flags=""
  set_args=()
  for s in $sets; do set_args+=(--set "$s"); done
  if [ "$activity" = train ]; then
    run_train "$name" "$config" "$cap" "${set_args[@]}"
    echo "$name: exit $?"
    continue
  fi
  read -r -a flag_args <<< "$flags"
  # The option's sets and flags; device, cap and generation flags as planned.
  timeout "${MOK_TIMEOUT:-600}" "$MOK" generate --untrained "$config" --json --quiet --batch "$GEN_BATCH" \
    --prompts-from-data "$PROMPT" --tokens "$TOKENS" "${DEVICE_SETS[@]}" "${EXTRA_ARGS[@]}" "${set_args[@]}" \
    --set "parallel.device_memory_limit=$cap" "${flag_args[@]}" > "$OUT_DIR/$name.json" 2> "$OUT_DIR/$name.err"
  echo "$name: exit $?"
done < "$OUT_DIR/candidates.tsv"

# 3. Planned against measured.
python3 - "$OUT_DIR" "$DEVICE" <<'PY' | tee "$OUT_DIR/summary.txt"
import json, sys
out, device = sys.argv[1], sys.argv[2]
M = 2**20
key = "peak_device_bytes" if device == "cuda" else "peak_bytes"
print(f"{'config':12s} {'cap':6s} {'activity':9s} {'option':48s} {'planned MiB':>11s} {'measured MiB':>12s} {'diff':>7s} "
      f"{'blocks MiB':>10s} {'diff':>7s} {'reserved MiB':>12s} {'diff':>7s}  status")
for line in open(f"{out}/candidates.tsv"):
    name, config, cap, activity, planned, sets, flags = line.rstrip("\n").split("\t")
    option = " ".join([w for w in sets.split() + flags.split() if w != "-"]) or "(as is)"
    try:
        r = json.loads(open(f"{out}/{name}.json").read().strip().splitlines()[-1])
    except Exception:
        r = {}
    measured = r.get(key, 0) or 0
    reserved = r.get("peak_reserved_bytes", 0) or 0
    blocks = r.get("peak_block_bytes", 0) or 0
    against = lambda m: f"{100 * (float(planned) - m) / m:+.1f}%" if m > 0 else "-"
    if measured > 0 and r.get("status", "finished") == "finished":
        status, diff, bdiff, rdiff = "ok", against(measured), against(blocks), against(reserved)
    else:
        try:
            err = open(f"{out}/{name}.err").read().strip().splitlines()[-1][:90]
        except Exception:
            err = "no result"
        status, diff, bdiff, rdiff = r.get("error", err)[:90] or err, "-", "-", "-"
    base = config.split("/")[-1].removesuffix(".yaml")
    print(f"{base:12s} {cap:6s} {activity:9s} {option[:48]:48s} {float(planned) / M:11.1f} {measured / M:12.1f} {diff:>7s} "
          f"{blocks / M:10.1f} {bdiff:>7s} {reserved / M:12.1f} {rdiff:>7s}  {status}")
PY
echo "written under $OUT_DIR"
