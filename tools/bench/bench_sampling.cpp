// Host time to sample one decode step: B rows of V logits, the device idle meanwhile.
// Side by side: a plain stably sorted walk (ids by decreasing logit, then the draw; what every
// draw did before), sample_tokens unfiltered (id order, no sort), with top-p 0.9 and with
// top-k 40 (integer-key sort), on one thread and on a pool of T.
//   bench_sampling [--threads T] [--reps N]      (defaults 2, 20)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "core/train/sampling.h"
#include "core/util/thread_pool.h"

namespace {

// The draw as a plain stable sort writes it: ids by decreasing logit, weights summed in that
// order, one uniform walked down it.
int32_t sorted_walk(std::span<const float> l, double temperature, mok::CounterRng& rng) {
  std::vector<int32_t> ids(l.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  std::vector<double> p(ids.size());
  double sum = 0;
  for (size_t i = 0; i < ids.size(); ++i) sum += p[i] = std::exp((double(l[ids[i]]) - l[ids[0]]) / temperature);
  double u = rng.uniform() * sum;
  for (size_t i = 0; i < ids.size(); ++i) {
    u -= p[i];
    if (u <= 0) return ids[i];
  }
  return ids.back();
}

// Median ms of `reps` calls of fn.
double median_ms(int reps, const std::function<void()>& fn) {
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 20;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: bench_sampling [--threads T] [--reps N]\n");
      return 2;
    }
  }
  std::printf("ms to sample one decode step (median of %d), temperature 0.8; pool of %d threads\n", reps, threads);
  std::printf("%6s %6s | %12s | %12s %9s | %9s %9s | %9s %9s | %6s\n", "rows", "vocab", "sorted walk",
              "unfiltered", "pool", "top-p 0.9", "pool", "top-k 40", "pool", "speed");
  mok::ThreadPool one(1), pool(threads);
  for (const int vocab : {256, 8192}) {
    for (const int rows : {64, 512}) {
      std::mt19937 gen(7);
      std::normal_distribution<float> normal(0.0f, 2.0f);
      std::vector<float> logits(static_cast<size_t>(rows) * vocab);
      for (float& v : logits) v = normal(gen);
      std::vector<mok::CounterRng> rngs;
      for (int b = 0; b < rows; ++b) rngs.emplace_back(1, b);
      int64_t checksum = 0;
      const double sorted = median_ms(reps, [&] {
        for (int b = 0; b < rows; ++b)
          checksum += sorted_walk(std::span<const float>(logits).subspan(size_t(b) * vocab, vocab), 0.8, rngs[b]);
      });
      auto timed = [&](mok::ThreadPool& p, const mok::SamplingOptions& o) {
        mok::ScopedThreadPool scope(p);
        return median_ms(reps, [&] {
          for (const int32_t t : mok::sample_tokens(logits, vocab, o, rngs)) checksum += t;
        });
      };
      const mok::SamplingOptions plain{0.8, 0, 1.0}, top_p{0.8, 0, 0.9}, top_k{0.8, 40, 1.0};
      const double u1 = timed(one, plain), un = timed(pool, plain);
      const double p1 = timed(one, top_p), pn = timed(pool, top_p);
      const double k1 = timed(one, top_k), kn = timed(pool, top_k);
      std::printf("%6d %6d | %12.3f | %12.3f %9.3f | %9.3f %9.3f | %9.3f %9.3f | %5.1fx   (%lld)\n", rows, vocab, sorted,
                  u1, un, p1, pn, k1, kn, sorted / un, static_cast<long long>(checksum % 1000));
    }
  }
  std::printf("speed: sorted walk / unfiltered on the pool\n");
  return 0;
}
