#!/usr/bin/env bash
# Two GPUs as two ranks, in one call on a machine with two GPUs (device kind nvidia-h200-x2):
#   1. mok-gpu-check --checks parallel: the NCCL data plane bitwise against the host, and the
#      classic dispatcher over two GPUs against the CPU;
#   2. `mok train` on the quickstart for 20 steps: two GPU ranks (parallel.comm nccl) in fp32
#      against two CPU ranks and against one GPU (losses within 1e-4 relative); in bf16 twice
#      (bitwise the same) and within 3e-2 of fp32; the same for MoK dispatch against two CPU
#      ranks with MoK; the MoK cost model's rates calibrated on the GPUs (printed);
#   3. (part mpi) the same fp32 run as one process per GPU under mpirun (NCCL's id over MPI):
#      bitwise the metrics of the two-thread run;
#   4. training throughput of the benchmark MoE shapes on one GPU (batch 16 × 1024) and on
#      two (batch 32 × 1024, 16 per GPU) with classic, MoK and MoK + the locality router, bf16:
#      tokens/s (median over the steps after WARMUP), peak device bytes, bytes between the
#      GPUs per step;
#   5. (part generate) batched greedy decoding (`mok generate`) of a quickstart checkpoint on
#      one GPU and on two (classic, MoK) in fp32: the same texts as the CPU; then tokens/s of
#      batched decoding (GEN_BATCH sequences, GEN_TOKENS new tokens each, bf16) of each shape's
#      checkpoint on one GPU and on two (classic, MoK shipping rows; the fixed decode layout,
#      then the counted one: the same texts, tokens/s side by side; MoK with every MoE layer
#      resident, decode steps replayed: its tokens/s against classic, its texts bitwise one
#      GPU's), for each batch of GEN_BATCH (a list);
#   6. (part profile) each rank's op profile (MOK_OP_PROFILE, core/train/op_profile_window.h) of
#      PROFILE_VARIANTS on each shape: device ms per op, NCCL calls by purpose, host gaps.
#   tools/gpu/multi_gpu_checks.sh BIN_DIR [OUT_DIR]      (BIN_DIR from tools/gpu/pack.sh)
# TRANSPORT=nccl (default) or peer: the two ranks' data plane (parallel.comm); with peer on a
# machine of one GPU both ranks share cuda:0 (parallel.gpus 0,0) — the same checks of the
# two-rank path, where timings say nothing about two GPUs; part mpi needs nccl and is skipped.
# Settings: PARTS=checks,training,mpi,generate,throughput,profile  GEN_BATCH=64 (or 64,512)  GEN_TOKENS=64  SHAPES=moe8,moe64  STEPS=20  WARMUP=5
#           TPUT_VARIANTS=1gpu,1gpu32,classic,classic_whole,mok,mok_whole,mok_calibrated,mok_ship,mok_locality  PROFILE_VARIANTS=1gpu,classic,mok
#           MOK_TIMEOUT=300 (s per run)
set -uo pipefail
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off on these machines
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$(cd "${1:-$ROOT/build-gpu}" && pwd)"
OUT_DIR="${2:-${OUT:-/tmp/mok-multi-gpu}}"
SHAPES="${SHAPES:-moe8,moe64}"
STEPS="${STEPS:-20}"
WARMUP="${WARMUP:-5}"
PARTS="${PARTS:-checks,training,mpi,generate,throughput,profile}"
want() { [[ ",$PARTS," == *",$1,"* ]]; }
TRANSPORT="${TRANSPORT:-nccl}"
case "$TRANSPORT" in nccl|peer) ;; *) echo "TRANSPORT=$TRANSPORT: expected nccl or peer" >&2; exit 2 ;; esac
# The overrides that put a run on two GPU ranks over TRANSPORT (sharing cuda:0 where it is the
# only GPU and the transport allows it).
TWO=(--set parallel.comm="$TRANSPORT")
GEN2=()  # mok generate --ranks 2: its checkpoint's config says one rank, so the list needs ranks too
SHARED_GPU=0  # 1: both ranks on cuda:0, so "vs 1 GPU" compares with one GPU given both ranks' batch
if [ "$TRANSPORT" = peer ]; then
  GEN2=(--set parallel.comm=peer)
  if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -lt 2 ]; then
    TWO+=(--set parallel.gpus=0,0)
    SHARED_GPU=1
    GEN2+=(--set parallel.ranks=2 --set parallel.gpus=0,0)
  fi
