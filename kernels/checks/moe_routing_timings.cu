// Timings of the MoE routing kernels (kernels/moe_routing.h) at the benchmark shapes: 16 ×
// 1024 tokens, d 768, bf16 rows; experts 8 top-2 (f 1024) and 64 top-8 (f 256), uniform
// random routing. Median of repeats after warm-up (CUDA events); achieved GB/s from the
// bytes each kernel must read and write. Figures only, no pass/fail.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/checks/check_util.h"
#include "kernels/checks/median_time.h"
#include "kernels/cuda_types.h"
#include "kernels/device_buffer.h"
#include "kernels/moe_routing.h"
#include "kernels/swiglu.h"

namespace mok::cuda {
namespace {


template <typename F>
void time_row(const std::string& what, const std::string& shape, double bytes, F&& launch) {
  try {
    const float ms = median_ms(launch);
    std::printf("%-30s %-26s %9.3f %9.1f\n", what.c_str(), shape.c_str(), ms, bytes / (ms * 1e-3) / 1e9);
  } catch (const std::exception& e) {
    std::printf("%-30s %-26s failed: %s\n", what.c_str(), shape.c_str(), e.what());
  }
}

// count bf16 values: a block of 2^16 random values repeated (the values do not change the
// timings; generating 10^7 of them on the host would take seconds of the GPU machine's time).
DeviceBuffer<bf16> random_bf16(CheckInputs& in, size_t count) {
  const std::vector<bf16> block = to_bf16(in.normal(size_t(1) << 16));
  DeviceBuffer<bf16> b(count);
  for (size_t at = 0; at < count; at += block.size())
    MOK_CUDA_CHECK(cudaMemcpy(b.data() + at, block.data(), std::min(block.size(), count - at) * sizeof(bf16),
                              cudaMemcpyHostToDevice));
  return b;
}

void time_layer(int E, int k, int64_t f) {
  const int64_t n = 16 * 1024, d = 768, P = n * k;
  CheckInputs in{2027};
  DeviceBuffer<float> logits(in.normal(size_t(n) * E)), probs(size_t(n) * E), lse(n), gate(P), dgate(in.normal(P));
  DeviceBuffer<float> dlogits(size_t(n) * E), per_row(in.normal(P)), frac(std::vector<float>(E, 1.f / E));
  DeviceBuffer<int32_t> expert(P), order(P), row_of_pair(P);
  DeviceBuffer<int64_t> load(E), counts(E);
  DeviceBuffer<double> sums(3);
  const size_t sort_bytes = moe_sort_pairs_workspace_bytes(P, E), loss_bytes = router_losses_workspace_bytes(n, E);
  DeviceBuffer<char> sort_ws(sort_bytes), loss_ws(std::max<size_t>(loss_bytes, 1));
  DeviceBuffer<bf16> x = random_bf16(in, size_t(n) * d), rows(size_t(P) * d), y(size_t(n) * d);
  DeviceBuffer<bf16> h = random_bf16(in, size_t(P) * f), dh = random_bf16(in, size_t(P) * f);
  DeviceBuffer<float> dot(P);
  DeviceBuffer<bf16> a = random_bf16(in, size_t(P) * 2 * f), da(size_t(P) * 2 * f), rows_scaled(size_t(P) * d);
  // routing once, so the row kernels see a real order
  router_softmax_topk(logits.data(), n, E, k, probs.data(), lse.data(), expert.data(), gate.data(), nullptr);
  moe_sort_pairs(expert.data(), P, E, 0, order.data(), row_of_pair.data(), load.data(), counts.data(),
                 sort_ws.data(), sort_bytes, nullptr);
  MOK_CUDA_CHECK(cudaDeviceSynchronize());

  const std::string layer = std::to_string(E) + "×" + std::to_string(f) + " top-" + std::to_string(k);
  std::printf("\nMoE routing kernels, experts %s, %lld tokens, d %lld (bf16 rows)\n", layer.c_str(), (long long)n,
              (long long)d);
  std::printf("%-30s %-26s %9s %9s\n", "kernel", "shape", "ms", "GB/s");
  const std::string nE = std::to_string(n) + "×" + std::to_string(E);
  const std::string md = std::to_string(P) + "×" + std::to_string(d);
  time_row("router_softmax_topk", nE, 4.0 * n * E * 2 + 4.0 * n + 8.0 * P, [&] {
    router_softmax_topk(logits.data(), n, E, k, probs.data(), lse.data(), expert.data(), gate.data(), nullptr);
  });
  time_row("moe_sort_pairs", std::to_string(P) + " pairs", 4.0 * P * 3, [&] {
    moe_sort_pairs(expert.data(), P, E, 0, order.data(), row_of_pair.data(), load.data(), counts.data(),
                   sort_ws.data(), sort_bytes, nullptr);
  });
  time_row("gather_rows bf16", md, 2.0 * 2 * P * d,
           [&] { gather_rows<bf16>(x.data(), order.data(), k, P, d, rows.data(), nullptr); });
  time_row("gather_rows + scaled bf16", md, 2.0 * 3 * P * d, [&] {
    gather_rows<bf16>(x.data(), order.data(), k, P, d, rows.data(), nullptr, per_row.data(), rows_scaled.data());
  });
  time_row("combine_pairs bf16 (gated)", md, 2.0 * P * d + 2.0 * n * d,
           [&] { combine_pairs<bf16>(rows.data(), row_of_pair.data(), gate.data(), n, k, d, y.data(), nullptr); });
  time_row("pair_values_to_rows", std::to_string(P), 12.0 * P,
           [&] { pair_values_to_rows(gate.data(), order.data(), P, per_row.data(), nullptr); });
  time_row("rows_to_pair_values", std::to_string(P), 16.0 * P,
           [&] { rows_to_pair_values(per_row.data(), order.data(), P, P, dgate.data(), nullptr); });
  time_row("row_dot bf16", std::to_string(P) + "×" + std::to_string(f), 2.0 * 2 * P * f,
           [&] { row_dot<bf16>(dh.data(), h.data(), P, f, dot.data(), nullptr); });
  time_row("scale_rows bf16 (in place)", std::to_string(P) + "×" + std::to_string(f), 2.0 * 2 * P * f,
           [&] { scale_rows<bf16>(dh.data(), per_row.data(), P, f, dh.data(), nullptr); });
  time_row("swiglu_backward_gated bf16", std::to_string(P) + "×" + std::to_string(f), 2.0 * 5 * P * f,
           [&] { swiglu_backward_gated<bf16>(a.data(), dh.data(), per_row.data(), P, f, da.data(), dot.data(), nullptr); });
  time_row("router_losses", nE, 4.0 * n * E + 4.0 * n, [&] {
    router_losses(probs.data(), lse.data(), frac.data(), nullptr, n, E, sums.data(), loss_ws.data(), loss_bytes,
                  nullptr);
  });
  time_row("router_backward", nE, 4.0 * n * E * 2 + 12.0 * P, [&] {
    router_backward(probs.data(), lse.data(), expert.data(), dgate.data(), frac.data(), nullptr, n, E, k, 1e-3f,
                    1e-4f, 0.f, dlogits.data(), nullptr);
  });
}

}  // namespace

void print_moe_routing_timings() {
  try {
    time_layer(8, 2, 1024);
    time_layer(64, 8, 256);
  } catch (const std::exception& e) {
    std::printf("MoE routing timings stopped: %s\n", e.what());
  }
}

}  // namespace mok::cuda
