#pragma once
// 16-bit floats on the host: bfloat16 (8-bit exponent, 7-bit mantissa: the top half of an
// IEEE float) and IEEE half (5-bit exponent, 10-bit mantissa). For reading and writing
// tensor files; the compute paths never use these.

#include <bit>
#include <cstdint>

namespace mok {

inline float bf16_to_float(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// Round to nearest, ties to even; NaN stays a (quiet) NaN.
inline uint16_t float_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

inline float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf, NaN
  if (exp == 0) {
    if (mant == 0) return std::bit_cast<float>(sign);  // ±0
    // Subnormal: value = mant · 2^-24; normalise into a float.
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while ((mant & 0x400u) == 0);
    mant &= 0x3ffu;
    return std::bit_cast<float>(sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant << 13));
  }
  return std::bit_cast<float>(sign | (exp + 127 - 15) << 23 | (mant << 13));
}

}  // namespace mok
