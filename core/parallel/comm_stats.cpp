#include "core/parallel/comm_stats.h"

#include <stdexcept>

MOK_NN_BEGIN

const char* comm_purpose_name(CommPurpose purpose) {
  switch (purpose) {
    case CommPurpose::dispatch: return "dispatch";
    case CommPurpose::combine: return "combine";
    case CommPurpose::gradients: return "gradients";
    case CommPurpose::weights: return "weights";
    case CommPurpose::control: return "control";
  }
  return "unknown";
}

CommStats::CommStats(int ranks_, int self_)
    : ranks(ranks_),
      self(self_),
      sent_bytes(static_cast<size_t>(kCommPurposeCount) * ranks_, 0),
      received_bytes(static_cast<size_t>(kCommPurposeCount) * ranks_, 0) {}

static size_t cell(const CommStats& s, CommPurpose purpose, int peer) {
  if (peer < 0 || peer >= s.ranks) throw std::out_of_range("CommStats: peer out of range");
  return static_cast<size_t>(purpose) * s.ranks + peer;
}

int64_t CommStats::sent(CommPurpose purpose, int peer) const {
  return sent_bytes[cell(*this, purpose, peer)];
}

int64_t CommStats::received(CommPurpose purpose, int peer) const {
  return received_bytes[cell(*this, purpose, peer)];
}

int64_t CommStats::remote_sent(CommPurpose purpose) const {
  int64_t total = 0;
  for (int p = 0; p < ranks; ++p)
    if (p != self) total += sent(purpose, p);
  return total;
}

int64_t CommStats::remote_received(CommPurpose purpose) const {
  int64_t total = 0;
  for (int p = 0; p < ranks; ++p)
    if (p != self) total += received(purpose, p);
  return total;
}

int64_t CommStats::remote_sent_total() const {
  int64_t total = 0;
  for (int k = 0; k < kCommPurposeCount; ++k) total += remote_sent(static_cast<CommPurpose>(k));
  return total;
}

int64_t CommStats::remote_received_total() const {
  int64_t total = 0;
  for (int k = 0; k < kCommPurposeCount; ++k)
    total += remote_received(static_cast<CommPurpose>(k));
  return total;
}

int64_t CommStats::local_bytes(CommPurpose purpose) const { return sent(purpose, self); }

void CommStats::add(CommPurpose purpose, int peer, int64_t sent_, int64_t received_) {
  const size_t c = cell(*this, purpose, peer);
  sent_bytes[c] += sent_;
  received_bytes[c] += received_;
  if (peer != self && sent_ > 0) remote_messages[static_cast<size_t>(purpose)]++;
}

void CommStats::reset() { *this = CommStats(ranks, self); }

CommStats CommStats::since(const CommStats& earlier) const {
  if (earlier.ranks != ranks || earlier.self != self)
    throw std::invalid_argument("CommStats::since: snapshots of different communicators");
  CommStats d(ranks, self);
  for (size_t i = 0; i < sent_bytes.size(); ++i) {
    d.sent_bytes[i] = sent_bytes[i] - earlier.sent_bytes[i];
    d.received_bytes[i] = received_bytes[i] - earlier.received_bytes[i];
  }
  for (size_t k = 0; k < remote_messages.size(); ++k)
    d.remote_messages[k] = remote_messages[k] - earlier.remote_messages[k];
  d.calls = calls - earlier.calls;
  d.wall_seconds = wall_seconds - earlier.wall_seconds;
  d.modeled_seconds = modeled_seconds - earlier.modeled_seconds;
  d.overlapped_seconds = overlapped_seconds - earlier.overlapped_seconds;
  return d;
}

MOK_NN_END
