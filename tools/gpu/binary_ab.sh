#!/usr/bin/env bash
# One mok build against another on the same GPU, for a change that must keep results and
# move bytes or time: BASE and NEW are two `mok` binaries (tools/gpu/pack.sh packs NEW with
# its libraries; BASE may be an older build's `mok`, stripped).
#   tools/gpu/binary_ab.sh BIN_DIR BASE_MOK [OUT_DIR]
# Parts (PARTS=generate,train,sampling), from CHECKPOINT (else the 64 × 256 MoE trained for
# CKPT_STEPS=40 steps by NEW):
#   generate  `mok generate` of 64
#             sequences by both, bf16, greedy and sampled: on one GPU, and over two GPU ranks
#             with classic, MoK shipping rows and MoK with every MoE layer resident. Prints
#             whether the texts are the same, tokens/s, and the weights' and the peak's bytes.
#   train     two GPU ranks training the same model with MoK in bf16, shadow copies always and
#             auto, TRAIN_STEPS steps, by both: losses, gradient norms and validation losses
#             bitwise the same or not, and the bytes between ranks per step by purpose.
#   sampling  512 sequences × 128 new tokens on one GPU, sampled, by both: tokens/s.
# On a machine of one GPU the two ranks share cuda:0 (parallel.comm peer, parallel.gpus 0,0).
set -uo pipefail
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off on these machines
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$(cd "${1:?BIN_DIR}" && pwd)"
BASE="$(cd "$(dirname "${2:?BASE_MOK}")" && pwd)/$(basename "$2")"
OUT_DIR="${3:-${OUT:-/tmp/mok-ab}}"
CONFIG="${CONFIG:-experiments/gpu/moe_64x256.yaml}"
PARTS="${PARTS:-generate,train,sampling}"
want() { [[ ",$PARTS," == *",$1,"* ]]; }
mkdir -p "$OUT_DIR/ab"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
R="$OUT_DIR/ab"
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
SCRATCH="$(mktemp -d)"
trap 'tar czf "$OUT_DIR/ab.tgz" -C "$OUT_DIR" ab && rm -rf "$R"; rm -rf "$SCRATCH"' EXIT
trap 'exit 143' TERM INT  # a timeout still packs what ran
cd "$ROOT"
NEW="$BIN/mok"
TWO=(--set parallel.comm=peer --set parallel.ranks=2)
[ "$(nvidia-smi -L 2>/dev/null | wc -l)" -lt 2 ] && TWO+=(--set parallel.gpus=0,0)

# The checkpoint of the generate and sampling parts: CHECKPOINT, else NEW trains one.
C="${CHECKPOINT:-}"
if [ -z "$C" ] && { want generate || want sampling; }; then
  steps="${CKPT_STEPS:-40}"
  timeout 300 "$NEW" train "$CONFIG" --db "$SCRATCH/ck.db" --json --quiet --set parallel.device=cuda \
    --set train.steps="$steps" --set logging.checkpoint_dir="$SCRATCH/ck" > "$R/ckpt_train.json" 2>&1
  echo "checkpoint: $steps steps, exit $?"
  C="$(ls -d "$SCRATCH/ck"/*/ 2>/dev/null | head -n 1)"
fi

if want generate; then
  for sampling in greedy sampled; do
    temp=(); [ "$sampling" = greedy ] && temp=(--temperature 0)
    for v in 1gpu classic mok_ship mok_resident; do
      case "$v" in
        1gpu) extra=() ;;
        classic) extra=(--ranks 2 "${TWO[@]}" --dispatcher classic) ;;
        mok_ship) extra=(--ranks 2 "${TWO[@]}" --dispatcher mok --resident-experts off) ;;
        mok_resident) extra=(--ranks 2 "${TWO[@]}" --dispatcher mok --resident-experts all) ;;
      esac
      for side in base new; do
        exe="$NEW"; [ "$side" = base ] && exe="$BASE"
        name="gen_${sampling}_${v}_$side"
        timeout 200 "$exe" generate "$C" --batch 64 --tokens 64 --prompts-from-data 128 --json --quiet \
          --set parallel.device=cuda --set train.precision=bf16 "${temp[@]}" "${extra[@]}" > "$R/$name.json" 2> "$R/$name.err"
        rc=$?; [ "$rc" -ne 0 ] && { echo "$name: exit $rc"; tail -n 2 "$R/$name.err"; }
      done
    done
  done
fi

