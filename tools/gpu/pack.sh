#!/usr/bin/env bash
# Packs the headless binaries for a GPU machine that has CUDA and OpenBLAS but not this
# machine's other libraries: `mok` and `mok-gpu-check` with every shared library they load
# that is not part of the C/C++ runtime, the CUDA stack or OpenBLAS (yaml-cpp, SQLite, Open
# MPI, …) into one folder, stripped. Run them there with LD_LIBRARY_PATH=FOLDER.
#   tools/gpu/pack.sh [BUILD_DIR] [OUT_DIR]      (default build, build-gpu)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
OUT="${2:-$ROOT/build-gpu}"
mkdir -p "$OUT"
bins=("$BUILD/app/mok" "$BUILD/tools/gpu/mok-gpu-check")
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "missing $b: build it first (cmake --build $BUILD --target mok mok-gpu-check)" >&2; exit 1; }
  cp "$b" "$OUT/"
done
# Libraries the GPU machine provides itself (C and compiler runtimes, CUDA, and OpenBLAS,
# which is large and ABI-stable under its soname): left out.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libcublasLt|libnccl|libcudnn|libopenblas|libgfortran|libquadmath)'
ldd "${bins[@]}" | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
  [[ "$name" =~ $skip ]] && continue
  cp -L "$path" "$OUT/$name"
done
strip "$OUT/mok" "$OUT/mok-gpu-check"
du -sh "$OUT" | awk '{print "packed " $1 " into " $2}'
