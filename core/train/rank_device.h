#pragma once
// RankDevice: where one rank of a training run computes, and the one place that chooses it.
//
// parallel.device cpu: the host CPU (the process's CPU context). parallel.device cuda: the
// GPU parallel.gpus names for the rank (default: the rank's index on its host), computing in
// train.precision (auto = bf16). The rank body runs under the device's ExecContext
// (rank_launch.cpp), so the model is built and stepped there; nothing else chooses a device.

#include <memory>
#include <string>

#include "core/backend/exec_context.h"
#include "core/config/experiment_config.h"

namespace mok {

struct RankDevice {
  std::string kind = "cpu";  // "cpu" | "cuda"
  int index = 0;             // device ordinal on this host (0 for the CPU)
  std::string precision = "fp32";  // compute dtype of activations: "fp32" | "bf16"
  std::string name = "cpu";        // what the ops table says of itself, e.g. "cuda:0 NVIDIA H200"
  std::shared_ptr<ExecContext> context;  // null: the process's CPU context

  // "cpu", "cuda:1": what events and the run store show.
  std::string label() const;
  ExecContext& exec() const { return context ? *context : cpu_context(); }
};

// Where rank `rank` (of `ranks`), the `local_rank`-th rank of its host, will compute and in
// which precision, without opening the device (context stays null, name is the label): what a
// front end shows before and while a run computes. Throws std::runtime_error when
// parallel.gpus does not name one GPU per rank.
RankDevice plan_rank_device(const ExperimentConfig& config, int rank, int ranks, int local_rank);

// The device of rank `rank` (of `ranks`), the `local_rank`-th rank of this host: one local
// thread or one MPI process — plan_rank_device, opened. Throws std::runtime_error saying why
// when the device cannot be used (no GPU here, no CUDA in this build, a GPU index that does
// not exist).
RankDevice bind_rank_device(const ExperimentConfig& config, int rank, int ranks, int local_rank);

// The data plane's transport between GPU ranks of this config (make_data_plane): "peer" when
// parallel.comm says so, else "nccl" (whatever carries the host messages; CPU ranks ignore it).
std::string data_plane_transport(const ExperimentConfig& config);

// The compute dtype train.precision asks for on `device` ("auto": bf16 on a GPU, fp32 on the CPU).
DType compute_dtype_for(const ExperimentConfig& config);

}  // namespace mok
