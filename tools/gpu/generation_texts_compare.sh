#!/usr/bin/env bash
# Which two-rank generations give one GPU's texts: the 64 × 256 MoE trained for a few steps,
# then `mok generate` of 64 sequences (64 new bytes after 128-byte prompts from the data) on
# one GPU (twice), and over two GPU ranks with classic, MoK shipping rows, MoK with every MoE
# layer resident and MoK with one layer resident. Prints, for each checkpoint × precision ×
# sampling, how many texts equal one GPU's and how many new bytes they share (mean).
#   tools/gpu/generation_texts_compare.sh [BIN_DIR] [OUT_DIR]      (BIN_DIR from tools/gpu/pack.sh)
# Settings: CKPT_STEPS=2,40  PRECISIONS=fp32,bf16  SAMPLING=greedy,sampled  CONFIG=experiments/gpu/moe_64x256.yaml
# On a machine of one GPU both ranks share cuda:0 (parallel.comm peer, parallel.gpus 0,0);
# with two, TRANSPORT=nccl puts one rank on each.
set -uo pipefail
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off on these machines
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$(cd "${1:-$ROOT/build-gpu}" && pwd)"
OUT_DIR="${2:-${OUT:-/tmp/mok-texts}}"
CONFIG="${CONFIG:-experiments/gpu/moe_64x256.yaml}"
TRANSPORT="${TRANSPORT:-peer}"
IFS=',' read -r -a CKPTS <<< "${CKPT_STEPS:-2,40}"
IFS=',' read -r -a PRECS <<< "${PRECISIONS:-fp32,bf16}"
IFS=',' read -r -a SAMPLES <<< "${SAMPLING:-greedy,sampled}"
mkdir -p "$OUT_DIR/texts"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
R="$OUT_DIR/texts"
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
SCRATCH="$(mktemp -d)"
trap 'tar czf "$OUT_DIR/texts.tgz" -C "$OUT_DIR" texts && rm -rf "$R"; rm -rf "$SCRATCH"' EXIT
trap 'exit 143' TERM INT  # a timeout still packs what ran
cd "$ROOT"
TWO=(--ranks 2 --set parallel.comm="$TRANSPORT" --set parallel.ranks=2)
[ "$TRANSPORT" = peer ] && [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -lt 2 ] && TWO+=(--set parallel.gpus=0,0)
VARIANTS=(1gpu 1gpu_again classic mok_ship mok_resident mok_resident_1)
args_of() {  # sets extra=(…) for a variant
  case "$1" in
    1gpu|1gpu_again) extra=() ;;
    classic) extra=("${TWO[@]}" --dispatcher classic) ;;
    mok_ship) extra=("${TWO[@]}" --dispatcher mok --resident-experts off) ;;
    mok_resident) extra=("${TWO[@]}" --dispatcher mok --resident-experts all) ;;
    mok_resident_1) extra=("${TWO[@]}" --dispatcher mok --resident-experts 1) ;;
  esac
}
for steps in "${CKPTS[@]}"; do
  timeout 300 "$BIN/mok" train "$CONFIG" --db "$SCRATCH/t$steps.db" --json --quiet --set parallel.device=cuda \
    --set train.steps="$steps" --set logging.checkpoint_dir="$SCRATCH/ck$steps" > "$R/train$steps.json" 2>&1
  echo "train $steps steps: exit $?"
  C="$(ls -d "$SCRATCH/ck$steps"/*/ 2>/dev/null | head -n 1)"
  for prec in "${PRECS[@]}"; do
    for sampling in "${SAMPLES[@]}"; do
      temp=(); [ "$sampling" = greedy ] && temp=(--temperature 0)
      for v in "${VARIANTS[@]}"; do
        args_of "$v"
        name="s${steps}_${prec}_${sampling}_$v"
        timeout 300 "$BIN/mok" generate "$C" --batch 64 --tokens 64 --prompts-from-data 128 --json --quiet \
          --set parallel.device=cuda --set train.precision="$prec" "${temp[@]}" "${extra[@]}" > "$R/$name.json" 2> "$R/$name.err"
        rc=$?
        [ "$rc" -ne 0 ] && { echo "$name: exit $rc"; tail -n 2 "$R/$name.err"; }
      done
    done
  done
done
python3 - "$R" "${CKPT_STEPS:-2,40}" "${PRECISIONS:-fp32,bf16}" "${SAMPLING:-greedy,sampled}" "${VARIANTS[*]}" <<'PY'
import json, sys
r, ckpts, precs, samplings, variants = sys.argv[1], *(a.split(",") for a in sys.argv[2:5]), sys.argv[5].split()
def texts(name):
    try:
        return json.loads(open(f"{r}/{name}.json").read().strip().splitlines()[-1]).get("texts") or []
    except Exception:
        return []
def shared_new(a, b, prompt=128):  # bytes in common after the prompt, before the first difference
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n - prompt
print(f"{'steps':>5s} {'precision':9s} {'sampling':8s} {'variant':15s} {'equal to 1 GPU':>14s} {'new bytes shared':>16s}")
for s in ckpts:
    for p in precs:
        for m in samplings:
            ref = texts(f"s{s}_{p}_{m}_1gpu")
            for v in variants[1:]:
                t = texts(f"s{s}_{p}_{m}_{v}")
                if not ref or not t:
                    print(f"{s:>5s} {p:9s} {m:8s} {v:15s} {'failed':>14s}")
                    continue
                eq = sum(a == b for a, b in zip(ref, t))
                mean = sum(shared_new(a, b) for a, b in zip(ref, t)) / len(ref)
                print(f"{s:>5s} {p:9s} {m:8s} {v:15s} {f'{eq} of {len(ref)}':>14s} {mean:16.1f}")
PY
echo "written under $OUT_DIR (texts.tgz)"