fi
mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
SCRATCH="$(mktemp -d)"
cd "$ROOT"
exec > >(tee -a "$OUT_DIR/multi_gpu.log") 2>&1
# Each run's JSON, stderr and metrics CSV go to runs/, packed into runs.tgz at the end: a
# device call brings back a few files, not one per run.
RUNS="$OUT_DIR/runs"
mkdir -p "$RUNS"
trap 'tar czf "$OUT_DIR/runs.tgz" -C "$OUT_DIR" runs && rm -rf "$RUNS"; rm -rf "$SCRATCH"' EXIT
trap 'exit 143' TERM INT  # a timeout still packs what ran
section() { printf '\n==== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

section "device"
nvidia-smi -L
nvidia-smi topo -m 2>/dev/null | head -n 6

if want checks; then
section "checks: parallel"
timeout "${MOK_TIMEOUT:-300}" "$BIN/mok-gpu-check" --checks parallel --no-timings; echo "mok-gpu-check exit $?"
fi

if want training; then
section "training: two GPU ranks against two CPU ranks and one GPU"
run() {  # name, then mok train arguments
  local name="$1"; shift
  timeout "${MOK_TIMEOUT:-300}" "$BIN/mok" train experiments/quickstart.yaml --db "$SCRATCH/$name.db" --json --quiet \
    --set train.steps=20 --set train.eval_every=10 --set train.eval_batches=2 \
    --set logging.checkpoint_dir="$SCRATCH/ckpt-$name" "$@" > "$RUNS/$name.json" 2> "$RUNS/$name.err"
  echo "$name: exit $? $(tail -n 1 "$RUNS/$name.json" | cut -c1-300)"
  [ -s "$RUNS/$name.err" ] && tail -n 3 "$RUNS/$name.err"
  "$BIN/mok" runs export-csv 1 --db "$SCRATCH/$name.db" --out "$RUNS/$name.csv" > /dev/null 2>&1
}
run cpu2 --set parallel.device=cpu --set parallel.ranks=2 --set parallel.comm=local --set parallel.threads=4
run gpu1_fp32 --set parallel.device=cuda --set train.precision=fp32
run gpu2_fp32 --set parallel.device=cuda --set parallel.ranks=2 "${TWO[@]}" --set train.precision=fp32
run gpu2_bf16_a --set parallel.device=cuda --set parallel.ranks=2 "${TWO[@]}" --set train.precision=bf16
run gpu2_bf16_b --set parallel.device=cuda --set parallel.ranks=2 "${TWO[@]}" --set train.precision=bf16
run cpu2_mok --set parallel.device=cpu --set parallel.ranks=2 --set parallel.comm=local --set parallel.threads=4 \
  --set routing.dispatcher=mok
run gpu2_mok_fp32 --set parallel.device=cuda --set parallel.ranks=2 "${TWO[@]}" --set train.precision=fp32 \
  --set routing.dispatcher=mok
# The cost model's rates measured through the GPUs' data plane and with their own adds.
run gpu2_mok_calibrated --set parallel.device=cuda --set parallel.ranks=2 "${TWO[@]}" --set routing.dispatcher=mok \
  --set routing.cost_calibrate=true
"$BIN/mok" runs show 1 --db "$SCRATCH/gpu2_mok_calibrated.db" 2>&1 | grep -o "mok cost model calibrated.*"

python3 - "$RUNS" <<'PY'
import csv, math, sys
out = sys.argv[1]
TOL = {"train/loss": 1e-4, "val/loss": 1e-4, "val/bpb": 1e-4, "train/grad_norm": 1e-3}
def load(name):
    try:
        rows = csv.DictReader(open(f"{out}/{name}.csv"))
    except OSError:
        return {}
    return {(int(r["step"]), r["name"]): float(r["value"]) for r in rows if r["name"] in TOL or r["name"].startswith("comm/")}
def worst(a, b, metric):
    keys = [k for k in b if k[1] == metric]
    if not keys or any(k not in a for k in keys):
        return math.inf
    return max(abs(a[k] - b[k]) / max(abs(b[k]), 1e-12) for k in keys)
cpu2, g1, g2, ga, gb, cm, gm = (load(n) for n in ("cpu2", "gpu1_fp32", "gpu2_fp32", "gpu2_bf16_a", "gpu2_bf16_b",
                                                  "cpu2_mok", "gpu2_mok_fp32"))
bad = 0
for name, got, ref_name, ref in (("2 gpus fp32", g2, "2 cpu ranks", cpu2), ("2 gpus fp32", g2, "1 gpu", g1),
                                 ("2 gpus mok", gm, "2 cpu mok", cm)):
    for metric, tol in TOL.items():
        v = worst(got, ref, metric)
        bad += not v <= tol
        print(f"{name} vs {ref_name:11s} {metric:16s} max rel. diff {v:10.3e}  (tolerance {tol:.0e})  {'ok' if v <= tol else 'FAIL'}")
for metric in ("train/loss", "val/loss", "val/bpb"):
    v = worst(ga, g2, metric)
    bad += not v <= 3e-2
    print(f"2 gpus bf16 vs fp32 {metric:16s} max rel. diff {v:10.3e}  (tolerance 3e-02)  {'ok' if v <= 3e-2 else 'FAIL'}")
same = bool(ga) and {k: v for k, v in ga.items() if k[1] in TOL} == {k: v for k, v in gb.items() if k[1] in TOL}
bad += not same
print(f"2 gpus bf16 repeated: {'bitwise the same' if same else 'DIFFERENT'}")
for step in (1, 10, 20):
    print(f"step {step:2d} loss: 2 cpu {cpu2.get((step, 'train/loss'), float('nan')):.6f}  1 gpu {g1.get((step, 'train/loss'), float('nan')):.6f}"
          f"  2 gpus fp32 {g2.get((step, 'train/loss'), float('nan')):.6f}  2 gpus bf16 {ga.get((step, 'train/loss'), float('nan')):.6f}")
for name, d in (("2 cpu ranks", cpu2), ("2 gpus", g2), ("2 cpu mok", cm), ("2 gpus mok", gm)):
    b = [v for k, v in d.items() if k[1] == "comm/remote_bytes"]
    print(f"{name}: remote bytes per step (both ranks) median {sorted(b)[len(b)//2] if b else float('nan'):.4g}")
print("training checks:", "all passed" if not bad else f"{bad} FAILED")
PY
fi

if want mpi && [ "$TRANSPORT" = peer ]; then
section "one process per GPU: skipped (TRANSPORT=peer copies within one process; mpirun needs nccl)"
elif want mpi; then
section "one process per GPU: mpirun -np 2 against two threads"
# The machine's own Open MPI (mpirun and libmpi must match): the carried MPI libraries stay out.
mkdir -p "$SCRATCH/libs"
for f in "$BIN"/*.so*; do
  case "$(basename "$f")" in libmpi*|libopen-*|libhwloc*|libevent*|libpmix*) ;; *) ln -sf "$f" "$SCRATCH/libs/" ;; esac
done
ROOT_FLAG=(); [ "$(id -u)" -eq 0 ] && ROOT_FLAG=(--allow-run-as-root)
for name in mpi2_fp32 threads2_fp32; do
  launch=(); extra=(--set parallel.ranks=2)
  [ "$name" = mpi2_fp32 ] && launch=(mpirun -np 2 "${ROOT_FLAG[@]}" --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x MOK_CORPUS_DIR)
  LD_LIBRARY_PATH="$SCRATCH/libs" timeout "${MOK_TIMEOUT:-300}" "${launch[@]}" "$BIN/mok" train experiments/quickstart.yaml \
    --db "$SCRATCH/$name.db" --json --quiet --set train.steps=20 --set train.eval_every=10 --set train.eval_batches=2 \
    --set logging.checkpoint_dir="$SCRATCH/ckpt-$name" --set parallel.device=cuda --set parallel.comm=nccl \
    --set train.precision=fp32 "${extra[@]}" > "$RUNS/$name.json" 2> "$RUNS/$name.err"
  echo "$name: exit $? $(tail -n 1 "$RUNS/$name.json" | cut -c1-200)"
  [ -s "$RUNS/$name.err" ] && tail -n 3 "$RUNS/$name.err"
  LD_LIBRARY_PATH="$SCRATCH/libs" "$BIN/mok" runs export-csv 1 --db "$SCRATCH/$name.db" --out "$RUNS/$name.csv" > /dev/null 2>&1
done
python3 - "$RUNS" <<'PY'
import csv, sys
out = sys.argv[1]
def load(name):
    try:
        return {(r["step"], r["name"]): r["value"] for r in csv.DictReader(open(f"{out}/{name}.csv"))
                if not r["name"].startswith(("perf/", "mem/")) and "wall" not in r["name"]}
    except OSError:
        return {}
a, b = load("mpi2_fp32"), load("threads2_fp32")
same = bool(a) and a == b
print(f"mpirun -np 2 vs two threads: {len(a)} metric values, {'bitwise the same' if same else 'DIFFERENT'}")
PY
fi

yaml_for() {
  case "$1" in
    moe8) echo "experiments/gpu/moe_8x1024.yaml" ;;
    moe64) echo "experiments/gpu/moe_64x256.yaml" ;;
    dense) echo "experiments/gpu/dense_85m.yaml" ;;
  esac
}
variant_args() {  # sets extra=(…): the mok train settings of a variant
  case "$1" in
    1gpu) extra=(--set train.batch=16) ;;
    1gpu32) extra=(--set train.batch=32) ;;  # the two ranks' whole batch on one GPU (the baseline of TRANSPORT=peer on one GPU)
    classic) extra=(--set train.batch=32 --set parallel.ranks=2 "${TWO[@]}") ;;
    classic_whole) extra=(--set train.batch=32 --set parallel.ranks=2 "${TWO[@]}" --set routing.overlap_chunks=1) ;;
    mok) extra=(--set train.batch=32 --set parallel.ranks=2 "${TWO[@]}" --set routing.dispatcher=mok) ;;
    mok_whole) extra=(--set train.batch=32 --set parallel.ranks=2 "${TWO[@]}" --set routing.dispatcher=mok
                      --set routing.overlap_chunks=1) ;;
    mok_ship) extra=(--set train.batch=32 --set parallel.ranks=2 "${TWO[@]}" --set routing.dispatcher=mok
                     --set routing.shadow=never) ;;
    mok_locality) extra=(--set train.batch=32 --set parallel.ranks=2 "${TWO[@]}" --set routing.dispatcher=mok
                         --set routing.policy=locality --set routing.locality_margin=0.05) ;;
    mok_calibrated) extra=(--set train.batch=32 --set parallel.ranks=2 "${TWO[@]}" --set routing.dispatcher=mok
                           --set routing.cost_calibrate=true) ;;
  esac
}
IFS=',' read -r -a SHAPE_LIST <<< "$SHAPES"

if want generate; then
section "generation: texts on the GPUs against the CPU (fp32), then tokens/s (bf16)"
G="$SCRATCH/gen"
mkdir -p "$G"
timeout "${MOK_TIMEOUT:-300}" "$BIN/mok" train experiments/quickstart.yaml --db "$G/q.db" --json --quiet \
  --set train.steps=20 --set train.eval_every=20 --set train.eval_batches=1 --set logging.checkpoint_dir="$G/q" \
  --set parallel.device=cpu > "$RUNS/gen_quickstart_train.json" 2>&1
Q="$(ls -d "$G"/q/*/ 2>/dev/null | head -n 1)"
gen() {  # name, then mok generate arguments
  local name="$1"; shift
  timeout "${MOK_TIMEOUT:-300}" "$BIN/mok" generate "$@" --json --quiet > "$RUNS/$name.json" 2> "$RUNS/$name.err"
  echo "$name: exit $? $(tail -n 1 "$RUNS/$name.json" | grep -o '"tokens_per_s":[0-9.e+-]*')"
  [ -s "$RUNS/$name.err" ] && tail -n 2 "$RUNS/$name.err"
}
COMMON=(--batch 8 --tokens 48 --prompts-from-data 32 --temperature 0)
gen gen_cpu "$Q" "${COMMON[@]}" --set parallel.device=cpu
gen gen_gpu1 "$Q" "${COMMON[@]}" --set parallel.device=cuda --set train.precision=fp32
gen gen_gpu2_classic "$Q" "${COMMON[@]}" --ranks 2 --dispatcher classic --set parallel.device=cuda "${GEN2[@]}" --set train.precision=fp32
gen gen_gpu2_mok "$Q" "${COMMON[@]}" --ranks 2 --dispatcher mok --resident-experts off --set parallel.device=cuda "${GEN2[@]}" --set train.precision=fp32
gen gen_gpu2_mok_resident "$Q" "${COMMON[@]}" --ranks 2 --dispatcher mok --resident-experts all --set parallel.device=cuda "${GEN2[@]}" --set train.precision=fp32
python3 - "$RUNS" <<'PY'
import json, sys
out = sys.argv[1]
def texts(name):
    try:
        return json.loads(open(f"{out}/{name}.json").read().strip().splitlines()[-1]).get("texts")
    except Exception as e:
        return None
