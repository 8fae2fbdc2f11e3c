#pragma once
// The memory plan of a config, before anything runs: what one rank (device) needs by
// category — parameters, gradients, Adam state, saved activations, workspace, communication
// buffers — in the run's precision (bf16 on a GPU: activations in 2 bytes and a bf16 compute
// copy of every weight beside its fp32 master; fp32 otherwise) with expert parallelism over
// parallel.ranks, and the largest batch that fits a capacity. It is an estimate (on a GPU,
// of the allocator's overheads only the parameter state's size-class rounding, as
// "allocator_rounding"; saved tensors counted per kind as the kitten policy keeps them,
// core/plan/saved_activation_plan.h): `mok plan` prints it with the accuracy
// measured against real peaks (docs/training.md, "Memory plan"); the workbench's memory bar
// shows it until a run's measured figures replace it.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/config/experiment_config.h"
#include "core/plan/saved_activation_plan.h"

namespace mok {

struct MemoryEstimate {
  struct Part {
    std::string category;  // MemCategory names: parameters, gradients, optimizer_state, ...
    double bytes = 0.0;
  };
  std::vector<Part> parts;  // per device (rank)
  // The saved activations of `parts` by kind and how each is kept, largest first
  // (saved_bytes_by_kind): where their bytes go.
  std::vector<SavedKindBytes> saved_by_kind;
  double parameter_count = 0.0;        // whole model
  double device_parameter_count = 0.0; // held by one rank
  double replicated_parameter_count = 0.0;  // of those, held by every rank (all but the routed experts)
  // Kitten runs with kittens.warmup_steps: parts are the steady state (the policy past its
  // warm-up); during the first kitten_warmup_steps steps everything is kept exact (norm
  // outputs still recomputed), which takes warmup_saved_activation_bytes of saved
  // activations and warmup_total_bytes in all. 0 without a warm-up.
  int kitten_warmup_steps = 0;
  double warmup_saved_activation_bytes = 0.0;
  double warmup_total_bytes = 0.0;
  double total_bytes() const;
  double bytes_of(const std::string& category) const;
};

MemoryEstimate estimate_memory(const ExperimentConfig& config);

// The largest train.batch (a multiple of ranks × grad_accum, at most `upto`) whose estimate
// fits `capacity_bytes`; 0 when not even the smallest does.
int largest_batch_that_fits(const ExperimentConfig& config, double capacity_bytes, int upto = 1 << 16);

// The largest multiple of `step` (at most `upto`) for which `fits` holds, given that it holds
// for all smaller ones too (memory grows with the batch); 0 when not even `step` fits.
int largest_multiple_that_fits(int step, int upto, const std::function<bool(int)>& fits);

// Physical memory of this machine in bytes (the capacity of the CPU "device").
double host_memory_bytes();

}  // namespace mok
