// How fast the kitten copies are made and restored (kernels/row_quantize.h), bf16, at the
// shapes the benchmark models keep:
// milliseconds and the bandwidth they reach, beside a plain device copy of the same tensor.
#include <cstdio>

#include "core/backend/row_quantize.h"
#include "kernels/checks/check_util.h"
#include "kernels/checks/median_time.h"
#include "kernels/cuda_types.h"
#include "kernels/device_buffer.h"
#include "kernels/row_quantize.h"

namespace mok::cuda {

// The low-rank keepers' save and weight gradient against exact (lowrank_kitten_checks.cpp).
void print_lowrank_kitten_timings();

void print_kitten_timings() {
  std::printf("\n%-16s %5s %12s %10s %12s %14s %10s %10s\n", "kitten bf16", "bits", "quantize ms", "GB/s",
              "no error ms", "dequantize ms", "GB/s", "copy ms");
  CheckInputs in{99};
  // The shapes the 8 × 1024 MoE step keeps (16 × 1024 tokens; 32 768 expert rows at top-2),
  // and a wider row.
  const int64_t shapes[][2] = {{16384, 768}, {32768, 768}, {32768, 1024}, {16384, 2304}, {32768, 2048}, {16384, 4096}};
  for (const auto& [rows, cols] : shapes) {
    const auto x = to_bf16(in.normal(static_cast<size_t>(rows * cols)));
    DeviceBuffer<bf16> d_x(x), d_out(x.size());
    DeviceBuffer<float> d_scales(static_cast<size_t>(rows));
    DeviceBuffer<double> d_terms(2);
    DeviceBuffer<uint8_t> d_work(quantize_rows_workspace_bytes(rows, true));
    const double x_bytes = static_cast<double>(x.size()) * sizeof(bf16);
    const float copy = median_ms([&] {
      MOK_CUDA_CHECK(cudaMemcpyAsync(d_out.data(), d_x.data(), x.size() * sizeof(bf16), cudaMemcpyDeviceToDevice));
    });
    for (const int bits : {4, 8}) {
      const int64_t code_bytes = rows * mok::quantized_row_bytes(cols, bits);
      DeviceBuffer<uint8_t> d_codes(static_cast<size_t>(code_bytes));
      const RowQuantizeParams p{bits, false, 1, 2};
      const float q = median_ms([&] {
        quantize_rows<bf16>(d_x.data(), rows, cols, p, d_codes.data(), d_scales.data(), d_terms.data(), d_work.data(),
                            nullptr);
      });
      // Without the error measurement (the sums a save reports for its statistics).
      const float q_plain = median_ms([&] {
        quantize_rows<bf16>(d_x.data(), rows, cols, p, d_codes.data(), d_scales.data(), nullptr, d_work.data(),
                            nullptr);
      });
      const float dq = median_ms([&] {
        dequantize_rows<bf16>(d_codes.data(), d_scales.data(), rows, cols, bits, d_out.data(), nullptr);
      });
      const double moved = x_bytes + static_cast<double>(code_bytes) + 4.0 * rows;  // read X, write codes + scales
      char shape[32];
      std::snprintf(shape, sizeof shape, "%lld×%lld", static_cast<long long>(rows), static_cast<long long>(cols));
      std::printf("%-16s %5d %12.3f %10.0f %12.3f %14.3f %10.0f %10.3f\n", shape, bits, q, moved / q / 1e6, q_plain,
                  dq, moved / dq / 1e6, copy);
    }
  }
  print_lowrank_kitten_timings();
}

}  // namespace mok::cuda