ref = texts("gen_cpu")
for name in ("gen_gpu1", "gen_gpu2_classic", "gen_gpu2_mok", "gen_gpu2_mok_resident"):
    t = texts(name)
    same = ref is not None and t == ref
    n = sum(a == b for a, b in zip(ref or [], t or []))
    print(f"{name}: {n} of {len(ref or [])} greedy texts the CPU's ({'ok' if same else 'DIFFERENT'})")
PY
IFS=',' read -r -a GEN_BATCH_LIST <<< "${GEN_BATCH:-64}"
for shape in "${SHAPE_LIST[@]}"; do
  timeout "${MOK_TIMEOUT:-300}" "$BIN/mok" train "$(yaml_for "$shape")" --db "$G/$shape.db" --json --quiet \
    --set parallel.device=cuda --set train.steps=2 --set logging.checkpoint_dir="$G/$shape" > /dev/null 2>&1
  C="$(ls -d "$G/$shape"/*/ 2>/dev/null | head -n 1)"
  for b in "${GEN_BATCH_LIST[@]}"; do
    ARGS=(--batch "$b" --tokens "${GEN_TOKENS:-64}" --prompts-from-data 128 --set parallel.device=cuda)
    tag="${shape}_b${b}"
    gen "gen_${tag}_1gpu" "$C" "${ARGS[@]}"
    gen "gen_${tag}_classic" "$C" "${ARGS[@]}" --ranks 2 "${GEN2[@]}" --dispatcher classic
    gen "gen_${tag}_mok" "$C" "${ARGS[@]}" --ranks 2 "${GEN2[@]}" --dispatcher mok --resident-experts off
    gen "gen_${tag}_mok_locality" "$C" "${ARGS[@]}" --ranks 2 "${GEN2[@]}" --dispatcher mok --resident-experts off \
      --set routing.policy=locality --set routing.locality_margin=0.05
    # The counted decode layout against the fixed one (auto on GPUs): the same texts, bit for bit.
    gen "gen_${tag}_classic_counted" "$C" "${ARGS[@]}" --ranks 2 "${GEN2[@]}" --dispatcher classic --decode-layout counted
    gen "gen_${tag}_mok_counted" "$C" "${ARGS[@]}" --ranks 2 "${GEN2[@]}" --dispatcher mok --resident-experts off \
      --decode-layout counted
    # MoK's default on GPUs: as many MoE layers resident as the memory allows (here all).
    gen "gen_${tag}_mok_resident" "$C" "${ARGS[@]}" --ranks 2 "${GEN2[@]}" --dispatcher mok
  done
