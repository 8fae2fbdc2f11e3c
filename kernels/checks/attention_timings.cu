// Timings of the causal flash attention (kernels/flash_attention.h): median ms over repeats
// (CUDA events, after warm-up) and achieved TFLOP/s with the causal FLOP counts
//   forward  2·2·B·H·S²·hd/2   (Q·Kᵀ and P·V over the lower triangle)
//   backward 2.5 × forward     (the usual count of five products; the deterministic
//                               kernels compute seven: S and dP twice, for dK/dV and for dQ)
// against the 797 TFLOP/s bf16 dense peak measured on the H200 (cuBLAS GEMM 8192³).
#include "kernels/checks/check_util.h"
#include "kernels/checks/median_time.h"
#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/flash_attention.h"
#include "kernels/flash_attention_launch.h"
#ifdef MOK_HAVE_CUDNN
#include "kernels/cudnn_attention.h"
#endif

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <type_traits>

namespace mok::cuda {
namespace {

constexpr double kPeakTflops = 797.0;


template <typename T>
std::vector<T> to_element(const std::vector<float>& v) {
  if constexpr (std::is_same_v<T, bf16>) return to_bf16(v); else return v;
}

// The backward's kernels one by one (D comes from a first full backward, as the timed
// kernels need it): where the time goes.
template <typename T>
void time_backward_parts(CheckInputs& in, int B, int S, int H, int hd) {
  const size_t d = size_t(H) * hd, rows = size_t(B) * S;
  DeviceBuffer<T> qkv(to_element<T>(in.normal(rows * 3 * d))), d_o(to_element<T>(in.normal(rows * d)));
  DeviceBuffer<T> o(rows * d), dqkv(rows * 3 * d);
  DeviceBuffer<float> lse(size_t(B) * H * S);
  DeviceBuffer<unsigned char> ws(flash_attention_backward_workspace_bytes(B, S, H, hd));
  flash_attention_forward<T>(qkv.data(), B, S, H, hd, o.data(), lse.data(), nullptr);
  flash_attention_backward<T>(qkv.data(), d_o.data(), lse.data(), o.data(), B, S, H, hd, dqkv.data(), ws.data(),
                              ws.size(), nullptr);
  const float* dvec = reinterpret_cast<const float*>(ws.data());  // D: the workspace's first part
  const float total = median_ms([&] {
    flash_attention_backward<T>(qkv.data(), d_o.data(), lse.data(), o.data(), B, S, H, hd, dqkv.data(), ws.data(),
                                ws.size(), nullptr);
  });
  const float dkdv = median_ms([&] {
    launch_flash_backward_dkdv(qkv.data(), d_o.data(), lse.data(), dvec, B, S, H, hd, dqkv.data(), nullptr);
  });
  const float dq = median_ms([&] {
    launch_flash_backward_dq(qkv.data(), d_o.data(), lse.data(), dvec, B, S, H, hd, dqkv.data(), nullptr);
  });
  MOK_CUDA_CHECK(cudaDeviceSynchronize());
  // Causal FLOPs of each kernel: dK/dV four products, dQ three, each 2·B·H·S²·hd/2.
  const double product = 2.0 * B * H * double(S) * S * hd / 2.0;
  std::printf("backward parts, %s %d×%d×%d×%d: dK/dV %.3f ms (%.1f TFLOP/s), dQ %.3f ms (%.1f TFLOP/s), "
              "D pre-pass and launches %.3f ms, total %.3f ms\n",
              std::is_same_v<T, bf16> ? "bf16" : "fp32", B, S, H, hd, dkdv, 4 * product / (dkdv * 1e-3) / 1e12, dq,
              3 * product / (dq * 1e-3) / 1e12, total - dkdv - dq, total);
}

template <typename T>
void time_shape(CheckInputs& in, const char* label, int B, int S, int H, int hd) {
  const size_t d = size_t(H) * hd, rows = size_t(B) * S;
  DeviceBuffer<T> qkv(to_element<T>(in.normal(rows * 3 * d))), d_o(to_element<T>(in.normal(rows * d)));
  DeviceBuffer<T> o(rows * d), dqkv(rows * 3 * d);
  DeviceBuffer<float> lse(size_t(B) * H * S);
  DeviceBuffer<unsigned char> ws(flash_attention_backward_workspace_bytes(B, S, H, hd));

  const float fwd_ms =
      median_ms([&] { flash_attention_forward<T>(qkv.data(), B, S, H, hd, o.data(), lse.data(), nullptr); });
  const float bwd_ms = median_ms([&] {
    flash_attention_backward<T>(qkv.data(), d_o.data(), lse.data(), o.data(), B, S, H, hd, dqkv.data(), ws.data(),
                                ws.size(), nullptr);
  });
  const float bwd_null_ms = median_ms([&] {
    flash_attention_backward<T>(qkv.data(), d_o.data(), lse.data(), nullptr, B, S, H, hd, dqkv.data(), ws.data(),
                                ws.size(), nullptr);
  });
  MOK_CUDA_CHECK(cudaDeviceSynchronize());

  const double fwd_flop = 2.0 * 2.0 * B * H * double(S) * S * hd / 2.0, bwd_flop = 2.5 * fwd_flop;
  const double fwd_tflops = fwd_flop / (fwd_ms * 1e-3) / 1e12, bwd_tflops = bwd_flop / (bwd_ms * 1e-3) / 1e12;
  char shape[64];
  std::snprintf(shape, sizeof shape, "%d×%d×%d×%d", B, S, H, hd);
  std::printf("%-14s %-5s %-18s %8.3f %8.1f %6.1f%% %8.3f %8.1f %6.1f%% %11.3f\n", label,
              std::is_same_v<T, bf16> ? "bf16" : "fp32", shape, fwd_ms, fwd_tflops, 100.0 * fwd_tflops / kPeakTflops,
              bwd_ms, bwd_tflops, 100.0 * bwd_tflops / kPeakTflops, bwd_null_ms);
#ifdef MOK_HAVE_CUDNN
  // The same shape through cuDNN's fused attention, its backward in chunks of sequences whose
  // dP workspace stays within a cap (kernels/cudnn_attention.h): the default, 256 and 64 MiB.
  if constexpr (std::is_same_v<T, bf16>) {
    for (const size_t cap : {CudnnAttention::kDefaultMaxBackwardWorkspace, size_t(256) << 20, size_t(64) << 20}) {
      try {
        static std::map<size_t, std::unique_ptr<CudnnAttention>> by_cap;  // one handle per cap, kept to exit
        auto& fused = by_cap[cap];
        if (!fused) fused = std::make_unique<CudnnAttention>(cap);
        DeviceBuffer<unsigned char> fwd_ws(std::max<size_t>(fused->forward_workspace_bytes(B, S, H, hd), 1));
        DeviceBuffer<unsigned char> bwd_ws(fused->backward_workspace_bytes(B, S, H, hd));
        const float c_fwd = median_ms([&] {
          fused->forward(qkv.data(), B, S, H, hd, o.data(), lse.data(), fwd_ws.data(), fwd_ws.size(), nullptr);
        });
        const float c_bwd = median_ms([&] {
          fused->backward(qkv.data(), d_o.data(), lse.data(), o.data(), B, S, H, hd, dqkv.data(), bwd_ws.data(),
                          bwd_ws.size(), nullptr);
        });
        MOK_CUDA_CHECK(cudaDeviceSynchronize());
        const double c_fwd_tflops = fwd_flop / (c_fwd * 1e-3) / 1e12, c_bwd_tflops = bwd_flop / (c_bwd * 1e-3) / 1e12;
        const FusedAttentionChunk chunk = fused->backward_chunk(B, S, H);
        std::printf("%-14s %-5s %-18s %8.3f %8.1f %6.1f%% %8.3f %8.1f %6.1f%% %11s  backward %d sequences × %d heads "
                    "a call, workspace %.1f MiB\n",
                    label, "cuDNN", shape, c_fwd, c_fwd_tflops, 100.0 * c_fwd_tflops / kPeakTflops, c_bwd,
                    c_bwd_tflops, 100.0 * c_bwd_tflops / kPeakTflops, "", chunk.sequences, chunk.heads,
                    bwd_ws.size() / 1048576.0);
      } catch (const std::exception& e) {
        std::printf("%-14s cuDNN %-18s %s\n", label, shape, e.what());
      }
    }
  }
#endif
}

}  // namespace

void print_attention_timings() {
  CheckInputs in{20260601};
  std::printf("\ncausal flash attention (median ms; TFLOP/s with causal counts; %% of the %.0f TFLOP/s bf16 peak)\n",
              kPeakTflops);
  std::printf("%-14s %-5s %-18s %8s %8s %7s %8s %8s %7s %11s\n", "shape", "type", "B×S×H×hd", "fwd ms", "TFLOP/s",
              "peak", "bwd ms", "TFLOP/s", "peak", "bwd(o=0) ms");
  time_shape<bf16>(in, "benchmark", 16, 1024, 12, 64);
  time_shape<bf16>(in, "quickstart", 16, 128, 4, 32);
  time_shape<bf16>(in, "hd 128", 8, 1024, 16, 128);
  time_shape<bf16>(in, "long rows", 4, 4096, 12, 64);
  time_shape<float>(in, "benchmark", 16, 1024, 12, 64);
  time_backward_parts<bf16>(in, 16, 1024, 12, 64);
  time_backward_parts<bf16>(in, 8, 1024, 16, 128);
}

}  // namespace mok::cuda
