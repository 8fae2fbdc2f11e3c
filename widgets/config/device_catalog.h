#pragma once
// DeviceCatalog: the devices a run can be placed on, as the Setup page offers them — the CPU
// first, then each usable GPU (list_devices(), core/backend/exec_context.h) — and why no GPU
// can be used when none can. The workbench looks it up once at start (of_this_machine, after
// the CUDA backend registered); tests build their own to show either case on any machine.

#include <string>
#include <vector>

#include "core/backend/exec_context.h"
#include "core/config/experiment_config.h"
#include "core/train/rank_device.h"

namespace mok::gui {

struct DeviceCatalog {
  std::vector<DeviceDescription> devices;  // the CPU first, then each GPU
  std::string gpu_unavailable_reason;      // "" when a GPU is usable

  static DeviceCatalog of_this_machine();

  bool has_gpu() const { return gpu_unavailable_reason.empty(); }
  // The GPU cuda:`index`, or null when this machine has no such GPU.
  const DeviceDescription* gpu(int index) const;
  // Capacity of the device rank 0 of `config` computes on, in bytes: host memory for the CPU,
  // the GPU's memory for cuda; 0 when that GPU is not here.
  double capacity_bytes(const ExperimentConfig& config) const;
};

// Where rank 0 of `config` computes and in which precision, as plan_rank_device places it
// (label() "cpu" / "cuda:1", precision "fp32" / "bf16"); where parallel.gpus does not name
// one GPU per rank (a validation problem), on the first GPU it names.
RankDevice rank0_device(const ExperimentConfig& config);

}  // namespace mok::gui