done
python3 - "$RUNS" "$SHAPES" "${GEN_BATCH:-64}" <<'PY'
import json, sys
out, shapes, batches = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
def last(name):
    try:
        return json.loads(open(f"{out}/{name}.json").read().strip().splitlines()[-1])
    except Exception:
        return {}
print("decode tokens/s (ratios against classic in the same layout; MB between ranks)")
print(f"{'shape':6s} {'batch':>5s} {'1 GPU':>8s} | {'layout':7s} {'classic':>8s} {'MoK':>8s} {'MoK/cl':>6s} {'MoK+loc':>8s} | MB classic / MoK | texts fixed = counted")
for shape in shapes:
    for b in batches:
        t = f"{shape}_b{b}"
        one = last(f"gen_{t}_1gpu")
        for layout, suffix in (("fixed", ""), ("counted", "_counted")):
            cl, mk = last(f"gen_{t}_classic{suffix}"), last(f"gen_{t}_mok{suffix}")
            loc = last(f"gen_{t}_mok_locality") if not suffix else {}
            ratio = mk.get("tokens_per_s", 0) / cl["tokens_per_s"] if cl.get("tokens_per_s") else float("nan")
            same = ""
            if not suffix:
                sc = cl.get("texts") is not None and cl.get("texts") == last(f"gen_{t}_classic_counted").get("texts")
                sm = mk.get("texts") is not None and mk.get("texts") == last(f"gen_{t}_mok_counted").get("texts")
                same = f"classic {'same' if sc else 'DIFFERENT'}, MoK {'same' if sm else 'DIFFERENT'}"
            print(f"{shape:6s} {b:>5s} {one.get('tokens_per_s', 0):8.0f} | {cl.get('decode_layout', layout):7s} "
                  f"{cl.get('tokens_per_s', 0):8.0f} {mk.get('tokens_per_s', 0):8.0f} {ratio:6.2f} "
                  f"{loc.get('tokens_per_s', 0) if loc else float('nan'):8.0f} | "
                  f"{cl.get('remote_bytes', 0) / 1e6:8.1f} / {mk.get('remote_bytes', 0) / 1e6:8.1f} | {same}")
