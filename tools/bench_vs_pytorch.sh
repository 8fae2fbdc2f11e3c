#!/bin/sh
# Training throughput, mok vs PyTorch on the CPU (see bench_vs_pytorch.py).
#   tools/bench_vs_pytorch.sh [--threads N] [--steps N] [--cases dense,moe] [--mok PATH]
# Needs a built `mok` (build/app/mok by default) and Debian's python3-torch, installed here
# with apt-get when missing.
set -e
here=$(cd "$(dirname "$0")" && pwd)
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "installing python3-torch (Debian package) ..." >&2
  if [ "$(id -u)" = 0 ]; then apt-get install -y python3-torch >&2
  else sudo apt-get install -y python3-torch >&2; fi
fi
exec /usr/bin/python3 "$here/bench_vs_pytorch.py" "$@"
