#!/usr/bin/env bash
# Builds the core, the CLI and their tests with sanitizers in a build folder of their own
# and runs the core, cli and fuzz test suites there (the GUI suites are left out: Qt itself
# is not instrumented, and the widgets exercise no core code the other suites miss).
#
#   tools/sanitize_tests.sh            ASan + UBSan in build-asan/, the suites below (what CI
#                                      runs after the test suite: a build of the core and
#                                      30 suites, then about a minute of tests on 2 cores)
#   tools/sanitize_tests.sh address all  ASan + UBSan, every core, cli and fuzz suite
#   tools/sanitize_tests.sh thread     TSan in build-tsan/: the suites with threads (the
#                                      trainer's rank threads, the thread pool, the
#                                      communicators, the store's writers, mok train; CI
#                                      runs it too: a build and 18 suites, about 4 minutes
#                                      on 2 cores)
#   MOK_SANITIZE_TESTS=REGEX MOK_SANITIZE_TARGETS="t1 t2 ..."  any other selection
#
# Any finding stops the test that made it (UBSan does not recover), so the ctest summary
# lists the failing tests; their output holds the report.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS="${MOK_JOBS:-$(nproc)}"
mode="${1:-address}"
scope="${2:-}"
selected_tests() {  # the ctest regex of these targets in the core, cli and fuzz folders
  echo "^(core|cli|fuzz)\\.($(IFS='|'; echo "$*"))\$"
}
case "$mode" in
  address)
    sanitizers="address,undefined"; build="${MOK_ASAN_BUILD_DIR:-$ROOT/build-asan}"
    if [ "$scope" = all ]; then
      targets=(mok mok_mpi_comm_check)
      for t in "$ROOT"/tests/core/test_*.cpp "$ROOT"/tests/cli/test_*.cpp "$ROOT"/tests/fuzz/fuzz_*.cpp; do
        targets+=("$(basename "$t" .cpp)")
      done
      default_tests='^(core|cli|fuzz)\.'
    else
      # Everything that reads what a user or a disk hands over (configs, overrides,
      # checkpoints, tokenizers, corpora, the run store and imports), training runs start to end (two
      # threads, the MoK dispatcher, the fixed row exchange), stop and resume, the fuzz targets. Left out:
      # test_cli_interrupt, whose long steps take 4 minutes under ASan (19 s without).
      suites=(fuzz_config_yaml fuzz_config_override fuzz_safetensors fuzz_trainer_state fuzz_tokenizer_text
              fuzz_corpus_text fuzz_run_store test_run_import test_config test_config_bad_input test_checkpoint test_checkpoint_integrity
              test_checkpoint_safetensors test_tokenizer test_data_corpus test_data_batches test_store
              test_store_safety test_train test_step_cancellation test_resume_branch test_memory_fit
              test_slow_step_notice test_thread_pool test_kitten_policy test_mok_dispatcher test_fixed_row_exchange
              test_cli_train test_cli_config test_cli_resume test_cli_nan_weights)
      targets=(mok "${suites[@]}")
      default_tests="$(selected_tests "${suites[@]}")"
    fi ;;
  thread)
    # The suites whose code runs on several threads; only these are built. The thread pool
    # (parallel.threads 2), rank threads and the communicators and their rendezvous, the dispatchers'
    # communication worker, the store's background metric writer (every training run), the
    # trainer's pause and stop from another thread, and `mok train` itself. Left out:
    # test_cli_interrupt, whose long steps pass Qt Test's 5-minute limit under TSan (28 s
    # without; test_step_cancellation and test_train stop runs from other threads), and
    # test_store_processes, whose forked writers start threads in a child of Qt Test's
    # process (which has a watchdog thread): TSan cannot follow threads started after a fork
    # of a threaded process (test_store runs the background metric writer).
    sanitizers="thread"; build="${MOK_TSAN_BUILD_DIR:-$ROOT/build-tsan}"
    targets=(test_thread_pool test_communicator test_comm_worker test_rank_rendezvous test_data_plane test_parallel_train
             test_parallel_generation test_mok_training test_mok_dispatcher test_fixed_row_exchange test_locality_loss_train
             test_model_determinism test_step_cancellation test_slow_step_notice test_train
             test_resume_branch test_store test_store_checkpoint_commit test_cli_train
             test_cli_kill_random mok)
    default_tests="$(selected_tests "${targets[@]}")" ;;
  *) echo "usage: tools/sanitize_tests.sh [address [all]|thread]" >&2; exit 2 ;;
esac
tests="${MOK_SANITIZE_TESTS:-$default_tests}"
if [ -n "${MOK_SANITIZE_TARGETS:-}" ]; then read -r -a targets <<< "$MOK_SANITIZE_TARGETS"; fi

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

if [ ! -f "$build/build.ninja" ]; then
  say "configuring $build ($sanitizers)"
  # -O2 with assertions kept (no NDEBUG); no GUI, no CUDA.
  cmake -S "$ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2" -DMOK_SANITIZE="$sanitizers" \
    -DMOK_BUILD_GUI=OFF -DMOK_CUDA=OFF
fi
say "building $build ($JOBS jobs)"
cmake --build "$build" -j "$JOBS" --target "${targets[@]}"

# Reports name the test's source lines; leaks of the libraries we do not build (Open MPI,
# Qt) are listed in tools/sanitizer-suppressions/.
supp="$ROOT/tools/sanitizer-suppressions"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$supp/lsan.supp:print_suppressions=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp}"
# OpenBLAS and OpenMP keep no thread pools of their own (the core sets OpenBLAS to one thread
# anyway; without these it would still start its pool when loaded).
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

say "running the tests matching $tests under $sanitizers"
cd "$build"
ctest --output-on-failure -j "$JOBS" --timeout 1800 -R "$tests"
