#pragma once
// Whether a CPU run's memory plan (memory_plan.h) fits this machine, judged before the run
// starts. A plan a little over the machine's memory may still run (the estimate is rough,
// and the OS can swap), so it is a warning; one far over it would swap for hours or be
// killed midway, so it is refused with what to change.
//
//   MemoryFit fit = host_memory_fit(config, host_memory_bytes());
//   if (fit.verdict == MemoryVerdict::refuse) fail(fit.message);
//   else if (fit.verdict == MemoryVerdict::warn) warn(fit.message);

#include <string>

#include "core/config/experiment_config.h"

namespace mok {

enum class MemoryVerdict { fits, warn, refuse };

// Above this many times the machine's memory a plan is refused rather than warned about.
inline constexpr double kMemoryRefuseFactor = 2.0;

// The threshold rule alone: fits up to `capacity_bytes`, warn up to kMemoryRefuseFactor ×
// that, refuse beyond. An unknown capacity (≤ 0) always fits.
MemoryVerdict judge_memory_fit(double need_bytes, double capacity_bytes);

struct MemoryFit {
  MemoryVerdict verdict = MemoryVerdict::fits;
  double need_bytes = 0.0;      // the whole process: every rank it runs as a thread
  double capacity_bytes = 0.0;
  std::string largest_category;  // of one rank's plan ("saved_activations", ...)
  std::string message;           // for warn and refuse: sizes, the largest category, what to change
};

// The plan of a CPU run against `capacity_bytes` (a GPU run's plan is checked against its
// device elsewhere: always fits here). Ranks that are threads of this process
// (parallel.comm: local) share its memory; an MPI rank is a process of its own.
MemoryFit host_memory_fit(const ExperimentConfig& config, double capacity_bytes);

}  // namespace mok
