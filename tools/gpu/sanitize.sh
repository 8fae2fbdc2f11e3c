#!/usr/bin/env bash
# compute-sanitizer over the GPU checks: memcheck (out-of-bounds and misaligned accesses,
# leaks) and racecheck (shared-memory hazards), each on the check groups given, with the
# error summary of each run printed last.
#   tools/gpu/sanitize.sh BIN_DIR [MEMCHECK_GROUPS] [RACECHECK_GROUPS]
# (groups as mok-gpu-check --checks takes them; defaults: every group for memcheck, the
# kernels that use shared memory for racecheck; "none" skips that tool)
set -uo pipefail
export NCCL_NVLS_ENABLE=0
BIN="$(cd "${1:?BIN_DIR}" && pwd)"
MEM="${2:-elementwise,gemm,moe,attention,sketch,model,graph}"
RACE="${3:-elementwise,moe,attention,lowbit}"
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
CS="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
status=0
for tool in memcheck racecheck; do
  groups=$MEM; [ "$tool" = racecheck ] && groups=$RACE
  [ "$groups" = none ] && continue
  log="${OUT:-/tmp}/sanitize_$tool.log"
  timeout "${SANITIZE_TIMEOUT:-600}" "$CS" --tool "$tool" --error-exitcode 9 "$BIN/mok-gpu-check" --checks "$groups" --no-timings > "$log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && status=1
  printf '%-10s groups %-45s exit %d  %s\n' "$tool" "$groups" "$rc" "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)"
  grep -E "FAIL|Invalid|Race|Hazard" "$log" | head -5
done
exit $status
