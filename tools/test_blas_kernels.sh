#!/usr/bin/env bash
# Runs the whole test suite once per OpenBLAS kernel family this CPU can execute, and prints
# one table row per family. Different x86-64 CPUs make OpenBLAS pick different GEMM kernels
# (SSE3, AVX, AVX2, AVX-512), whose results differ in the last bits; every test must pass
# under each of them. OpenBLAS built with DYNAMIC_ARCH (Debian's is) takes the family from
# OPENBLAS_CORETYPE, so one machine can stand in for many (docs/training.md, Reproducibility).
#
#   tools/test_blas_kernels.sh                      # every family this CPU supports
#   tools/test_blas_kernels.sh Haswell SkylakeX     # only these
#   tools/test_blas_kernels.sh -- -L core           # extra arguments after -- go to ctest
#
# Environment: MOK_BUILD_DIR (default build/), MOK_JOBS (ctest -j, default nproc).
# Logs: $MOK_BUILD_DIR/blas-kernels/<family>.log. Exit status 1 when any family fails.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${MOK_BUILD_DIR:-$ROOT/build}"
JOBS="${MOK_JOBS:-$(nproc)}"
LOGS="$BUILD/blas-kernels"

families=()
ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; ctest_args=("$@"); break ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) families+=("$1"); shift ;;
  esac
done
# One family per x86-64 kernel generation OpenBLAS has: SSE3, SSE4.2, AVX, AVX2 (Intel and
# AMD tuning), AVX-512 and AVX-512 with bf16.
[ ${#families[@]} -eq 0 ] && families=(Prescott Nehalem Sandybridge Haswell Zen SkylakeX Cooperlake)

if [ ! -x "$BUILD/app/mok" ]; then
  echo "no build in $BUILD (build first, or set MOK_BUILD_DIR)" >&2
  exit 2
fi

# The CPU flags each family's kernels execute (/proc/cpuinfo names; "pni" is SSE3).
required_flags() {
  case "$1" in
    Prescott) echo "pni" ;;
    Nehalem) echo "ssse3 sse4_2" ;;
    Sandybridge) echo "avx" ;;
    Haswell|Zen) echo "avx2 fma" ;;
    SkylakeX) echo "avx512f avx512cd avx512bw avx512dq avx512vl" ;;
    Cooperlake) echo "avx512f avx512cd avx512bw avx512dq avx512vl avx512_bf16" ;;
    *) echo "" ;;
  esac
}

cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
missing_flags() {
  local out=""
  for f in $(required_flags "$1"); do
    case "$cpu_flags" in *" $f "*) ;; *) out="$out $f" ;; esac
  done
  echo "${out# }"
}

# The family OpenBLAS actually loads under OPENBLAS_CORETYPE=$1 ("" = its own choice): an
# unknown or unbuilt name falls back silently, so ask it (OPENBLAS_VERBOSE=2 prints "Core: X").
chosen_family() {
  OPENBLAS_VERBOSE=2 OPENBLAS_CORETYPE="$1" "$BUILD/app/mok" --version 2>&1 >/dev/null |
    sed -n 's/.*Core: *\([A-Za-z0-9_]*\).*/\1/p' | head -1
}

mkdir -p "$LOGS"
cpu_model="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
default_family="$(chosen_family "")"
echo "CPU: ${cpu_model:-unknown}; OpenBLAS picks ${default_family:-?} by default; ctest -j $JOBS ${ctest_args[*]:-}"
echo

rows=()
status=0
for fam in "${families[@]}"; do
  missing="$(missing_flags "$fam")"
  if [ -n "$missing" ]; then
    rows+=("$(printf '%-12s %-12s %-9s %7s  %s' "$fam" "-" "skipped" "-" "this CPU lacks: $missing")")
    continue
  fi
  chosen="$(chosen_family "$fam")"
  if [ "$chosen" != "$fam" ]; then
    rows+=("$(printf '%-12s %-12s %-9s %7s  %s' "$fam" "${chosen:-?}" "skipped" "-" "this OpenBLAS does not load it")")
    continue
  fi
  log="$LOGS/$fam.log"
  echo "== $fam: ctest (log: $log)"
  start=$(date +%s)
  OPENBLAS_CORETYPE="$fam" ctest --test-dir "$BUILD" -j "$JOBS" --output-on-failure "${ctest_args[@]}" >"$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  summary="$(grep -E 'tests passed, [0-9]+ tests? failed out of' "$log" | tail -1)"
  total="$(sed -n 's/.* out of \([0-9]*\).*/\1/p' <<<"$summary")"
  failed="$(sed -n 's/.*tests passed, \([0-9]*\) tests\{0,1\} failed.*/\1/p' <<<"$summary")"
  names="$(sed -n '/The following tests FAILED:/,$p' "$log" | sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) .*/\1/p' | paste -sd' ' -)"
  if [ -z "$total" ]; then
    result="no result"; status=1
  elif [ "$rc" -ne 0 ] || [ "${failed:-0}" -ne 0 ]; then
    result="$((total - failed))/$total"; status=1
  else
    result="$total/$total"
  fi
  rows+=("$(printf '%-12s %-12s %-9s %7s  %s' "$fam" "$chosen" "$result" "$secs" "${names:-}")")
done

echo
printf '%-12s %-12s %-9s %7s  %s\n' "family" "loaded" "passed" "time_s" "failed tests"
for r in "${rows[@]}"; do echo "$r"; done
exit $status
