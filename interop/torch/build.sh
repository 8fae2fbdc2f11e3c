#!/bin/sh
# Builds the PyTorch extension (docs/interop.md, "PyTorch modules") into BUILD/interop/torch/python.
#
#   interop/torch/build.sh [BUILD]          # BUILD defaults to build
#   PYTHONPATH=BUILD/interop/torch/python /usr/bin/python3 -c 'import mok_torch'
#
# Turns on MOK_TORCH in the build folder (its other settings stay) and builds the target
# mok_torch: the bridge library (CMake) and mok_torch._C (torch.utils.cpp_extension). A fresh
# folder is configured as the README's build is (Ninja, Release, no CUDA).
set -eu
cd "$(dirname "$0")/../.."
build=${1:-build}
if [ -f "$build/CMakeCache.txt" ]; then
  nice -n 15 cmake -S . -B "$build" -DMOK_TORCH=ON
else
  nice -n 15 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOK_CUDA=OFF -DMOK_TORCH=ON
fi
nice -n 15 cmake --build "$build" --target mok_torch -j2
echo "built: PYTHONPATH=$build/interop/torch/python"
