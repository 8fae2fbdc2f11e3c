#pragma once
// Collective checks that any rank can run on its own: every message is generated from
// counters (seed, source, destination, round), so the receiver regenerates what each
// source sent and what every counter should read, without trusting the communicator.
// Used by tests/core/test_communicator.cpp (local ranks) and by the MPI helper
// tests/mpi/mpi_comm_check.cpp (one process per rank). Returns the failures, empty if none.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/parallel/communicator.h"
#include "core/util/counter_rng.h"

namespace mok::comm_checks {

using mok::f32::CommPurpose;
using mok::f32::CommStats;
using mok::f32::Communicator;

// Elements rank `src` sends to rank `dst` in `round`: 0..40, zero now and then.
inline int64_t message_len(uint64_t seed, int src, int dst, int round) {
  const uint64_t r = counter_bits(seed, 1000 + round, static_cast<uint64_t>(src) * 64 + dst);
  return (r % 5 == 0) ? 0 : static_cast<int64_t>(r % 41);
}
inline float message_value(uint64_t seed, int src, int dst, int round, int64_t i) {
  return static_cast<float>(
      counter_normal(seed, 2000 + round, (static_cast<uint64_t>(src) * 64 + dst) << 20 | i));
}
// Contribution of rank r to element i of an all-reduce (wide range of magnitudes).
inline float reduce_value(uint64_t seed, int r, int64_t i) {
  const double scale = std::ldexp(1.0, static_cast<int>(counter_bits(seed, 3000, i) % 12) - 6);
  return static_cast<float>(scale * counter_normal(seed, 3001 + r, i));
}

struct Failures {
  std::vector<std::string> list;
  void expect(bool ok, const std::string& what) {
    if (!ok) list.push_back(what);
  }
};

inline std::string at(const Communicator& c, const std::string& what) {
  return "rank " + std::to_string(c.rank()) + "/" + std::to_string(c.size()) + ": " + what;
}

// Bytes rank me sends to / receives from each peer in an R-rank all-reduce of n values of
// `elem` bytes (reduce-scatter of chunk p to rank p, then all-gather of the own chunk).
inline void all_reduce_bytes(int R, int me, int64_t n, int64_t elem, std::vector<int64_t>& sent,
                             std::vector<int64_t>& received) {
  sent.assign(R, 0);
  received.assign(R, 0);
  if (R == 1 || n == 0) return;
  auto len = [&](int c) { return n * (c + 1) / R - n * c / R; };
  for (int p = 0; p < R; ++p) {
    sent[p] += len(p) * elem;        // reduce-scatter: chunk p to its owner
    received[p] += len(me) * elem;   // every rank's copy of my chunk
    if (p != me) {
      sent[p] += len(me) * elem;     // all-gather: my reduced chunk to the others
      received[p] += len(p) * elem;
    }
  }
}

inline void expect_counters(Failures& f, const Communicator& c, const CommStats& before,
                            CommPurpose purpose, const std::vector<int64_t>& sent,
                            const std::vector<int64_t>& received, const std::string& what) {
  const CommStats d = c.stats().since(before);
  for (int p = 0; p < c.size(); ++p) {
    f.expect(d.sent(purpose, p) == sent[p],
             at(c, what + ": sent to " + std::to_string(p) + " counted " +
                       std::to_string(d.sent(purpose, p)) + ", expected " +
                       std::to_string(sent[p])));
    f.expect(d.received(purpose, p) == received[p],
             at(c, what + ": received from " + std::to_string(p) + " counted " +
                       std::to_string(d.received(purpose, p)) + ", expected " +
                       std::to_string(received[p])));
  }
  int64_t remote = 0;
  for (int p = 0; p < c.size(); ++p)
    if (p != c.rank()) remote += sent[p];
  f.expect(d.remote_sent(purpose) == remote, at(c, what + ": remote bytes"));
  f.expect(d.local_bytes(purpose) == sent[c.rank()], at(c, what + ": local bytes"));
}

inline std::vector<std::string> run_all(Communicator& c, uint64_t seed, int rounds = 3) {
  Failures f;
  const int R = c.size(), me = c.rank();

  // 1. all-to-all, counts known on both sides (typed) and exchanged first (bytes).
  for (int round = 0; round < rounds; ++round) {
    std::vector<int64_t> send_counts(R), recv_counts(R);
    std::vector<float> send;
    for (int p = 0; p < R; ++p) {
      send_counts[p] = message_len(seed, me, p, round);
      recv_counts[p] = message_len(seed, p, me, round);
      for (int64_t i = 0; i < send_counts[p]; ++i)
        send.push_back(message_value(seed, me, p, round, i));
    }
    int64_t total = 0;
    for (int64_t n : recv_counts) total += n;
    std::vector<float> recv(static_cast<size_t>(total), -1.0f);

    CommStats before = c.stats();
    c.all_to_all_v(send.data(), send_counts, recv.data(), recv_counts, CommPurpose::dispatch);
    std::vector<int64_t> sent_b(R), recv_b(R);
    for (int p = 0; p < R; ++p) {
      sent_b[p] = send_counts[p] * 4;
      recv_b[p] = recv_counts[p] * 4;
    }
    expect_counters(f, c, before, CommPurpose::dispatch, sent_b, recv_b, "all_to_all_v");
    int64_t off = 0;
    for (int s = 0; s < R; ++s)
      for (int64_t i = 0; i < recv_counts[s]; ++i, ++off) {
        const float want = message_value(seed, s, me, round, i);
        if (std::memcmp(&recv[off], &want, 4) != 0) {
          f.expect(false, at(c, "all_to_all_v: wrong value from rank " + std::to_string(s)));
          s = R;
          break;
        }
      }

    // Unknown counts: 8 control bytes per peer, then the payload as combine.
    before = c.stats();
    std::vector<uint8_t> raw;
    std::vector<int64_t> got = c.all_to_all_bytes(send.data(), sent_b, raw, CommPurpose::combine);
    f.expect(got == recv_b, at(c, "all_to_all_bytes: received counts"));
    f.expect(raw.size() == recv.size() * 4 &&
                 std::memcmp(raw.data(), recv.data(), raw.size()) == 0,
             at(c, "all_to_all_bytes: payload differs from the typed exchange"));
    expect_counters(f, c, before, CommPurpose::combine, sent_b, recv_b, "all_to_all_bytes");
    expect_counters(f, c, before, CommPurpose::control, std::vector<int64_t>(R, 8),
                    std::vector<int64_t>(R, 8), "count exchange");
  }

  // 2. float all-reduce: the double sum in rank order, rounded once; same bits everywhere.
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1001}}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[i] = reduce_value(seed, me, i);
    const CommStats before = c.stats();
    c.all_reduce_sum(x.data(), n, CommPurpose::gradients);
    std::vector<int64_t> sent, received;
    all_reduce_bytes(R, me, n, 4, sent, received);
    expect_counters(f, c, before, CommPurpose::gradients, sent, received,
                    "all_reduce_sum(float) n=" + std::to_string(n));
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      double acc = 0.0;
      for (int r = 0; r < R; ++r) acc += reduce_value(seed, r, i);
      const float want = static_cast<float>(acc);
      if (std::memcmp(&x[i], &want, 4) != 0) ++wrong;
    }
    f.expect(wrong == 0, at(c, "all_reduce_sum(float): " + std::to_string(wrong) +
                                   " elements differ from the rank-order double sum"));
    // Every rank holds the same bits: gather everybody's result and compare.
    std::vector<float> all(static_cast<size_t>(n) * R);
    c.all_gather(x.data(), n * 4, all.data(), CommPurpose::control);
    for (int r = 0; r < R; ++r)
      f.expect(n == 0 || std::memcmp(all.data() + r * n, x.data(), n * 4) == 0,
               at(c, "all_reduce_sum(float): rank " + std::to_string(r) + " holds other bits"));
  }

  // 3. double and int64 all-reduce; identical on every rank.
  {
    const int64_t n = 333;
    std::vector<double> x(n);
    std::vector<int64_t> k(n);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = counter_normal(seed, 4000 + me, i) * std::ldexp(1.0, static_cast<int>(i % 40) - 20);
      k[i] = static_cast<int64_t>(counter_bits(seed, 4100 + me, i) % 1000000) - 500000;
    }
    c.all_reduce_sum(x.data(), n, CommPurpose::gradients);
    c.all_reduce_sum(k.data(), n, CommPurpose::control);
    std::vector<double> all(static_cast<size_t>(n) * R);
    c.all_gather(x.data(), n * 8, all.data(), CommPurpose::control);
    for (int r = 0; r < R; ++r)
      f.expect(std::memcmp(all.data() + r * n, x.data(), n * 8) == 0,
               at(c, "all_reduce_sum(double): rank " + std::to_string(r) + " holds other bits"));
    int64_t wrong_d = 0, wrong_k = 0;
    for (int64_t i = 0; i < n; ++i) {
      long double ref = 0, magnitude = 0;
      int64_t kref = 0;
      for (int r = 0; r < R; ++r) {
        const double xr =
            counter_normal(seed, 4000 + r, i) * std::ldexp(1.0, static_cast<int>(i % 40) - 20);
        ref += xr;
        magnitude += std::fabs(xr);
        kref += static_cast<int64_t>(counter_bits(seed, 4100 + r, i) % 1000000) - 500000;
      }
      // Compensated: within one rounding of the exact sum, even under cancellation.
      if (std::fabs(static_cast<long double>(x[i]) - ref) >
          2.3e-16L * std::fabs(ref) + 1e-18L * magnitude)
        ++wrong_d;
      if (k[i] != kref) ++wrong_k;
    }
    f.expect(wrong_d == 0, at(c, "all_reduce_sum(double): not the compensated sum"));
    f.expect(wrong_k == 0, at(c, "all_reduce_sum(int64): wrong sums"));

    std::vector<double> m(5);
    for (int i = 0; i < 5; ++i) m[i] = (me == (i % R)) ? 100.0 + i : static_cast<double>(me);
    c.all_reduce_max(m.data(), 5, CommPurpose::control);
    for (int i = 0; i < 5; ++i) f.expect(m[i] == 100.0 + i, at(c, "all_reduce_max"));
  }

  // 4. broadcast from every root; the root sends R−1 messages, the others receive one.
  for (int root = 0; root < R; ++root) {
    const int64_t n = 17 + root;
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i)
      v[i] = me == root ? message_value(seed, root, root, 99, i) : 0.0f;
    const CommStats before = c.stats();
    c.broadcast(v.data(), n * 4, root, CommPurpose::weights);
    std::vector<int64_t> sent(R, 0), received(R, 0);
    if (me == root) {
      for (int p = 0; p < R; ++p)
        if (p != root) sent[p] = n * 4;
    } else {
      received[root] = n * 4;
    }
    expect_counters(f, c, before, CommPurpose::weights, sent, received, "broadcast");
    bool same = true;
    for (int64_t i = 0; i < n; ++i) {
      const float want = message_value(seed, root, root, 99, i);
      same = same && std::memcmp(&v[i], &want, 4) == 0;
    }
    f.expect(same, at(c, "broadcast from " + std::to_string(root) + ": wrong payload"));
  }

  // 5. barrier moves no bytes.
  const CommStats before = c.stats();
  c.barrier();
  f.expect(c.stats().since(before).remote_sent_total() == 0, at(c, "barrier sent bytes"));
  f.expect(c.stats().since(before).calls == 1, at(c, "barrier counted as one call"));
  return f.list;
}

}  // namespace mok::comm_checks
