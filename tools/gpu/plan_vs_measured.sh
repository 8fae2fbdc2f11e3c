#!/usr/bin/env bash
# Planned against measured peak memory on one GPU, for every configuration `mok plan` says
# fits ONE card of each capacity: for each config and cap, training and generation, the
# config as it is when it fits, else every option of the plan's advice that fits without
# more cards (docs/memory_planning.md). Each runs under the cap (parallel.device_memory_limit):
#   training:   `mok train` for STEPS steps; measured = peak_device_bytes of its --json;
#   generation: `mok generate` of GEN_BATCH sequences (the option's --batch when it has one),
#               prompts of PROMPT validation tokens, TOKENS new tokens, from a checkpoint of
#               the same config (the training run's when it ran, else one step without the cap);
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
#   ACTIVITIES="train generate"  (train alone: no checkpoints are written, which for models of
#   billions of parameters is most of the time)
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
NO_CHECKPOINTS=()
[[ " $ACTIVITIES " == *" generate "* ]] || NO_CHECKPOINTS=(--no-checkpoints)
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

# 2. Runs. A checkpoint per (config, option sets) for generation: the training run's when it
#    ran under its cap, else one step without a cap; those of one (config, cap) are removed
#    before the next.
declare -A CHECKPOINT
run_train() {  # name config cap sets...: mok train's JSON in OUT_DIR/name.json
  local name="$1" config="$2" cap="$3"; shift 3
  timeout "${MOK_TIMEOUT:-600}" "$MOK" train "$config" --json --quiet "${NO_CHECKPOINTS[@]}" \
    --db "$SCRATCH/$name.db" "${DEVICE_SETS[@]}" "${EXTRA_ARGS[@]}" --set "train.steps=$STEPS" --set train.eval_every=100000 \
    --set train.eval_batches=1 --set "logging.checkpoint_dir=$SCRATCH/ckpt-$name" \
    ${cap:+--set "parallel.device_memory_limit=$cap"} "$@" > "$OUT_DIR/$name.json" 2> "$OUT_DIR/$name.err"
}
checkpoint_of() {  # JSON file → its "checkpoint"
  python3 -c 'import json,sys
try: print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]).get("checkpoint", ""))
except Exception: print("")' "$1"
}
block=""
while IFS=$'\t' read -r name config cap activity _planned sets flags; do
  if [ "$block" != "$config|$cap" ]; then  # checkpoints are GBs: keep one block's at a time
    block="$config|$cap"
    rm -rf "$SCRATCH"/ckpt-*
    CHECKPOINT=()
  fi
  [ "$sets" = - ] && sets=""
  [ "$flags" = - ] && flags=""
  set_args=()
  for s in $sets; do set_args+=(--set "$s"); done
  key="$config|$sets"
  if [ "$activity" = train ]; then
    run_train "$name" "$config" "$cap" "${set_args[@]}"
    echo "$name: exit $?"
    ck="$(checkpoint_of "$OUT_DIR/$name.json")"
    [ -n "$ck" ] && CHECKPOINT[$key]="$ck"
    continue
  fi
  ck="${CHECKPOINT[$key]:-}"
  if [ -z "$ck" ]; then
    run_train "ckpt_$name" "$config" "" "${set_args[@]}" --set train.steps=1 --set train.batch=1 \
      --set train.grad_accum=1
    ck="$(checkpoint_of "$OUT_DIR/ckpt_$name.json")"
    [ -n "$ck" ] && CHECKPOINT[$key]="$ck"
  fi
  if [ -z "$ck" ]; then
    echo "$name: no checkpoint ($(tail -n 1 "$OUT_DIR/ckpt_$name.err" 2>/dev/null | cut -c1-160))"
    continue
  fi
  read -r -a flag_args <<< "$flags"
  # The checkpoint's config is the option's; device, cap and generation flags as planned.
  timeout "${MOK_TIMEOUT:-600}" "$MOK" generate "$ck" --json --quiet --batch "$GEN_BATCH" \
    --prompts-from-data "$PROMPT" --tokens "$TOKENS" "${DEVICE_SETS[@]}" "${set_args[@]}" \
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
