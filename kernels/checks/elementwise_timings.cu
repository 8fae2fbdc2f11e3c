// Timings of the elementwise, norm, loss, embedding and optimizer kernels at the benchmark
// shapes: 16 × 1024 tokens, d_model 768, expert/MLP hidden f 2048, vocab 256 (bytes); AdamW
// and the gradient norm over the 85M parameters of the dense model (12 layers). Median of
// repeats (CUDA events) after warm-up, and the bytes each kernel must move at least, as GB/s
// and as a share of the H200's ≈ 4.3 TB/s copy bandwidth. Figures only, no pass/fail.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/adamw.h"
#include "kernels/checks/check_util.h"
#include "kernels/checks/median_time.h"
#include "kernels/cross_entropy.h"
#include "kernels/cuda_types.h"
#include "kernels/device_buffer.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/grad_norm.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"

namespace mok::cuda {
namespace {

constexpr double kCopyBandwidth = 4.3e12;  // bytes/s, H200


void print_row(const std::string& kernel, const char* type, double bytes, float ms) {
  const double gbps = bytes / (ms * 1e-3) / 1e9;
  std::printf("%-34s %5s %9.4f %9.1f %9.0f %6.1f%%\n", kernel.c_str(), type, ms, bytes / 1e6, gbps,
              100.0 * gbps * 1e9 / kCopyBandwidth);
}

// n values ~ N(0, scale²), tiled from one block of counter normals (the values only need to
// be typical, not independent).
std::vector<float> typical_values(size_t n, double scale, uint64_t stream) {
  CheckInputs in{2026, stream};
  const std::vector<float> block = in.normal(std::min<size_t>(n, 1 << 20), scale);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = block[i % block.size()];
  return v;
}

template <typename T>
DeviceBuffer<T> device_values(size_t n, double scale, uint64_t stream) {
  const std::vector<float> v = typical_values(n, scale, stream);
  if constexpr (std::is_same_v<T, float>)
    return DeviceBuffer<float>(v);
  else
    return DeviceBuffer<bf16>(to_bf16(v));
}

template <typename T>
void time_activation_kernels(const char* type) {
  const int64_t n = 16 * 1024, d = 768, f = 2048, vocab = 256, heads = 12, hd = 64;
  const double s = sizeof(T), nd = double(n) * d;
  auto x = device_values<T>(size_t(n * d), 1.0, 1), dy = device_values<T>(size_t(n * d), 1.0, 2);
  auto g = device_values<T>(size_t(d), 1.0, 3);
  DeviceBuffer<T> y(static_cast<size_t>(n * d)), dx(static_cast<size_t>(n * d));
  DeviceBuffer<float> rstd(static_cast<size_t>(n)), dg(static_cast<size_t>(d));
  fill<float>(dg.data(), 0.f, d, nullptr);
  rms_norm_forward<T>(x.data(), g.data(), 1e-5f, n, d, y.data(), rstd.data(), nullptr);
  print_row("rms_norm.forward", type, 2 * nd * s + n * 4.0, median_ms([&] {
              rms_norm_forward<T>(x.data(), g.data(), 1e-5f, n, d, y.data(), rstd.data(), nullptr);
            }));
  print_row("rms_norm.apply", type, 2 * nd * s + n * 4.0,
            median_ms([&] { rms_norm_apply<T>(x.data(), g.data(), rstd.data(), n, d, y.data(), nullptr); }));
  const size_t ws_bytes = rms_norm_backward_workspace_bytes(n, d);
  DeviceBuffer<char> ws(ws_bytes);
  print_row("rms_norm.backward", type, 3 * nd * s + n * 4.0 + 2.0 * ws_bytes, median_ms([&] {
              rms_norm_backward<T>(dy.data(), x.data(), g.data(), rstd.data(), n, d, dx.data(), dg.data(), ws.data(),
                                   ws_bytes, nullptr);
            }));

  // RoPE on the q and k parts of a fused (n, 3·d) qkv row.
  auto qkv = device_values<T>(size_t(n * 3 * d), 1.0, 4);
  std::vector<float> cos_host(static_cast<size_t>(1024 * hd / 2)), sin_host(cos_host.size());
  for (int p = 0; p < 1024; ++p)
    for (int i = 0; i < hd / 2; ++i) {
      cos_host[p * hd / 2 + i] = std::cos(p * std::pow(10000.0, -2.0 * i / hd));
      sin_host[p * hd / 2 + i] = std::sin(p * std::pow(10000.0, -2.0 * i / hd));
    }
  const DeviceBuffer<float> cos(cos_host), sin(sin_host);
  print_row("rope (q and k, ld 3·d)", type, 2 * 2 * nd * s, median_ms([&] {
              rope_apply<T>(qkv.data(), n, 3 * d, heads, 1024, 0, cos.data(), sin.data(), hd, false, nullptr);
              rope_apply<T>(qkv.data() + d, n, 3 * d, heads, 1024, 0, cos.data(), sin.data(), hd, false, nullptr);
            }));

  auto a = device_values<T>(size_t(n * 2 * f), 1.0, 5), dh = device_values<T>(size_t(n * f), 1.0, 6);
  DeviceBuffer<T> h(static_cast<size_t>(n * f)), da(static_cast<size_t>(n * 2 * f));
  const double nf = double(n) * f;
  print_row("swiglu.forward (f 2048)", type, 3 * nf * s,
            median_ms([&] { swiglu_forward<T>(a.data(), n, f, h.data(), nullptr); }));
  print_row("swiglu.backward (f 2048)", type, 5 * nf * s,
            median_ms([&] { swiglu_backward<T>(a.data(), dh.data(), n, f, da.data(), nullptr); }));

  // The logits are overwritten by their gradient; later repeats run on those values (finite,
  // the same work).
  auto logits = device_values<T>(size_t(n * vocab), 3.0, 7);
  CheckInputs in{2026, 8};
  const DeviceBuffer<int32_t> targets(in.uniform_int(size_t(n), static_cast<int32_t>(vocab)));
  DeviceBuffer<float> row_loss(static_cast<size_t>(n));
  print_row("cross_entropy.forward+grad (V 256)", type, 2.0 * n * vocab * s + n * 8.0, median_ms([&] {
              cross_entropy_forward<T>(logits.data(), targets.data(), n, vocab, true, row_loss.data(), nullptr);
            }));
  const size_t ce_ws_bytes = cross_entropy_reduce_workspace_bytes(n);
  DeviceBuffer<char> ce_ws(ce_ws_bytes);
  DeviceBuffer<double> loss_sum(1);
  DeviceBuffer<int64_t> count(1);
  print_row("cross_entropy.reduce", type, n * 8.0, median_ms([&] {
              cross_entropy_reduce(row_loss.data(), targets.data(), n, loss_sum.data(), count.data(), ce_ws.data(),
                                   ce_ws_bytes, nullptr);
            }));

  auto w = device_values<T>(size_t(vocab * d), 1.0, 9);
  const DeviceBuffer<int32_t> tokens(in.uniform_int(size_t(n), static_cast<int32_t>(vocab)));
  print_row("embedding.forward", type, 2 * nd * s + n * 4.0,
            median_ms([&] { embedding_forward<T>(w.data(), tokens.data(), n, d, y.data(), nullptr); }));
  DeviceBuffer<float> dw(static_cast<size_t>(vocab * d));
  fill<float>(dw.data(), 0.f, vocab * d, nullptr);
  const size_t emb_ws_bytes = embedding_backward_workspace_bytes(n, vocab, d);
  DeviceBuffer<char> emb_ws(emb_ws_bytes);
  print_row("embedding.backward (sort + sums)", type, nd * s + 2.0 * vocab * d * 4 + n * 16.0, median_ms([&] {
              embedding_backward<T>(dx.data(), tokens.data(), n, vocab, d, dw.data(), emb_ws.data(), emb_ws_bytes,
                                    nullptr);
            }));

  print_row("add_inplace (n·d)", type, 3 * nd * s,
            median_ms([&] { add_inplace<T>(y.data(), x.data(), n * d, nullptr); }));
  print_row("add2_inplace (n·d)", type, 4 * nd * s,
            median_ms([&] { add2_inplace<T>(y.data(), x.data(), dy.data(), n * d, nullptr); }));
  print_row("scale (n·d)", type, 2 * nd * s, median_ms([&] { scale<T>(x.data(), 0.5f, y.data(), n * d, nullptr); }));
  print_row("fill (n·d)", type, nd * s, median_ms([&] { fill<T>(y.data(), 0.f, n * d, nullptr); }));
}

// The 85M parameters of the dense model: embedding, 12 × (qkv, out, w1 [gate|up], w2, 2 norms), final norm.
std::vector<int64_t> dense_parameter_sizes() {
  const int64_t d = 768, f = 2048, vocab = 256;
  std::vector<int64_t> sizes = {vocab * d};
  for (int layer = 0; layer < 12; ++layer)
    for (int64_t s : {d * 3 * d, d * d, d * 2 * f, f * d, d, d}) sizes.push_back(s);
  sizes.push_back(d);
  return sizes;
}

void time_optimizer_kernels() {
  const std::vector<int64_t> sizes = dense_parameter_sizes();
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (int64_t s : sizes) {
    offsets.push_back(total);
    total += (s + 63) / 64 * 64;  // each tensor 256-byte aligned, as from the caching allocator
  }
  DeviceBuffer<float> param(static_cast<size_t>(total)), grad(static_cast<size_t>(total)), m(static_cast<size_t>(total)), v(static_cast<size_t>(total));
  DeviceBuffer<bf16> compute(static_cast<size_t>(total));
  fill<float>(param.data(), 0.02f, total, nullptr);
  fill<float>(grad.data(), 1e-3f, total, nullptr);
  fill<float>(m.data(), 0.f, total, nullptr);
  fill<float>(v.data(), 0.f, total, nullptr);
  std::vector<AdamWTensor> tensors;
  std::vector<GradNormTensor> grads;
  int64_t numel = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t o = offsets[i];
    tensors.push_back({param.data() + o, grad.data() + o, m.data() + o, v.data() + o, compute.data() + o, sizes[i],
                       sizes[i] > 768 ? 1 : 0});
    grads.push_back({grad.data() + o, sizes[i]});
    numel += sizes[i];
  }
  AdamWPlan adamw(tensors, true);
  DeviceBuffer<char> adamw_memory(adamw.device_bytes());
  adamw.upload(adamw_memory.data(), nullptr);
  int64_t step = 0;
  char label[96];
  std::snprintf(label, sizeof label, "adamw (%.1fM params, bf16 copy)", numel / 1e6);
  print_row(label, "f32", numel * 30.0, median_ms([&] { adamw.step(3e-4, 0.9, 0.95, 1e-8, 0.1, ++step, nullptr); }));

