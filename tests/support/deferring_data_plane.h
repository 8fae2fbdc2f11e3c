#pragma once
// DeferringDataPlane: a host data plane whose started groups behave as a GPU plane's do at
// their worst — nothing arrives before finish(). start_group fills every receive buffer with
// 0xff bytes (NaN for floats, −1 for ints) and copies what is to be sent; finish() checks
// that the sent bytes are still those (a caller writing them, or the allocator handing their
// block to someone else, would race with a GPU transfer) and only then exchanges them. A
// caller that reads too early or writes too soon gets wrong results or a recorded fault.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/parallel/data_plane.h"

namespace mok::test {

class DeferringDataPlane final : public DataPlane {
 public:
  using DataPlane::DataPlane;
  const char* kind() const override { return "deferring"; }
  void all_reduce_sum(Tensor& data, CommPurpose purpose) override {
    if (data.dtype() == DType::f32)
      control().all_reduce_sum(data.ptr<float>(), data.numel(), purpose);
    else
      control().all_reduce_sum(data.ptr<double>(), data.numel(), purpose);
  }
  void broadcast(Tensor& data, int root, CommPurpose purpose) override {
    control().broadcast(data.raw(), data.bytes(), root, purpose);
  }

  int started() const { return started_; }
  // What finish() found wrong ("" when nothing).
  const std::string& fault() const { return fault_; }

 protected:
  void exchange(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
                std::span<const int64_t> recv_bytes, CommPurpose purpose) override {
    control().all_to_all_bytes(send, send_bytes, recv, recv_bytes, purpose);
  }

  void start_exchange_group(std::span<const ByteMove> moves) override {
    ++started_;
    pending_.assign(moves.begin(), moves.end());
    sent_copy_.clear();
    for (const ByteMove& m : pending_) {
      int64_t s = 0, r = 0;
      for (int64_t b : m.send_bytes) s += b;
      for (int64_t b : m.recv_bytes) r += b;
      sent_copy_.emplace_back(m.send, m.send + s);
      if (r) std::memset(m.recv, 0xff, static_cast<size_t>(r));  // (an empty chunk's buffers may be null)
    }
  }

  void finish_exchange_group() override {
    for (size_t i = 0; i < pending_.size(); ++i)
      if (!sent_copy_[i].empty() && std::memcmp(pending_[i].send, sent_copy_[i].data(), sent_copy_[i].size()) != 0 &&
          fault_.empty())
        fault_ = "move " + std::to_string(i) + " of started group " + std::to_string(started_) +
                 ": sent bytes changed before finish";
    exchange_group(pending_);
    pending_.clear();
  }

 private:
  std::vector<ByteMove> pending_;
  std::vector<std::vector<uint8_t>> sent_copy_;
  int started_ = 0;
  std::string fault_;
};

}  // namespace mok::test