print()
# A resident layer computes every expert on the rank as one GPU does: the same texts bit for
# bit, sampled or greedy, in bf16 too. MoK shipping rows is not: a destination rank sums its
# experts' outputs for a token and returns that sum rounded to bf16, so its bf16 texts part from
# one GPU's after a few tokens (fp32: the same).
print("MoK with resident MoE layers (--resident-experts auto) against classic (fixed layout) and one GPU")
print(f"{'shape':6s} {'batch':>5s} {'resident':>8s} {'GiB/rank':>8s} {'replayed':>8s} {'tokens/s':>9s} {'vs classic':>10s} "
      f"{'vs 1 GPU':>8s} {'MB':>8s} | texts = 1 GPU: resident, classic, MoK shipping")
for shape in shapes:
    for b in batches:
        t = f"{shape}_b{b}"
        one, cl, mk, res = (last(f"gen_{t}_{v}") for v in ("1gpu", "classic", "mok", "mok_resident"))
        rt = res.get("tokens_per_s", 0)
        vs_cl = rt / cl["tokens_per_s"] if cl.get("tokens_per_s") else float("nan")
        vs_one = rt / one["tokens_per_s"] if one.get("tokens_per_s") else float("nan")
        ref = one.get("texts") or []
        same = [sum(x == y for x, y in zip(ref, d.get("texts") or [])) for d in (res, cl, mk)]
        verdict = "ok" if ref and same[0] == len(ref) else "DIFFERENT"
        print(f"{shape:6s} {b:>5s} {res.get('resident_layers', 0):8d} {res.get('resident_bytes', 0) / 2**30:8.2f} "
              f"{res.get('replayed_steps', 0):8d} {rt:9.0f} {vs_cl:10.2f} {vs_one:8.2f} "
              f"{res.get('remote_bytes', 0) / 1e6:8.1f} | {same[0]}, {same[1]}, {same[2]} of {len(ref)} (resident {verdict})")
