#include "core/parallel/communicator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>

MOK_NN_BEGIN

// Counts one public call and times it; nested calls (all_reduce → exchange) count once.
class Communicator::CallScope {
 public:
  explicit CallScope(Communicator& c) : c_(c) {
    if (c_.depth_++ == 0) {
      c_.stats_.calls++;
      start_ = std::chrono::steady_clock::now();
    }
  }
  ~CallScope() {
    if (--c_.depth_ == 0)
      c_.stats_.wall_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  Communicator& c_;
  std::chrono::steady_clock::time_point start_;
};

void Communicator::counted_exchange(const uint8_t* const* send, const int64_t* send_bytes,
                                    uint8_t* const* recv, const int64_t* recv_bytes,
                                    CommPurpose purpose, const int64_t* head_send,
                                    const int64_t* head_recv, CommPurpose head_purpose) {
  const int R = size();
  for (int p = 0; p < R; ++p) {
    if (send_bytes[p] < 0 || recv_bytes[p] < 0)
      throw std::invalid_argument("Communicator: negative message size");
    if (head_send && (head_send[p] < 0 || head_send[p] > send_bytes[p] || head_recv[p] < 0 ||
                      head_recv[p] > recv_bytes[p]))
      throw std::invalid_argument("Communicator: a message's head is larger than the message");
  }
  exchange(send, send_bytes, recv, recv_bytes);
  for (int p = 0; p < R; ++p) {
    const int64_t hs = head_send ? head_send[p] : 0, hr = head_send ? head_recv[p] : 0;
    stats_.add(purpose, p, send_bytes[p] - hs, recv_bytes[p] - hr);
    if (head_send) stats_.add(head_purpose, p, hs, hr);
  }
  const double modeled =
      link_.collective_seconds(std::span<const int64_t>(send_bytes, static_cast<size_t>(R)),
                               std::span<const int64_t>(recv_bytes, static_cast<size_t>(R)),
                               rank());
  stats_.modeled_seconds += modeled;
  if (link_.sleep && modeled > 0.0)
    std::this_thread::sleep_for(std::chrono::duration<double>(modeled));
}

void Communicator::count_transfer(std::span<const int64_t> send_bytes,
                                  std::span<const int64_t> recv_bytes, CommPurpose purpose,
                                  double wall_seconds) {
  const int R = size();
  if (static_cast<int>(send_bytes.size()) != R || static_cast<int>(recv_bytes.size()) != R)
    throw std::invalid_argument("count_transfer: need one count per rank");
  stats_.calls++;
  stats_.wall_seconds += wall_seconds;
  for (int p = 0; p < R; ++p) stats_.add(purpose, p, send_bytes[p], recv_bytes[p]);
  const double modeled = link_.collective_seconds(send_bytes, recv_bytes, rank());
  stats_.modeled_seconds += modeled;
  if (link_.sleep && modeled > 0.0)
    std::this_thread::sleep_for(std::chrono::duration<double>(modeled));
}

void Communicator::all_to_all_bytes(const void* send, std::span<const int64_t> send_bytes,
                                    void* recv, std::span<const int64_t> recv_bytes,
                                    CommPurpose purpose) {
  all_to_all_bytes(send, send_bytes, recv, recv_bytes, purpose, {}, {}, purpose);
}

void Communicator::all_to_all_bytes(const void* send, std::span<const int64_t> send_bytes,
                                    void* recv, std::span<const int64_t> recv_bytes,
                                    CommPurpose purpose, std::span<const int64_t> head_send_bytes,
                                    std::span<const int64_t> head_recv_bytes,
                                    CommPurpose head_purpose) {
  CallScope scope(*this);
  const int R = size();
  if (static_cast<int>(send_bytes.size()) != R || static_cast<int>(recv_bytes.size()) != R)
    throw std::invalid_argument("all_to_all: need one count per rank (" + std::to_string(R) +
                                ")");
  std::vector<const uint8_t*> sp(R);
  std::vector<uint8_t*> rp(R);
  int64_t so = 0, ro = 0;
  for (int p = 0; p < R; ++p) {
    sp[p] = static_cast<const uint8_t*>(send) + so;
    rp[p] = static_cast<uint8_t*>(recv) + ro;
    so += send_bytes[p];
    ro += recv_bytes[p];
  }
  const bool heads = !head_send_bytes.empty();
  if (heads && (static_cast<int>(head_send_bytes.size()) != R || static_cast<int>(head_recv_bytes.size()) != R))
    throw std::invalid_argument("all_to_all: need one head size per rank (" + std::to_string(R) + ")");
  counted_exchange(sp.data(), send_bytes.data(), rp.data(), recv_bytes.data(), purpose,
                   heads ? head_send_bytes.data() : nullptr, heads ? head_recv_bytes.data() : nullptr,
                   head_purpose);
}

std::vector<int64_t> Communicator::all_to_all_bytes(const void* send,
                                                    std::span<const int64_t> send_bytes,
                                                    std::vector<uint8_t>& recv,
                                                    CommPurpose purpose) {
  CallScope scope(*this);
  std::vector<int64_t> recv_bytes = exchange_counts(send_bytes);
  int64_t total = 0;
  for (int64_t b : recv_bytes) total += b;
  recv.resize(static_cast<size_t>(total));
  all_to_all_bytes(send, send_bytes, recv.data(), recv_bytes, purpose);
  return recv_bytes;
}

std::vector<int64_t> Communicator::exchange_counts(std::span<const int64_t> counts,
                                                   CommPurpose purpose) {
  CallScope scope(*this);
  const int R = size();
  if (static_cast<int>(counts.size()) != R)
    throw std::invalid_argument("exchange_counts: need one count per rank");
  std::vector<int64_t> out(R, 0);
  std::vector<const uint8_t*> sp(R);
  std::vector<uint8_t*> rp(R);
  std::vector<int64_t> bytes(R, static_cast<int64_t>(sizeof(int64_t)));
  for (int p = 0; p < R; ++p) {
    sp[p] = reinterpret_cast<const uint8_t*>(&counts[p]);
    rp[p] = reinterpret_cast<uint8_t*>(&out[p]);
  }
  counted_exchange(sp.data(), bytes.data(), rp.data(), bytes.data(), purpose);
  return out;
}

// Reduce-scatter then all-gather over R contiguous chunks; rank c reduces chunk c by
// calling reduce(parts, len, out) where parts[s] is rank s's copy of the chunk.
template <class T, class Reduce>
void Communicator::reduce_scatter_gather(T* data, int64_t n, CommPurpose purpose,
                                         Reduce reduce) {
  CallScope scope(*this);
  const int R = size();
  if (n < 0) throw std::invalid_argument("all_reduce: negative length");
  if (R == 1 || n == 0) return;
  const int me = rank();
  auto begin = [&](int c) { return n * c / R; };
  const int64_t my_begin = begin(me), my_len = begin(me + 1) - my_begin;
  constexpr int64_t E = sizeof(T);

  // 1. reduce-scatter: chunk c of every rank goes to rank c.
  std::vector<T> parts(static_cast<size_t>(my_len) * R);
  std::vector<const uint8_t*> sp(R);
  std::vector<uint8_t*> rp(R);
  std::vector<int64_t> sb(R), rb(R);
  for (int p = 0; p < R; ++p) {
    sp[p] = reinterpret_cast<const uint8_t*>(data + begin(p));
    sb[p] = (begin(p + 1) - begin(p)) * E;
    rp[p] = reinterpret_cast<uint8_t*>(parts.data() + static_cast<size_t>(p) * my_len);
    rb[p] = my_len * E;
  }
  counted_exchange(sp.data(), sb.data(), rp.data(), rb.data(), purpose);

  // 2. the owner reduces its chunk in rank order.
  std::vector<const T*> part_ptrs(R);
  for (int s = 0; s < R; ++s) part_ptrs[s] = parts.data() + static_cast<size_t>(s) * my_len;
  reduce(part_ptrs.data(), my_len, data + my_begin);

  // 3. all-gather: the owner sends its reduced chunk to everyone.
  for (int p = 0; p < R; ++p) {
    sp[p] = reinterpret_cast<const uint8_t*>(data + my_begin);
    sb[p] = p == me ? 0 : my_len * E;
    rp[p] = reinterpret_cast<uint8_t*>(data + begin(p));
    rb[p] = p == me ? 0 : (begin(p + 1) - begin(p)) * E;
  }
  counted_exchange(sp.data(), sb.data(), rp.data(), rb.data(), purpose);
}

void Communicator::all_reduce_sum(float* data, int64_t n, CommPurpose purpose) {
  reduce_scatter_gather(data, n, purpose, [R = size()](const float* const* parts, int64_t len,
                                                       float* out) {
    for (int64_t i = 0; i < len; ++i) {
      double acc = 0.0;
      for (int s = 0; s < R; ++s) acc += static_cast<double>(parts[s][i]);
      out[i] = static_cast<float>(acc);
    }
  });
}

void Communicator::all_reduce_sum(double* data, int64_t n, CommPurpose purpose) {
  reduce_scatter_gather(data, n, purpose, [R = size()](const double* const* parts, int64_t len,
                                                       double* out) {
    for (int64_t i = 0; i < len; ++i) {
      // Neumaier: sum plus the running rounding error of every addition.
      double sum = 0.0, err = 0.0;
      for (int s = 0; s < R; ++s) {
        const double x = parts[s][i];
        const double t = sum + x;
        err += std::fabs(sum) >= std::fabs(x) ? (sum - t) + x : (x - t) + sum;
        sum = t;
      }
      out[i] = sum + err;
    }
  });
}

void Communicator::all_reduce_sum(int64_t* data, int64_t n, CommPurpose purpose) {
  reduce_scatter_gather(data, n, purpose, [R = size()](const int64_t* const* parts, int64_t len,
                                                       int64_t* out) {
    for (int64_t i = 0; i < len; ++i) {
      int64_t acc = 0;
      for (int s = 0; s < R; ++s) acc += parts[s][i];
      out[i] = acc;
    }
  });
}

void Communicator::all_reduce_max(double* data, int64_t n, CommPurpose purpose) {
  reduce_scatter_gather(data, n, purpose, [R = size()](const double* const* parts, int64_t len,
                                                       double* out) {
    for (int64_t i = 0; i < len; ++i) {
      double m = parts[0][i];
      for (int s = 1; s < R; ++s) m = std::max(m, parts[s][i]);
      out[i] = m;
    }
  });
}

void Communicator::all_gather(const void* send, int64_t bytes, void* recv, CommPurpose purpose) {
  CallScope scope(*this);
  const int R = size();
  if (bytes < 0) throw std::invalid_argument("all_gather: negative size");
  std::vector<const uint8_t*> sp(R, static_cast<const uint8_t*>(send));
  std::vector<uint8_t*> rp(R);
  std::vector<int64_t> b(R, bytes);
  for (int s = 0; s < R; ++s) rp[s] = static_cast<uint8_t*>(recv) + s * bytes;
  counted_exchange(sp.data(), b.data(), rp.data(), b.data(), purpose);
}

void Communicator::broadcast(void* data, int64_t bytes, int root, CommPurpose purpose) {
  CallScope scope(*this);
  const int R = size(), me = rank();
  if (root < 0 || root >= R) throw std::invalid_argument("broadcast: root out of range");
  if (bytes < 0) throw std::invalid_argument("broadcast: negative size");
  std::vector<const uint8_t*> sp(R, static_cast<const uint8_t*>(data));
  std::vector<uint8_t*> rp(R, static_cast<uint8_t*>(data));
  std::vector<int64_t> sb(R, 0), rb(R, 0);
  if (me == root) {
    for (int p = 0; p < R; ++p) sb[p] = p == me ? 0 : bytes;
  } else {
    rb[root] = bytes;
  }
  counted_exchange(sp.data(), sb.data(), rp.data(), rb.data(), purpose);
}

void Communicator::barrier() {
  CallScope scope(*this);
  barrier_impl();
  const double modeled = link_.barrier_seconds(size());
  stats_.modeled_seconds += modeled;
  if (link_.sleep && modeled > 0.0)
    std::this_thread::sleep_for(std::chrono::duration<double>(modeled));
}

MOK_NN_END
