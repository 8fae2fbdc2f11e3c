#include "widgets/config/device_catalog.h"

#include <algorithm>
#include <stdexcept>

#include "core/config/config_check.h"
#include "core/plan/memory_plan.h"

namespace mok::gui {

DeviceCatalog DeviceCatalog::of_this_machine() {
  return {list_devices(), device_unavailable_reason(DeviceType::cuda)};
}

const DeviceDescription* DeviceCatalog::gpu(int index) const {
  for (const DeviceDescription& d : devices)
    if (d.device == Device::cuda(index)) return &d;
  return nullptr;
}

double DeviceCatalog::capacity_bytes(const ExperimentConfig& config) const {
  const RankDevice device = rank0_device(config);
  if (device.kind == "cpu") return host_memory_bytes();
  const DeviceDescription* d = gpu(device.index);
  return d ? double(d->memory_bytes) : 0.0;
}

RankDevice rank0_device(const ExperimentConfig& config) {
  try {
    return plan_rank_device(config, 0, std::max(1, config.parallel.ranks), 0);
  } catch (const std::runtime_error&) {
    ExperimentConfig one_rank = config;
    const std::vector<int> ids = parse_gpu_list(config.parallel.gpus);
    one_rank.parallel.ranks = 1;
    one_rank.parallel.gpus = ids.empty() ? std::string() : std::to_string(ids.front());
    return plan_rank_device(one_rank, 0, 1, 0);
  }
}

}  // namespace mok::gui
