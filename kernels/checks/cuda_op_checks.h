#pragma once
// Correctness checks of the CUDA kernels against CPU references in double precision, on
// fresh random inputs, with outputs poisoned (NaN) before each launch so that unwritten
// elements fail. One source for two drivers: the Qt test (tests/cuda) and the standalone
// GPU check/benchmark program (tools/gpu), which needs nothing but CUDA.

#include <string>
#include <vector>

namespace mok::cuda {

struct OpCheck {
  std::string name;
  double relative_error = 0.0;  // ‖gpu − ref‖ / ‖ref‖ (inf if any output is not finite)
  double tolerance = 0.0;
  bool passed() const { return relative_error <= tolerance; }
};

// Check groups: elementwise, gemm, moe, attention, sketch, kittens (low-bit saved copies),
// model (the whole training step),
// parallel (two GPUs as two ranks).
const std::vector<std::string>& cuda_check_groups();

// Runs the checks of `groups` (empty: every group) on the current device; `seed` makes the
// inputs fresh per call. Throws std::invalid_argument for an unknown group.
std::vector<OpCheck> run_cuda_op_checks(unsigned long long seed, const std::vector<std::string>& groups = {});

}  // namespace mok::cuda