if want train; then
  for shadow in always auto; do
    for side in base new; do
      exe="$NEW"; [ "$side" = base ] && exe="$BASE"
      name="train_${shadow}_$side"
      timeout 200 "$exe" train "$CONFIG" --db "$SCRATCH/$name.db" --json --quiet --set parallel.device=cuda \
        --set train.precision=bf16 --set train.steps="${TRAIN_STEPS:-12}" --set routing.dispatcher=mok \
        --set routing.shadow="$shadow" --set logging.checkpoint_dir="$SCRATCH/$name.ck" "${TWO[@]}" \
        > "$R/$name.json" 2> "$R/$name.err"
      rc=$?; [ "$rc" -ne 0 ] && { echo "$name: exit $rc"; tail -n 2 "$R/$name.err"; }
      "$NEW" runs export-csv 1 --db "$SCRATCH/$name.db" --out "$R/$name.csv" > /dev/null 2>&1
    done
  done
fi

if want sampling; then
  for round in 1 2; do
    for side in base new; do
      exe="$NEW"; [ "$side" = base ] && exe="$BASE"
      name="sampling_${side}_$round"
      timeout 200 "$exe" generate "$C" --batch 512 --tokens 128 --prompts-from-data 128 --json --quiet \
        --set parallel.device=cuda --set train.precision=bf16 > "$R/$name.json" 2> "$R/$name.err"
      rc=$?; [ "$rc" -ne 0 ] && { echo "$name: exit $rc"; tail -n 2 "$R/$name.err"; }
    done
  done
fi

python3 - "$R" "$PARTS" <<'PY'
import csv, glob, json, os, sys
r, parts = sys.argv[1], sys.argv[2].split(",")
def last_json(name):
    try:
        return json.loads(open(f"{r}/{name}.json").read().strip().splitlines()[-1])
    except Exception:
        return None
def mib(x):
    return f"{x / 2**20:9.1f}" if isinstance(x, (int, float)) else f"{'-':>9s}"
if "generate" in parts:
    print("generate, bf16, 64 sequences × 64 new bytes: base against new")
    print(f"{'sampling':8s} {'variant':13s} {'same texts':>10s} {'tok/s base':>10s} {'tok/s new':>10s} "
          f"{'weights MiB base':>16s} {'new':>9s} {'peak MiB base':>13s} {'new':>9s} {'resident MiB base':>17s} {'new':>9s}")
    for sampling in ("greedy", "sampled"):
        for v in ("1gpu", "classic", "mok_ship", "mok_resident"):
            b, n = last_json(f"gen_{sampling}_{v}_base"), last_json(f"gen_{sampling}_{v}_new")
            if not b or not n:
                print(f"{sampling:8s} {v:13s} {'failed':>10s}")
                continue
            same = f"{sum(x == y for x, y in zip(b['texts'], n['texts']))} of {len(b['texts'])}"
            print(f"{sampling:8s} {v:13s} {same:>10s} "
                  f"{b['tokens_per_s']:10.0f} {n['tokens_per_s']:10.0f} {mib(b.get('parameter_bytes')):>16s} "
                  f"{mib(n.get('parameter_bytes'))} {mib(b['peak_device_bytes']):>13s} {mib(n['peak_device_bytes'])} "
                  f"{mib(b['resident_bytes']):>17s} {mib(n['resident_bytes'])}")
if "train" in parts:
    exact = ("train/loss", "train/grad_norm", "val/loss")
    def series(name):
        rows = {}
        try:
            for row in csv.DictReader(open(f"{r}/{name}.csv")):
                rows.setdefault(row["name"], []).append(row["value"])
        except Exception:
            pass
        return rows
    print("train, two ranks, MoK, bf16: base against new")
    for shadow in ("always", "auto"):
        b, n = series(f"train_{shadow}_base"), series(f"train_{shadow}_new")
        if not b or not n:
            print(f"  shadow {shadow}: failed")
            continue
        verdict = ", ".join(f"{m} {'bitwise the same' if b.get(m) == n.get(m) and b.get(m) else 'differ'} "
                            f"({len(b.get(m, []))} values)" for m in exact)
        print(f"  shadow {shadow}: {verdict}")
        for m in sorted(k for k in set(b) | set(n) if k.startswith("comm/") and k.endswith("_bytes")):
            fb = [float(x) for x in b.get(m, [])]
            fn = [float(x) for x in n.get(m, [])]
            if fb or fn:
                mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
                print(f"    {m:28s} base {mean(fb):14.0f}   new {mean(fn):14.0f} a step")
        for side, s in (("base", b), ("new", n)):
            tps = [float(x) for x in s.get("perf/tokens_per_s", [])][3:]
            if tps:
                print(f"    tokens/s {side}: {sorted(tps)[len(tps) // 2]:.0f} (median after 3 steps)")
if "sampling" in parts:
    print("sampling: 512 sequences × 128 new bytes, one GPU, bf16")
    for side in ("base", "new"):
        runs = [last_json(f"sampling_{side}_{k}") for k in (1, 2)]
        print(f"  {side}: " + ", ".join(f"{x['tokens_per_s']:.0f} tokens/s (decode {x['decode_s']:.3f} s)" if x else "failed"
                                     for x in runs))
PY
echo "written under $OUT_DIR (ab.tgz)"
