#pragma once
// Element types and devices of tensors.
//   DType: f32 and f64 (the CPU core's `real`), bf16 (GPU activations and compute copies of
//   weights), i32 (token ids, expert ids, permutations), i64 (counts), u8 (compact codes).
//   Device: where a tensor's bytes live — the host (cpu) or one CUDA device (cuda:index).

#include <cstdint>
#include <string>

#include "core/real.h"

MOK_NN_BEGIN

enum class DType : uint8_t { f32, f64, bf16, i32, i64, u8 };

constexpr int64_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
  }
  return 0;
}
const char* dtype_name(DType t);

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::f32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::f64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::i32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::i64; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::u8; };
template <typename T> constexpr DType dtype_of = DTypeOf<T>::value;

// The CPU core's floating type (f32 in mok_nn, f64 in mok_nn_f64).
constexpr DType kRealDType = dtype_of<real>;

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int index) { return {DeviceType::cuda, index}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool operator==(const Device& o) const { return type == o.type && (type == DeviceType::cpu || index == o.index); }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;  // "cpu", "cuda:0"
};

MOK_NN_END
