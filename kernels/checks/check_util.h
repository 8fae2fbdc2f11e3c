#pragma once
// Shared pieces of the kernel checks: fresh random inputs from the counter RNG, the relative
// error against a double-precision reference, bf16 rounding of host data, and the list each
// check group appends its results to. Every check poisons its outputs (NaN) before the launch
// so that an unwritten element fails.

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "core/util/counter_rng.h"
#include "kernels/checks/cuda_op_checks.h"

namespace mok::cuda {

struct CheckInputs {
  uint64_t seed;
  uint64_t next_stream = 0;
  // n values ~ N(0, scale²), a new stream per call (fresh inputs for every check).
  std::vector<float> normal(size_t n, double scale = 1.0) {
    const uint64_t stream = next_stream++;
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(counter_normal(seed, stream, i) * scale);
    return v;
  }
  // n integers uniform in [0, bound).
  std::vector<int32_t> uniform_int(size_t n, int32_t bound) {
    const uint64_t stream = next_stream++;
    std::vector<int32_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(counter_bits(seed, stream, i) % uint64_t(bound));
    return v;
  }
};

// ‖a − b‖ / ‖b‖; infinity when any a is not finite.
template <typename A>
double relative_error(const std::vector<A>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    const double ai = static_cast<double>(a[i]);
    if (!std::isfinite(ai)) return INFINITY;
    num += (ai - b[i]) * (ai - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// How far `got` is from `want` in ulps of float: the largest distance over the elements
// (infinity where a got is not finite or the sizes differ) and how many differ at all.
struct UlpDistance {
  double worst_ulps = 0.0, differ = 0.0;
};
inline UlpDistance ulp_distance(const std::vector<float>& got, const std::vector<float>& want) {
  UlpDistance d;
  if (got.size() != want.size()) d.worst_ulps = INFINITY;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (!std::isfinite(got[i])) d.worst_ulps = INFINITY;
    if (got[i] == want[i]) continue;
    d.differ += 1.0;
    const double ulp = std::nextafter(std::fabs(want[i]), INFINITY) - std::fabs(want[i]);
    d.worst_ulps = std::max(d.worst_ulps, std::fabs(static_cast<double>(got[i]) - want[i]) / ulp);
  }
  return d;
}

// Elements whose bytes differ (0: bitwise identical; the larger size when the sizes differ).
template <typename A>
double differing_elements(const std::vector<A>& a, const std::vector<A>& b) {
  if (a.size() != b.size()) return static_cast<double>(std::max(a.size(), b.size()));
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += std::memcmp(&a[i], &b[i], sizeof(A)) != 0;
  return static_cast<double>(differ);
}

// Fraction of elements whose bytes differ (0: bitwise identical; 1 when the sizes differ).
template <typename A>
double differing_fraction(const std::vector<A>& a, const std::vector<A>& b) {
  if (a.size() != b.size()) return 1.0;
  return a.empty() ? 0.0 : differing_elements(a, b) / static_cast<double>(a.size());
}

// ‖gpu − ref‖ / ‖ref‖ over columns [c0, c0 + width) of row-major (rows, ld) matrices; when
// the reference is exactly zero there, divided by ‖ref‖ over all columns instead.
// Infinity when any gpu value of the part is not finite.
inline double part_error(const std::vector<float>& gpu, const std::vector<double>& ref, size_t ld, size_t c0,
                         size_t width) {
  double num = 0, den_part = 0, den_all = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    den_all += ref[i] * ref[i];
    const size_t c = i % ld;
    if (c < c0 || c >= c0 + width) continue;
    if (!std::isfinite(gpu[i])) return INFINITY;
    num += (gpu[i] - ref[i]) * (gpu[i] - ref[i]);
    den_part += ref[i] * ref[i];
  }
  const double den = den_part > 0 ? den_part : den_all;
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Host bf16 helpers: round a float vector to bf16 (what the device sees) and back.
inline std::vector<__nv_bfloat16> to_bf16(const std::vector<float>& v) {
  std::vector<__nv_bfloat16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = __float2bfloat16(v[i]);
  return out;
}
inline std::vector<float> from_bf16(const std::vector<__nv_bfloat16>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = __bfloat162float(v[i]);
  return out;
}
inline std::vector<float> round_bf16(const std::vector<float>& v) { return from_bf16(to_bf16(v)); }

// Runs one part of a check group; an exception (a refused call, a cuBLAS status, a CUDA
// error) becomes a failed check with its message printed, so the rest of the run goes on.
template <typename F>
void run_guarded(std::vector<OpCheck>& out, const std::string& what, F&& part) {
  try {
    part();
  } catch (const std::exception& e) {
    std::printf("%s: %s\n", what.c_str(), e.what());
    out.push_back({what + " (threw)", INFINITY, 0.0});
  }
}

// Tolerances (‖gpu − ref‖/‖ref‖): fp32 kernels against a double reference; bf16 kernels
// against the double reference on the bf16-rounded inputs.
constexpr double kFp32Tolerance = 1e-5;
constexpr double kBf16Tolerance = 1e-2;
// The lse of a bf16 attention is float arithmetic on exact products of bf16 inputs (the
// reference sees the same rounded inputs): as accurate as the fp32 path, up to tensor-core
// accumulation and exp2/log2 on the special-function unit (≈ 1e-6 relative). 1e-4 keeps
// a wide margin yet fails on any real error in the statistics.
constexpr double kBf16LseTolerance = 1e-4;

// Check groups, one file each in kernels/checks/; run_cuda_op_checks calls them in turn.
void check_sketch(CheckInputs& in, std::vector<OpCheck>& out);        // sketch_checks.cpp
void check_kittens(CheckInputs& in, std::vector<OpCheck>& out);       // kitten_checks.cpp
void check_lowbit_rows(CheckInputs& in, std::vector<OpCheck>& out);   // kitten_checks.cpp: kittens' row codes only
void check_elementwise(CheckInputs& in, std::vector<OpCheck>& out);   // elementwise_checks.cu
void check_gemm(CheckInputs& in, std::vector<OpCheck>& out);          // gemm_checks.cpp
void check_moe_routing(CheckInputs& in, std::vector<OpCheck>& out);   // moe_routing_checks.cu
void check_mok_plan(CheckInputs& in, std::vector<OpCheck>& out);      // mok_plan_checks.cpp
void check_grouped_ranges(CheckInputs& in, std::vector<OpCheck>& out);  // grouped_range_checks.cpp
void check_cached_attention(CheckInputs& in, std::vector<OpCheck>& out);  // cached_attention_checks.cpp
void check_attention(CheckInputs& in, std::vector<OpCheck>& out);     // attention_checks.cu
void check_cudnn_attention(CheckInputs& in, std::vector<OpCheck>& out);  // cudnn_attention_checks.cpp
// The whole training step, GPU against CPU (needs the others to pass first).
void check_model_training(CheckInputs& in, std::vector<OpCheck>& out);  // model_checks.cpp
void check_step_graphs(CheckInputs& in, std::vector<OpCheck>& out);     // model_checks.cpp
// Two GPUs as two ranks: the NCCL data plane and the classic dispatcher (nothing with one GPU).
void check_parallel(CheckInputs& in, std::vector<OpCheck>& out);  // parallel_checks.cpp

// Kernel timings at the benchmark shapes (CUDA events, median of repeats after warm-up),
// printed as a table with achieved GB/s or TFLOP/s; mok-gpu-check calls each in turn.
void print_elementwise_timings();  // elementwise_timings.cu
void print_kitten_timings();       // kitten_timings.cpp
void print_gemm_timings();         // gemm_timings.cpp (ends with print_moe_routing_timings)
void print_gemm_candidate_timings();  // gemm_timings.cpp: each cuBLASLt candidate of the dense products
void print_moe_routing_timings();  // moe_routing_timings.cu
void print_attention_timings();    // attention_timings.cu
void print_model_timings();        // model_checks.cpp: whole training steps of the benchmark models
// model_checks.cpp: device time per op of a benchmark model's step (models by name, empty:
// all), the `top` largest op-and-shape rows.
void print_model_profile(const std::vector<std::string>& models, int top);

}  // namespace mok::cuda
