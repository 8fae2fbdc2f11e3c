#!/usr/bin/env bash
# Batched inference benchmark: `mok generate` over R expert-parallel ranks, classic vs MoK.
#   tools/bench_generate.sh CHECKPOINT_DIR
# Environment: BUILD (default build), BATCHES (default "16 128"), RANKS (default "1 2"),
# TOKENS (default 32), PROMPT_TOKENS (default 32), LINKS (default "0:0 10:5", GB/s:µs; 0 =
# no emulated link), REPEAT (default 3: the median tokens/s is shown), THREADS (per rank,
# default 1). Prompts are validation windows (--prompts-from-data), decoding greedy.
# Prints a markdown table: tokens/s (median decode), prefill s, remote bytes by purpose,
# modeled link ms, experts shadowed and bytes saved (MoK). Figures only; nothing passes or fails.
set -euo pipefail
cd "$(dirname "$0")/.."
CKPT=${1:?usage: tools/bench_generate.sh CHECKPOINT_DIR}
BUILD=${BUILD:-build}
BATCHES=${BATCHES:-"16 128"}
RANKS=${RANKS:-"1 2"}
TOKENS=${TOKENS:-32}
PROMPT_TOKENS=${PROMPT_TOKENS:-32}
LINKS=${LINKS:-"0:0 10:5"}
REPEAT=${REPEAT:-3}
THREADS=${THREADS:-1}
MOK=$BUILD/app/mok
echo "# bench_generate $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname), $(nproc) cores: $CKPT, $TOKENS new tokens, prompts of $PROMPT_TOKENS"
echo
echo "| B | R | dispatcher | link GB/s:µs | tokens/s | prefill s | remote bytes | dispatch | combine | weights | control | modeled ms | shadowed | bytes saved |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for B in $BATCHES; do
  for R in $RANKS; do
    for LINK in $LINKS; do
      GBPS=${LINK%%:*}
      LAT=${LINK##*:}
      if [ "$R" = 1 ]; then DISPATCHERS=local; [ "$LINK" != "${LINKS%% *}" ] && continue; else DISPATCHERS="classic mok"; fi
      for D in $DISPATCHERS; do
        ARGS=(generate "$CKPT" --batch "$B" --ranks "$R" --tokens "$TOKENS" --prompts-from-data "$PROMPT_TOKENS"
              --temperature 0 --threads "$THREADS" --link-gbps "$GBPS" --link-latency-us "$LAT" --json)
        [ "$D" != local ] && ARGS+=(--dispatcher "$D")
        RUNS=""
        for _ in $(seq "$REPEAT"); do RUNS+="$("$MOK" "${ARGS[@]}" | tail -1)"$'\n'; done
        printf '%s' "$RUNS" | python3 -c '
import json, sys, statistics
runs = [json.loads(l) for l in sys.stdin if l.strip()]
j = runs[len(runs) // 2]
tps = statistics.median(r["tokens_per_s"] for r in runs)
pre = statistics.median(r["prefill_s"] for r in runs)
print("| %d | %d | %s | %s | %.0f | %.3f | %d | %d | %d | %d | %d | %.2f | %d | %d |" % (
    j["batch"], j["ranks"], j["dispatcher"], sys.argv[1], tps, pre, j["remote_bytes"], j["dispatch_bytes"],
    j["combine_bytes"], j["weight_bytes"], j["control_bytes"], j["modeled_ms"], j["shadowed_experts"], j["bytes_saved"]))
' "$LINK"
      done
    done
  done
done
