#include "core/train/rank_device.h"

#include <stdexcept>

#include "core/config/config_check.h"

namespace mok {

std::string RankDevice::label() const { return kind == "cpu" ? kind : kind + ":" + std::to_string(index); }

DType compute_dtype_for(const ExperimentConfig& config) {
  const std::string& p = config.train.precision;
  if (config.parallel.device != "cuda") return kRealDType;
  return p == "fp32" ? DType::f32 : DType::bf16;
}

std::string data_plane_transport(const ExperimentConfig& config) {
  return config.parallel.comm == "peer" ? "peer" : "nccl";
}

RankDevice plan_rank_device(const ExperimentConfig& config, int rank, int ranks, int local_rank) {
  RankDevice d;
  if (config.parallel.device != "cuda") return d;  // every rank on the host CPU
  d.kind = "cuda";
  d.index = local_rank;
  if (!config.parallel.gpus.empty()) {
    const std::vector<int> ids = parse_gpu_list(config.parallel.gpus);
    if (static_cast<int>(ids.size()) != ranks)
      throw std::runtime_error("parallel.gpus names " + std::to_string(ids.size()) + " GPU(s) for " +
                               std::to_string(ranks) + " rank(s)");
    d.index = ids[rank];
  }
  d.precision = compute_dtype_for(config) == DType::bf16 ? "bf16" : "fp32";
  d.name = d.label();
  return d;
}

RankDevice bind_rank_device(const ExperimentConfig& config, int rank, int ranks, int local_rank) {
  RankDevice d = plan_rank_device(config, rank, ranks, local_rank);
  if (d.kind == "cpu") return d;
  d.context = make_exec_context(Device::cuda(d.index), compute_dtype_for(config));
  d.name = d.context->ops().name();
  return d;
}

}  // namespace mok
