#!/usr/bin/env bash
# The training path end to end on a GPU machine, through `mok train` itself:
#   1. the quickstart for 20 steps on the CPU and on the GPU in fp32: every logged loss and
#      validation figure within 1e-4 relative (gradient norm, aux and z losses 1e-3);
#   2. the same on the GPU in bf16, twice: bitwise the same metrics, and within 3e-2 of fp32;
#   3. bf16 with activation checkpointing: bitwise the same metrics as without;
#   4. the JSON line of a GPU run (device, precision, peak device bytes);
#   5. bf16 steps replayed from a CUDA graph (the default) and with MOK_CUDA_GRAPH=off:
#      bitwise the same metrics (every one but time and memory) and the replays counted — the
#      MoE quickstart itself (step 2's run), and made dense, exact and with the kitten defaults.
#   tools/gpu/train_checks.sh BIN_DIR [OUT_DIR]      (BIN_DIR from tools/gpu/pack.sh)
set -uo pipefail
export NCCL_NVLS_ENABLE=0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$(cd "${1:-$ROOT/build-gpu}" && pwd)"
OUT_DIR="${2:-${OUT:-/tmp/mok-train-checks}}"
mkdir -p "$OUT_DIR"
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT
cd "$ROOT"

run() {  # name, then mok train arguments
  local name="$1"; shift
  "$BIN/mok" train experiments/quickstart.yaml --db "$SCRATCH/$name.db" --json --quiet \
    --set train.steps=20 --set train.eval_every=10 --set train.eval_batches=2 \
    --set logging.checkpoint_dir="$SCRATCH/ckpt-$name" "$@" > "$OUT_DIR/$name.json" 2> "$OUT_DIR/$name.err"
  echo "$name: exit $? $(tail -n 1 "$OUT_DIR/$name.json" | cut -c1-400)"
  "$BIN/mok" runs export-csv 1 --db "$SCRATCH/$name.db" --out "$OUT_DIR/$name.csv" > /dev/null 2>&1
}
run cpu --set parallel.device=cpu --set parallel.threads=8
run gpu_fp32 --set parallel.device=cuda --set train.precision=fp32
run gpu_bf16_a --set parallel.device=cuda --set train.precision=bf16
run gpu_bf16_b --set parallel.device=cuda --set train.precision=bf16
run gpu_bf16_ckpt --set parallel.device=cuda --set train.precision=bf16 --set train.activation_checkpointing=true
MOK_CUDA_GRAPH=off run moe_eager --set parallel.device=cuda --set train.precision=bf16
run dense_graph --set parallel.device=cuda --set train.precision=bf16 --set model.experts=0
MOK_CUDA_GRAPH=off run dense_eager --set parallel.device=cuda --set train.precision=bf16 --set model.experts=0
run kitten_graph --set parallel.device=cuda --set train.precision=bf16 --set model.experts=0 --set kittens.mode=kitten
MOK_CUDA_GRAPH=off run kitten_eager --set parallel.device=cuda --set train.precision=bf16 --set model.experts=0 \
  --set kittens.mode=kitten

python3 - "$OUT_DIR" <<'PY'
import csv, math, sys
out = sys.argv[1]
# Losses within 1e-4 relative; the gradient norm and the router's aux and z losses within
# 1e-3: they move when a token's top-k choice flips between near-equal router logits under
# another summation order, which the loss itself barely feels.
TOL = {"train/loss": 1e-4, "val/loss": 1e-4, "val/bpb": 1e-4,
       "train/grad_norm": 1e-3, "train/aux_loss": 1e-3, "train/z_loss": 1e-3}
def load(name):
    try:
        rows = csv.DictReader(open(f"{out}/{name}.csv"))
    except OSError:
        return {}
    return {(int(r["step"]), r["name"]): float(r["value"]) for r in rows if r["name"] in TOL}
def worst(a, b, metric):
    keys = [k for k in b if k[1] == metric]
    if not keys or any(k not in a for k in keys):
        return math.inf
    return max(abs(a[k] - b[k]) / max(abs(b[k]), 1e-12) for k in keys)
cpu, g32, ga, gb, gc = (load(n) for n in ("cpu", "gpu_fp32", "gpu_bf16_a", "gpu_bf16_b", "gpu_bf16_ckpt"))
bad = 0
for metric, tol in TOL.items():
    v = worst(g32, cpu, metric)
    bad += not v <= tol
    print(f"gpu fp32 vs cpu  {metric:16s} max rel. diff {v:10.3e}  (tolerance {tol:.0e})  {'ok' if v <= tol else 'FAIL'}")
for metric in ("train/loss", "val/loss", "val/bpb"):
    v = worst(ga, g32, metric)
    bad += not v <= 3e-2
    print(f"gpu bf16 vs fp32 {metric:16s} max rel. diff {v:10.3e}  (tolerance 3e-02)  {'ok' if v <= 3e-2 else 'FAIL'}")
same = bool(ga) and ga == gb
bad += not same
print(f"gpu bf16 repeated: {'bitwise the same' if same else 'DIFFERENT'}")
same_ckpt = bool(ga) and ga == gc
bad += not same_ckpt
print(f"gpu bf16 with activation checkpointing: {'bitwise the same' if same_ckpt else 'DIFFERENT'}")
def load_all(name):  # every metric but time and memory
    try:
        rows = csv.DictReader(open(f"{out}/{name}.csv"))
    except OSError:
        return {}
    return {(int(r["step"]), r["name"]): r["value"] for r in rows if not r["name"].startswith(("perf/", "mem/"))}
def replayed(name):
    try:
        import json
        return json.loads(open(f"{out}/{name}.json").read().strip().splitlines()[-1]).get("replayed_steps", 0)
    except Exception:
        return 0
for graph, eager in (("gpu_bf16_a", "moe_eager"), ("dense_graph", "dense_eager"), ("kitten_graph", "kitten_eager")):
    g, e = load_all(graph), load_all(eager)
    same = bool(g) and g == e and replayed(graph) > 0 and replayed(eager) == 0
    bad += not same
    print(f"gpu bf16 {graph}: {replayed(graph)} steps replayed from a CUDA graph, {len(g)} metrics vs op by op: "
          f"{'bitwise the same' if same else 'DIFFERENT'}")
for step in (1, 10, 20):
    print(f"step {step:2d} loss: cpu {cpu.get((step, 'train/loss'), float('nan')):.6f}  gpu fp32 {g32.get((step, 'train/loss'), float('nan')):.6f}"
          f"  gpu bf16 {ga.get((step, 'train/loss'), float('nan')):.6f}")
sys.exit(1 if bad else 0)
PY