  GradNormPlan norm(grads);
  DeviceBuffer<char> norm_memory(norm.device_bytes());
  norm.upload(norm_memory.data(), nullptr);
  DeviceBuffer<double> sum_sq(1);
  print_row("grad_norm.sum_squares", "f32", numel * 4.0, median_ms([&] { norm.sum_squares(sum_sq.data(), nullptr); }));
  print_row("grad_norm.scale", "f32", numel * 8.0, median_ms([&] { norm.scale(1.0f, nullptr); }));
  print_row("convert f32→bf16 (85M)", "", numel * 6.0,
            median_ms([&] { convert<float, bf16>(param.data(), compute.data(), total, nullptr); }));
  print_row("convert bf16→f32 (85M)", "", numel * 6.0,
            median_ms([&] { convert<bf16, float>(compute.data(), param.data(), total, nullptr); }));
}

}  // namespace

void print_elementwise_timings() {
  std::printf("\nelementwise, norm, loss, embedding, optimizer kernels: 16×1024 tokens, d 768, f 2048, vocab 256\n");
  std::printf("%-34s %5s %9s %9s %9s %7s\n", "kernel", "type", "ms", "MB", "GB/s", "of 4.3T");
  time_activation_kernels<bf16>("bf16");
  time_activation_kernels<float>("f32");
  time_optimizer_kernels();
  MOK_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace mok::cuda