PY
fi

if want profile; then
section "op profiles (steps 5-7 of 7)"
IFS=',' read -r -a PVARIANTS <<< "${PROFILE_VARIANTS:-1gpu,classic,mok}"
for shape in "${SHAPE_LIST[@]}"; do
  for variant in "${PVARIANTS[@]}"; do
    name="profile_${shape}_${variant}"
    variant_args "$variant"
    MOK_OP_PROFILE=5:3 timeout "${MOK_TIMEOUT:-300}" "$BIN/mok" train "$(yaml_for "$shape")" --json --quiet \
      --db "$SCRATCH/$name.db" --set parallel.device=cuda --set train.steps=7 \
      --set "logging.checkpoint_dir=$SCRATCH/ckpt-$name" "${extra[@]}" > "$RUNS/$name.json" 2> "$RUNS/$name.txt"
    echo "$name: exit $?"
    grep -E "^profile" "$RUNS/$name.txt"
  done
done
fi

want throughput || { echo "written under $OUT_DIR (multi_gpu.log, runs.tgz)"; exit 0; }
section "throughput: one GPU against two"
IFS=',' read -r -a VARIANTS <<< "${TPUT_VARIANTS:-1gpu,classic,classic_whole,mok,mok_calibrated,mok_ship,mok_locality}"
for shape in "${SHAPE_LIST[@]}"; do
  yaml="$(yaml_for "$shape")"
  for variant in "${VARIANTS[@]}"; do
    name="tput_${shape}_${variant}"
    variant_args "$variant"
    timeout "${MOK_TIMEOUT:-300}" "$BIN/mok" train "$yaml" --json --quiet --db "$SCRATCH/$name.db" \
      --set parallel.device=cuda --set "train.steps=$((WARMUP + STEPS))" \
      --set "logging.checkpoint_dir=$SCRATCH/ckpt-$name" "${extra[@]}" > "$RUNS/$name.json" 2> "$RUNS/$name.err"
    echo "$name: exit $?"
    [ -s "$RUNS/$name.err" ] && tail -n 3 "$RUNS/$name.err"
    "$BIN/mok" runs export-csv 1 --db "$SCRATCH/$name.db" --out "$RUNS/$name.csv" > /dev/null 2>&1
  done
