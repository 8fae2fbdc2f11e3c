#pragma once
// Counter-based random numbers: value = f(seed, stream, counter), no state to store.
// Used wherever randomness must be regenerated exactly (sketch matrices, dropout-free
// init, data order) or be independent of thread count and rank count.

#include <cmath>
#include <cstdint>

namespace mok {

// SplitMix64 finaliser: a strong 64-bit mix.
inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t counter_bits(uint64_t seed, uint64_t stream, uint64_t counter) {
  return mix64(mix64(seed ^ mix64(stream + 0x632BE59BD9B4E019ull)) + counter);
}

// Uniform in (0, 1): never exactly 0 or 1.
inline double counter_uniform(uint64_t seed, uint64_t stream, uint64_t counter) {
  return (static_cast<double>(counter_bits(seed, stream, counter) >> 11) + 0.5) * 0x1.0p-53;
}

// Standard normal via Box-Muller on counters 2i and 2i+1.
inline double counter_normal(uint64_t seed, uint64_t stream, uint64_t counter) {
  const double u1 = counter_uniform(seed, stream, 2 * counter);
  const double u2 = counter_uniform(seed, stream, 2 * counter + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// A stateful generator over the counter stream, for sequential use (sampling, shuffles).
class CounterRng {
 public:
  CounterRng(uint64_t seed = 0, uint64_t stream = 0, uint64_t counter = 0)
      : seed_(seed), stream_(stream), counter_(counter) {}
  uint64_t next_u64() { return counter_bits(seed_, stream_, counter_++); }
  double uniform() { return counter_uniform(seed_, stream_, counter_++); }
  double normal() { return counter_normal(seed_, stream_, counter_++); }
  uint64_t below(uint64_t n) { return n ? next_u64() % n : 0; }
  uint64_t counter() const { return counter_; }
  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }
  void set_counter(uint64_t c) { counter_ = c; }

 private:
  uint64_t seed_, stream_, counter_;
};

}  // namespace mok
