#pragma once
// Keys for the counter-based random numbers of the kitten policies. A sketch matrix or a
// stochastic-rounding pattern is a pure function of (seed, step, layer, kind), so backward
// can regenerate exactly what forward used without storing it, on any thread count.

#include <cstdint>
#include <string_view>

#include "core/real.h"
#include "core/util/counter_rng.h"

MOK_NN_BEGIN

// Stream id of one (layer, tensor kind): FNV-1a over the kind, mixed with the layer.
inline uint64_t kitten_stream(int layer, std::string_view kind) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : kind) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001B3ull;
  }
  return mix64(h ^ mix64(static_cast<uint64_t>(static_cast<int64_t>(layer)) + 0x51ED27ull));
}

// Seed of one training step: a different sketch every step, the same one within a step.
inline uint64_t kitten_step_seed(uint64_t seed, int64_t step) {
  return mix64(seed ^ mix64(static_cast<uint64_t>(step) ^ 0xC0FFEE5EEDull));
}

// Purposes, so two draws for the same (layer, kind, step) never share numbers.
enum class KittenDraw : uint64_t { sketch = 1, range = 2, rounding = 3, subspace = 4 };

inline uint64_t kitten_draw_stream(int layer, std::string_view kind, KittenDraw draw) {
  return mix64(kitten_stream(layer, kind) + static_cast<uint64_t>(draw));
}

MOK_NN_END
