#!/usr/bin/env bash
# Packs the PyTorch extension's bridge for a GPU machine: libmok_torch_bridge.so (built with
# the CUDA kernels: MOK_CUDA and MOK_TORCH on), every shared library it loads that the GPU
# machine lacks (those pack.sh ships too: yaml-cpp, SQLite, Open MPI, …; not the C/C++
# runtimes, CUDA, NCCL or OpenBLAS) and the Python package's sources, into OUT_DIR/mok_torch,
# stripped. There, tools/gpu/torch_interop_checks.sh OUT_DIR builds mok_torch._C against it
# with that machine's torch and runs the checks.
#   tools/gpu/pack_torch.sh [BUILD_DIR] [OUT_DIR]      (default build, build-torch-gpu)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
OUT="${2:-$ROOT/build-torch-gpu}"
bridge="$BUILD/interop/torch/python/mok_torch/libmok_torch_bridge.so"
[ -f "$bridge" ] || { echo "missing $bridge: configure with -DMOK_TORCH=ON and build it first" \
  "(cmake --build $BUILD --target mok_torch_bridge)" >&2; exit 1; }
ldd "$bridge" | grep -q libcublas || { echo "$bridge has no CUDA kernels: $BUILD was configured without CUDA" >&2; exit 1; }
rm -rf "$OUT/mok_torch"
mkdir -p "$OUT/mok_torch"
cp "$bridge" "$OUT/mok_torch/"
cp "$ROOT"/interop/torch/mok_torch/*.py "$OUT/mok_torch/"
# As pack.sh: what the GPU machine provides itself stays out.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libcublasLt|libnccl|libcudnn|libopenblas|libgfortran|libquadmath)'
ldd "$bridge" | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
  [[ "$name" =~ $skip ]] && continue
  cp -L "$path" "$OUT/mok_torch/$name"
done
strip --strip-unneeded "$OUT"/mok_torch/*.so*
ls -l "$OUT/mok_torch" | awk 'NR > 1 {printf "  %10d  %s\n", $5, $9}'
du -sh "$OUT" | awk '{print "packed " $1 " into " $2}'
