#include "core/parallel/link_model.h"

#include <algorithm>
#include <stdexcept>

MOK_NN_BEGIN

LinkModel LinkModel::from_config(const ParallelConfig& parallel, bool sleep) {
  if (parallel.link_gbps < 0.0 || parallel.link_latency_us < 0.0)
    throw std::invalid_argument("parallel.link_gbps and parallel.link_latency_us must be >= 0");
  LinkModel m;
  m.gbps = parallel.link_gbps;
  m.latency_us = parallel.link_latency_us;
  m.sleep = sleep;
  return m;
}

double LinkModel::message_seconds(int64_t bytes) const {
  if (!enabled() || bytes <= 0) return 0.0;
  return latency_us * 1e-6 + static_cast<double>(bytes) / (gbps * 1e9);
}

double LinkModel::collective_seconds(std::span<const int64_t> send_bytes,
                                     std::span<const int64_t> recv_bytes, int self) const {
  if (!enabled()) return 0.0;
  double send_s = 0.0, recv_s = 0.0;
  for (size_t p = 0; p < send_bytes.size(); ++p)
    if (static_cast<int>(p) != self) send_s += message_seconds(send_bytes[p]);
  for (size_t p = 0; p < recv_bytes.size(); ++p)
    if (static_cast<int>(p) != self) recv_s += message_seconds(recv_bytes[p]);
  return std::max(send_s, recv_s);
}

double LinkModel::barrier_seconds(int ranks) const {
  if (!enabled() || ranks <= 1) return 0.0;
  return (ranks - 1) * latency_us * 1e-6;
}

MOK_NN_END
