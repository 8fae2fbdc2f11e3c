#pragma once
// Counter-based random numbers on the device: the same arithmetic as core/util/counter_rng.h
// (SplitMix64 mixes, 53-bit uniforms in (0, 1), Box-Muller in double), so a kernel draws the
// very values the CPU draws for the same (seed, stream, counter).

#include <cstdint>

namespace mok::cuda {

__device__ inline uint64_t counter_mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__device__ inline double counter_uniform01(uint64_t seed, uint64_t stream, uint64_t counter) {
  const uint64_t bits = counter_mix64(counter_mix64(seed ^ counter_mix64(stream + 0x632BE59BD9B4E019ull)) + counter);
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

__device__ inline double counter_normal01(uint64_t seed, uint64_t stream, uint64_t counter) {
  const double u1 = counter_uniform01(seed, stream, 2 * counter);
  const double u2 = counter_uniform01(seed, stream, 2 * counter + 1);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

}  // namespace mok::cuda
