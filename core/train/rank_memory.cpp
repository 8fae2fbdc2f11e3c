#include "core/train/rank_memory.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/parallel/communicator.h"

namespace mok {
namespace {

constexpr int kCategories = static_cast<int>(MemCategory::count);
// One rank's part of the all-gather: peaks (total, saved, reserved, blocks), reserved now,
// live bytes by category, and the size of its serialized saved bytes per layer.
constexpr int kPeaks = 4;
constexpr int kFields = kPeaks + 1 + kCategories + 1;

// saved_by_kind as bytes: per entry the layer (i32), the kind's length (i32), the kind, the
// bytes (i64).
std::vector<char> encode(const std::map<std::pair<int, std::string>, int64_t>& saved) {
  std::vector<char> out;
  auto put = [&out](const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    out.insert(out.end(), c, c + n);
  };
  for (const auto& [key, bytes] : saved) {
    const int32_t layer = key.first, len = static_cast<int32_t>(key.second.size());
    put(&layer, sizeof layer);
    put(&len, sizeof len);
    put(key.second.data(), key.second.size());
    put(&bytes, sizeof bytes);
  }
  return out;
}

std::map<std::pair<int, std::string>, int64_t> decode(const std::vector<char>& in) {
  std::map<std::pair<int, std::string>, int64_t> saved;
  size_t at = 0;
  auto get = [&](void* p, size_t n) {
    if (at + n > in.size()) throw std::runtime_error("binding_rank_memory: a truncated list of saved bytes");
    std::memcpy(p, in.data() + at, n);
    at += n;
  };
  while (at < in.size()) {
    int32_t layer = 0, len = 0;
    int64_t bytes = 0;
    get(&layer, sizeof layer);
    get(&len, sizeof len);
    if (len < 0) throw std::runtime_error("binding_rank_memory: a negative kind length");
    std::string kind(static_cast<size_t>(len), '\0');
    get(kind.data(), kind.size());
    get(&bytes, sizeof bytes);
    saved[{layer, kind}] = bytes;
  }
  return saved;
}

}  // namespace

RankMemory RankMemory::take(int rank, const MemoryTracker& tracker, int64_t reserved_bytes, const MemoryPeaks& peaks) {
  RankMemory m;
  m.rank = rank;
  for (int c = 0; c < kCategories; ++c) m.live[c] = tracker.live_bytes(static_cast<MemCategory>(c));
  m.reserved = reserved_bytes;
  m.peaks = peaks;
  return m;
}

RankMemory binding_rank_memory(Communicator& comm, const RankMemory& mine) {
  const int R = comm.size();
  const std::vector<char> my_saved = encode(mine.peaks.saved_by_kind);
  int64_t send[kFields];
  const MemoryPeaks& p = mine.peaks;
  int i = 0;
  for (int64_t v : {p.total, p.saved, p.reserved, p.blocks, mine.reserved}) send[i++] = v;
  for (int c = 0; c < kCategories; ++c) send[i++] = mine.live[c];
  send[i++] = static_cast<int64_t>(my_saved.size());
  std::vector<int64_t> all(static_cast<size_t>(kFields) * R);
  comm.all_gather(send, sizeof send, all.data(), CommPurpose::control);
  auto field = [&](int rank, int f) { return all[static_cast<size_t>(kFields) * rank + f]; };

  int binding = 0;
  for (int q = 1; q < R; ++q)
    if (field(q, 0) > field(binding, 0)) binding = q;
  RankMemory out;
  out.rank = binding;
  out.reserved = field(binding, kPeaks);
  for (int c = 0; c < kCategories; ++c) out.live[c] = field(binding, kPeaks + 1 + c);
  int64_t* peaks[kPeaks] = {&out.peaks.total, &out.peaks.saved, &out.peaks.reserved, &out.peaks.blocks};
  for (int f = 0; f < kPeaks; ++f)
    for (int q = 0; q < R; ++q) *peaks[f] = std::max(*peaks[f], field(q, f));
  // The binding rank's saved bytes per layer, to every rank (their size came with the gather).
  std::vector<char> saved = binding == comm.rank() ? my_saved : std::vector<char>();
  saved.resize(static_cast<size_t>(field(binding, kFields - 1)));
  if (!saved.empty()) comm.broadcast(saved.data(), static_cast<int64_t>(saved.size()), binding, CommPurpose::control);
  out.peaks.saved_by_kind = decode(saved);
  return out;
}

void max_over_ranks(Communicator& comm, std::span<int64_t> values) {
  const size_t n = values.size();
  std::vector<int64_t> all(n * static_cast<size_t>(comm.size()));
  comm.all_gather(values.data(), static_cast<int64_t>(n * sizeof(int64_t)), all.data(), CommPurpose::control);
  for (int q = 0; q < comm.size(); ++q)
    for (size_t i = 0; i < n; ++i) values[i] = std::max(values[i], all[n * static_cast<size_t>(q) + i]);
}

}  // namespace mok
