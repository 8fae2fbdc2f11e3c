#pragma once
// A quick estimate of the memory one device needs for a config, before anything runs:
// parameters, gradients, Adam state, saved activations and the largest workspace, in the
// run's precision (bf16 on a GPU: activations in 2 bytes and a bf16 compute copy of every
// weight beside its fp32 master; fp32 otherwise) with expert parallelism over parallel.ranks. It is an estimate (no allocator
// overheads, a simple per-token count of saved tensors), labelled as such in the GUI; the
// tracker's measured figures replace it once a run starts.

#include <cstdint>
#include <string>
#include <vector>

#include "core/config/experiment_config.h"

namespace mok::gui {

struct MemoryEstimate {
  struct Part {
    std::string category;  // MemCategory names: parameters, gradients, optimizer_state, ...
    double bytes = 0.0;
  };
  std::vector<Part> parts;  // per device (rank)
  double parameter_count = 0.0;        // whole model
  double device_parameter_count = 0.0; // held by one rank
  double total_bytes() const;
  double bytes_of(const std::string& category) const;
};

MemoryEstimate estimate_memory(const ExperimentConfig& config);

// Physical memory of this machine in bytes (the capacity of the CPU "device").
double host_memory_bytes();

}  // namespace mok::gui