done
python3 - "$RUNS" "$SHAPES" "$WARMUP" "$(IFS=,; echo "${VARIANTS[*]}")" "$SHARED_GPU" <<'PY'
import csv, json, sys
out, shapes, warmup, ran = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), sys.argv[4].split(",")
# Two ranks sharing one GPU do both ranks' work there: their baseline is one GPU given both
# batches (1gpu32), where that ran.
base = "1gpu32" if sys.argv[5] == "1" and "1gpu32" in ran else "1gpu"
def median(v):
    v = sorted(v)
    return v[len(v) // 2] if v else float("nan")
def figures(name):
    try:
        rows = list(csv.DictReader(open(f"{out}/{name}.csv")))
    except OSError:
        return None
    tps = [float(r["value"]) for r in rows if r["name"] == "perf/tokens_per_s" and int(r["step"]) > warmup]
    ms = [float(r["value"]) for r in rows if r["name"] == "perf/step_ms" and int(r["step"]) > warmup]
    comm = [float(r["value"]) for r in rows if r["name"] == "comm/remote_bytes" and int(r["step"]) > warmup]
    comm_ms = [float(r["value"]) for r in rows if r["name"] == "perf/comm_ms" and int(r["step"]) > warmup]
    over_ms = [float(r["value"]) for r in rows if r["name"] == "perf/comm_overlapped_ms" and int(r["step"]) > warmup]
    peak = 0
    try:
        j = json.loads(open(f"{out}/{name}.json").read().strip().splitlines()[-1])
        peak = j.get("peak_device_bytes", 0)
    except Exception:
        pass
    return (median(tps), median(ms), median(comm) if comm else 0.0, peak, median(comm_ms) if comm_ms else 0.0,
            median(over_ms) if over_ms else 0.0)
# comm ms: what the compute stream waited for (exposed); overlapped ms: transfers beside compute.
print(f"'vs 1 GPU' divides by the run '{base}'")
print(f"{'shape':6s} {'run':26s} {'tokens/s':>10s} {'step ms':>8s} {'comm ms':>8s} {'overlapped ms':>13s} {'GB between GPUs/step':>21s} {'peak GiB/GPU':>12s} {'vs 1 GPU':>8s} {'vs classic':>10s}")
labels = {"1gpu": "1 GPU", "1gpu32": "1 GPU, both ranks' batch", "classic": "2 GPUs classic", "classic_whole": "2 GPUs classic, no chunks",
          "mok": "2 GPUs MoK", "mok_whole": "2 GPUs MoK, no chunks", "mok_calibrated": "2 GPUs MoK, rates measured",
          "mok_ship": "2 GPUs MoK, no shadows",
          "mok_locality": "2 GPUs MoK + locality"}
for s in shapes:
    one = figures(f"tput_{s}_{base}")
    classic = figures(f"tput_{s}_classic")
    for v, label in labels.items():
        if v not in ran:
            continue
        f = figures(f"tput_{s}_{v}")
        if not f or not f[0] == f[0]:
            print(f"{s:6s} {label:26s} failed"); continue
        up = f[0] / one[0] if one and one[0] else float("nan")
        vs = f[0] / classic[0] if classic and classic[0] and not v.startswith("1gpu") else float("nan")
        print(f"{s:6s} {label:26s} {f[0]:10.0f} {f[1]:8.1f} {f[4]:8.1f} {f[5]:13.1f} {f[2] / 1e9:21.3f} {f[3] / 2**30:12.2f} {up:8.2f} {vs:10.2f}")
PY
echo "written under $OUT_DIR (multi_gpu.log, runs.tgz)"
