#pragma once
// LinkModel: an emulated network link between ranks, so that runs on one machine can
// project what a slower link (PCIe, InfiniBand between nodes) would cost.
//
// Cost of one collective on one rank (rank r, messages to / from the other ranks p ≠ r):
//   send_s = Σ_p [bytes_to_p   > 0] · (latency_s + bytes_to_p   / bandwidth_Bps)
//   recv_s = Σ_p [bytes_from_p > 0] · (latency_s + bytes_from_p / bandwidth_Bps)
//   seconds = max(send_s, recv_s)
// i.e. one full-duplex port per rank that serialises its outgoing messages and, separately,
// its incoming ones. Self-copies and empty messages cost nothing. A barrier costs
// (R − 1) · latency: a token message to every peer, sent and received in parallel.
// With bandwidth 0 the model is off and every cost is zero.
//
// The modeled time is always added to CommStats::modeled_seconds; with `sleep` set the
// communicator also sleeps that long after each collective, so wall-clock figures include it.

#include <cstdint>
#include <span>

#include "core/config/experiment_config.h"
#include "core/real.h"

MOK_NN_BEGIN

struct LinkModel {
  double gbps = 0.0;        // bandwidth in GB/s (1e9 bytes per second); 0 → no emulation
  double latency_us = 0.0;  // per-message latency in microseconds
  bool sleep = false;       // also sleep for the modeled time

  static LinkModel from_config(const ParallelConfig& parallel, bool sleep = false);

  bool enabled() const { return gbps > 0.0; }
  // Seconds for one message of `bytes` (> 0) to a remote peer.
  double message_seconds(int64_t bytes) const;
  // Seconds of one collective on rank `self`: send_bytes[p] to and recv_bytes[p] from
  // each peer p (the formula above).
  double collective_seconds(std::span<const int64_t> send_bytes,
                            std::span<const int64_t> recv_bytes, int self) const;
  // Seconds of a barrier among `ranks` ranks.
  double barrier_seconds(int ranks) const;
};

MOK_NN_END
