// The kitten kernels (kernels/row_quantize.h) against the CPU's (core/backend/row_quantize.h):
// on fresh random rows, in fp32 and bf16, 8 and 4 bits, nearest and stochastic rounding,
// codes and scales must equal the CPU's bit for bit, the restored values must equal the
// CPU's rounded to the output type, and the error sums must agree to summation order.
// Then the low-rank keepers (sketch, rsvd, subspace) against the CPU's: lowrank_kitten_checks.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/backend/row_quantize.h"
#include "kernels/checks/check_util.h"
#include "kernels/cuda_types.h"
#include "kernels/device_buffer.h"
#include "kernels/row_quantize.h"

namespace mok::cuda {

namespace {

template <typename T>
void check_one(CheckInputs& in, std::vector<OpCheck>& out, const char* type, int64_t rows, int64_t cols, int bits,
               bool stochastic) {
  const std::string name = std::string("kittens.rows_") + type + "_" + std::to_string(bits) + "bit" +
                           (stochastic ? "_stochastic" : "") + "_" + std::to_string(cols);
  // Rows of different magnitudes; one all-zero row (scale 0).
  std::vector<float> x = in.normal(static_cast<size_t>(rows * cols), 2.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) x[r * cols + c] *= static_cast<float>(1 + r % 7);
  for (int64_t c = 0; c < cols; ++c) x[cols + c] = 0.0f;
  // Rows 2 and 3: exact ties v/s = k + ½ (absmax qmax·s with s = 1 and 1/8), which nearest
  // rounding must send to the even code as the CPU's rint does.
  const int qmax = bits == 8 ? 127 : 7;
  for (int64_t r = 2; r < std::min<int64_t>(rows, 4); ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float scale = r == 2 ? 1.0f : 0.125f;
      x[r * cols + c] = scale * (c == 0 ? static_cast<float>(qmax) : static_cast<float>(c % (2 * qmax) - qmax) + 0.5f);
    }
  if constexpr (!std::is_same_v<T, float>) x = round_bf16(x);  // what the device holds

  const QuantizeOptions opt{bits, stochastic, in.seed * 13 + 1, 5};
  const int64_t rb = quantized_row_bytes(cols, bits);
  std::vector<double> xd(x.begin(), x.end());
  std::vector<uint8_t> codes_ref(static_cast<size_t>(rows * rb));
  std::vector<float> scales_ref(static_cast<size_t>(rows));
  const double err_ref = quantize_rows_cpu(xd.data(), rows, cols, opt, codes_ref.data(), scales_ref.data());
  double xx_ref = 0.0;
  for (double v : xd) xx_ref += v * v;
  std::vector<double> restored_ref(xd.size());
  dequantize_rows_cpu(codes_ref.data(), scales_ref.data(), rows, cols, bits, restored_ref.data());

  std::vector<T> x_dev(x.size());
  for (size_t i = 0; i < x.size(); ++i) x_dev[i] = from_float<T>(x[i]);
  DeviceBuffer<T> d_x(x_dev), d_out(x.size());
  DeviceBuffer<uint8_t> d_codes(codes_ref.size());
  DeviceBuffer<float> d_scales(scales_ref.size());
  DeviceBuffer<double> d_terms(2);
  DeviceBuffer<uint8_t> d_work(quantize_rows_workspace_bytes(rows, true));
  d_codes.poison();
  d_scales.poison();
  d_terms.poison();
  d_out.poison();
  const RowQuantizeParams p{bits, stochastic, opt.seed, opt.stream};
  quantize_rows<T>(d_x.data(), rows, cols, p, d_codes.data(), d_scales.data(), d_terms.data(), d_work.data(), nullptr);
  dequantize_rows<T>(d_codes.data(), d_scales.data(), rows, cols, bits, d_out.data(), nullptr);
  MOK_CUDA_CHECK(cudaDeviceSynchronize());

  out.push_back({name + ".codes (bitwise)", differing_fraction(d_codes.download(), codes_ref), 0.0});
  out.push_back({name + ".scales (bitwise)", differing_fraction(d_scales.download(), scales_ref), 0.0});
  std::vector<T> restored_want(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if constexpr (std::is_same_v<T, float>) restored_want[i] = static_cast<float>(restored_ref[i]);
    else restored_want[i] = __double2bfloat16(restored_ref[i]);
  }
  out.push_back({name + ".restored (bitwise)", differing_fraction(d_out.download(), restored_want), 0.0});
  const auto terms = d_terms.download();
  out.push_back({name + ".error_terms", std::max(std::fabs(terms[0] - err_ref) / std::max(err_ref, 1e-300),
                                                 std::fabs(terms[1] - xx_ref) / xx_ref),
                 1e-6});  // float terms per pack of 8 values: within 10 · 2⁻²⁴ each
}

}  // namespace

// The low-rank keepers on the GPU against the CPU's (lowrank_kitten_checks.cpp, float core).
void check_lowrank_kittens(CheckInputs& in, std::vector<OpCheck>& out);

void check_lowbit_rows(CheckInputs& in, std::vector<OpCheck>& out) {
  for (int bits : {8, 4})
    for (bool stochastic : {false, true})
      // 333: the one-value kernel; 768, 1024, 2304, 5120: rows held in registers by 1, 1, 3
      // and 5 warps (3, 4, 3 and 4 packs a lane); 9216: two passes over each row.
      for (int64_t cols :
           {int64_t{333}, int64_t{768}, int64_t{1024}, int64_t{2304}, int64_t{5120}, int64_t{9216}}) {
        run_guarded(out, "kittens.rows_f32", [&] { check_one<float>(in, out, "f32", 300, cols, bits, stochastic); });
        run_guarded(out, "kittens.rows_bf16", [&] { check_one<bf16>(in, out, "bf16", 300, cols, bits, stochastic); });
      }
}

void check_kittens(CheckInputs& in, std::vector<OpCheck>& out) {
  check_lowbit_rows(in, out);
  check_lowrank_kittens(in, out);
}

}  // namespace mok::cuda
