#pragma once
// CommPurpose and CommStats: what a Communicator has moved, per peer and per purpose.
//
// Every collective names its purpose (dispatch, combine, gradients, weights, control), and
// the communicator adds the bytes of every message it sends or receives to the matching
// (purpose, peer) cell. The cell of the own rank counts self-copies: those bytes stay in
// memory and are reported as local, never as remote traffic.

#include <array>
#include <cstdint>
#include <vector>

#include "core/real.h"

MOK_NN_BEGIN

enum class CommPurpose : int {
  dispatch = 0,   // tokens shipped to the experts' ranks (and their gradients in backward)
  combine = 1,    // expert outputs shipped back (and their gradients in backward)
  gradients = 2,  // dense-parameter gradient all-reduce
  weights = 3,    // parameter broadcast, expert weights fetched for shadow copies
  control = 4,    // counts, routing metadata, small scalars
};
inline constexpr int kCommPurposeCount = 5;

// "dispatch", "combine", "gradients", "weights", "control".
const char* comm_purpose_name(CommPurpose purpose);

struct CommStats {
  int ranks = 1;  // communicator size
  int self = 0;   // own rank: the local column
  // Byte counters, indexed [purpose * ranks + peer].
  std::vector<int64_t> sent_bytes, received_bytes;
  // Non-empty messages to other ranks, per purpose.
  std::array<int64_t, kCommPurposeCount> remote_messages{};
  int64_t calls = 0;             // collectives (and barriers) entered
  double wall_seconds = 0.0;     // time inside collectives, waiting for peers included
  double modeled_seconds = 0.0;  // time the emulated link would have taken (LinkModel)
  // Device time of transfers run beside compute on a transfer stream; what the compute
  // waited for of it is in wall_seconds.
  double overlapped_seconds = 0.0;

  CommStats() = default;
  CommStats(int ranks, int self);

  int64_t sent(CommPurpose purpose, int peer) const;
  int64_t received(CommPurpose purpose, int peer) const;
  // Bytes to / from other ranks only.
  int64_t remote_sent(CommPurpose purpose) const;
  int64_t remote_received(CommPurpose purpose) const;
  int64_t remote_sent_total() const;
  int64_t remote_received_total() const;
  // Bytes a rank "sent" to itself (copied in memory).
  int64_t local_bytes(CommPurpose purpose) const;

  void add(CommPurpose purpose, int peer, int64_t sent, int64_t received);
  void reset();
  // Counters accumulated since `earlier` (a copy taken from the same communicator).
  CommStats since(const CommStats& earlier) const;
};

MOK_NN_END
