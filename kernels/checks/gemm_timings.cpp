// GEMM timings at the benchmark models' shapes (16 × 1024 tokens, d 768): the dense
// layers' forward and backward products through LtGemm, and the experts' grouped products
// through each GroupedGemm method (the grouped kernel in both tile shapes), against one dense
// GEMM of the same total work (what a perfect grouped GEMM would approach). Median of repeats after warm-up (CUDA events);
// TFLOP/s and the share of the H200's measured bf16 peak. Figures only, no pass/fail.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "kernels/checks/check_util.h"
#include "kernels/checks/median_time.h"
#include "kernels/cuda_types.h"
#include "kernels/device_buffer.h"
#include "kernels/gemm_lt.h"
#include "kernels/grouped_gemm.h"

namespace mok::cuda {
namespace {

constexpr double kPeakBf16Tflops = 797.0;  // cuBLAS bf16 8192³ on the H200 (docs/DESIGN)
constexpr int64_t kTokens = 16 * 1024;
constexpr int64_t kModel = 768;


// Device scratch of random values, big enough for every operand of the table.
struct Scratch {
  DeviceBuffer<bf16> b16;
  DeviceBuffer<float> f32;
  // A block of 2^20 random values repeated (the values do not change the timings much;
  // generating 10^8 of them on the host would).
  explicit Scratch(size_t count) : b16(count), f32(count) {
    CheckInputs in{2026};
    const std::vector<float> v = in.normal(size_t(1) << 20, 0.5);
    const std::vector<bf16> h = to_bf16(v);
    for (size_t at = 0; at < count; at += v.size()) {
      const size_t n = std::min(v.size(), count - at);
      MOK_CUDA_CHECK(cudaMemcpy(f32.data() + at, v.data(), n * sizeof(float), cudaMemcpyHostToDevice));
      MOK_CUDA_CHECK(cudaMemcpy(b16.data() + at, h.data(), n * sizeof(bf16), cudaMemcpyHostToDevice));
    }
  }
  void* operand(GemmType t, int which, size_t stride) {
    return t == GemmType::f32 ? static_cast<void*>(f32.data() + which * stride)
                              : static_cast<void*>(b16.data() + which * stride);
  }
};

// Times `launch` and prints one row; a call that throws prints its message instead.
template <typename F>
void time_row(const std::string& what, const std::string& shape, const std::string& types, double flops,
              F&& launch) {
  float ms = 0;
  try {
    ms = median_ms(launch);
  } catch (const std::exception& e) {
    std::printf("%-34s %-22s %-10s failed: %s\n", what.c_str(), shape.c_str(), types.c_str(), e.what());
    return;
  }
  const double tflops = flops / (ms * 1e-3) / 1e12;
  std::printf("%-34s %-22s %-10s %9.3f %9.1f %7.1f%%\n", what.c_str(), shape.c_str(), types.c_str(), ms, tflops,
              100.0 * tflops / kPeakBf16Tflops);
}

std::string dims(int64_t m, int64_t n, int64_t k) {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
}

// One linear layer Y (T, out) = X (T, in)·W (in, out): forward, dX = dY·Wᵀ, dW += Xᵀ·dY (fp32).
void time_linear(LtGemm& lt, Scratch& s, size_t stride, const std::string& name, int64_t in, int64_t out,
                 GemmType t) {
  const int64_t T = kTokens;
  const double flops = 2.0 * T * in * out;
  const std::string types = std::string(gemm_type_name(t));
  void* x = s.operand(t, 0, stride);
  void* w = s.operand(t, 1, stride);
  void* y = s.operand(t, 2, stride);
  float* dw = s.f32.data() + 3 * stride;
  time_row(name + " fwd  Y=X·W", dims(T, out, in), types + ">" + types, flops,
           [&] { lt.gemm(false, false, T, out, in, 1.f, x, in, w, out, 0.f, y, out, t, t, nullptr); });
  time_row(name + " bwd  dX=dY·Wᵀ", dims(T, in, out), types + ">" + types, flops,
           [&] { lt.gemm(false, true, T, in, out, 1.f, y, out, w, out, 0.f, x, in, t, t, nullptr); });
  time_row(name + " bwd  dW+=Xᵀ·dY", dims(in, out, T), types + ">f32", flops,
           [&] { lt.gemm(true, false, in, out, T, 1.f, x, in, y, out, 1.f, dw, out, t, GemmType::f32, nullptr); });
}

// Near-uniform routing: T·k rows over E experts, ±10 % around the mean (fixed pattern).
std::vector<int64_t> uniformish_offsets(int E, int64_t rows) {
  std::vector<int64_t> size(E);
  int64_t total = 0;
  for (int e = 0; e < E; ++e) {
    const int64_t mean = rows / E;
    size[e] = mean + (mean / 10) * ((e * 7 % 5) - 2) / 2;
    total += size[e];
  }
  size[E - 1] += rows - total;
  std::vector<int64_t> off(E + 1, 0);
  for (int e = 0; e < E; ++e) off[e + 1] = off[e] + size[e];
  return off;
}

// Uneven routing, as a router early in training gives: expert sizes spread evenly over 0.25–2.5
// times a common unit (a fixed shuffle), T·k rows in all.
std::vector<int64_t> skewed_offsets(int E, int64_t rows) {
  std::vector<double> weight(E);
  double sum = 0;
  for (int e = 0; e < E; ++e) sum += weight[e] = 0.25 + 2.25 * ((e * 29) % E) / std::max(E - 1, 1);
  std::vector<int64_t> off(E + 1, 0);
  for (int e = 0; e < E; ++e) off[e + 1] = off[e] + static_cast<int64_t>(rows * weight[e] / sum);
  off[E] = rows;
  return off;
}

// The six products of a stacked SwiGLU expert bank, d → 2f → f → d, on sorted rows. With
// skewed routing only the weight gradients (whose tiles then cost unevenly) on three methods.
void time_experts(LtGemm& lt, Scratch& s, size_t stride, int E, int top_k, int64_t f, bool skewed = false) {
  const int64_t rows = kTokens * top_k, d = kModel;
  const std::vector<int64_t> off = skewed ? skewed_offsets(E, rows) : uniformish_offsets(E, rows);
  const GemmType t = GemmType::bf16;
  void* x = s.operand(t, 0, stride);    // (rows, d)
  void* w = s.operand(t, 1, stride);    // (E, d, 2f) or (E, f, d)
  void* h = s.operand(t, 2, stride);    // (rows, 2f)
  float* dw = s.f32.data() + 3 * stride;  // (E, ·, ·) fp32
  struct Product {
    const char* name;
    int kind;  // 0 rows, 1 rows with Bᵀ, 2 weight grad
    int64_t n, k;
  };
  const Product products[] = {
      {"up   fwd  A·W_up", 0, 2 * f, d},       {"down fwd  H·W_down", 0, d, f},
      {"down bwd  dY·W_downᵀ", 1, f, d},      {"up   bwd  dA·W_upᵀ", 1, d, 2 * f},
      {"down bwd  dW+=Hᵀ·dY", 2, d, f},       {"up   bwd  dW+=Xᵀ·dA", 2, 2 * f, d},
  };
  if (skewed) {
    int64_t smallest = rows, largest = 0;
    for (int e = 0; e < E; ++e) {
      smallest = std::min(smallest, off[e + 1] - off[e]);
      largest = std::max(largest, off[e + 1] - off[e]);
    }
    std::printf("\nexperts %d×%lld top-%d, skewed routing: %lld rows, %lld to %lld per expert (bf16, dW fp32)\n", E,
                (long long)f, top_k, (long long)rows, (long long)smallest, (long long)largest);
  } else {
    std::printf("\nexperts %d×%lld top-%d: %lld rows, about %lld per expert (bf16, dW fp32)\n", E, (long long)f,
                top_k, (long long)rows, (long long)(rows / E));
  }
  std::printf("%-34s %-22s %-10s %9s %9s %8s\n", "product", "method", "", "ms", "TFLOP/s", "of peak");
  struct Method {
    std::string name;
    GroupedGemmMethod method;
    int streams;
    GroupedKernelTile tile;
    bool skewed;  // also timed with skewed routing
  };
  const GroupedKernelTile wide = GroupedKernelTile::m128n256;
  const Method methods[] = {
      {"loop", GroupedGemmMethod::loop, 1, wide, false},
      {"streams ×2", GroupedGemmMethod::streams, 2, wide, true},
      {"streams ×4", GroupedGemmMethod::streams, 4, wide, false},
      {"streams ×8", GroupedGemmMethod::streams, 8, wide, false},
      {"cublas grouped", GroupedGemmMethod::cublas, 1, wide, false},
      {"kernel 128x256", GroupedGemmMethod::kernel, 1, wide, false},
      {"kernel 128x128", GroupedGemmMethod::kernel, 1, GroupedKernelTile::m128n128, true},
      {"kernel 128x256 wgmma", GroupedGemmMethod::kernel, 1, GroupedKernelTile::m128n256_wgmma, true}};
  std::vector<std::unique_ptr<GroupedGemm>> grouped;
  for (const Method& m : methods) {
    grouped.push_back(std::make_unique<GroupedGemm>(lt, m.method, m.streams));
    grouped.back()->set_kernel_tile(m.tile);
  }
  for (const Product& p : products) {
    if (skewed && p.kind != 2) continue;
    const double flops = 2.0 * rows * p.n * p.k;
    // dense bound: one GEMM of all rows against one expert's weights
    if (p.kind == 2) {
      time_row(p.name, "dense " + dims(p.k, p.n, rows), "bf16>f32", flops, [&] {
        lt.gemm(true, false, p.k, p.n, rows, 1.f, x, p.k, h, p.n, 1.f, dw, p.n, t, GemmType::f32, nullptr);
      });
    } else {
      time_row(p.name, "dense " + dims(rows, p.n, p.k), "bf16>bf16", flops, [&] {
        lt.gemm(false, p.kind == 1, rows, p.n, p.k, 1.f, x, p.k, w, p.kind == 1 ? p.k : p.n, 0.f, h, p.n, t, t,
                nullptr);
      });
    }
    for (size_t i = 0; i < grouped.size(); ++i) {
      if (skewed && !methods[i].skewed) continue;
      GroupedGemm& g = *grouped[i];
      auto launch = [&] {
        if (p.kind == 2)
          g.weight_grad(E, off.data(), p.k, p.n, 1.f, x, p.k, h, p.n, dw, p.k * p.n, t, nullptr);
        else
          g.rows(p.kind == 1, E, off.data(), p.n, p.k, 1.f, x, p.k, w, p.n * p.k, 0.f, h, p.n, t, t, nullptr);
      };
      // cuBLAS may decline a type combination on the first call, and the kernel may leave a
      // shape to loop: run once to know the label
      std::string label = methods[i].name;
      try {
        const size_t kernel_calls = g.kernel_calls(), wgmma_calls = g.wgmma_calls();
        launch();
        if (methods[i].method == GroupedGemmMethod::cublas && g.cublas_declined(t, p.kind == 2 ? GemmType::f32 : t))
          label += " (declined: loop)";
        if (methods[i].method == GroupedGemmMethod::kernel && g.kernel_calls() == kernel_calls)
          label += " (refused: loop)";
        else if (methods[i].tile == GroupedKernelTile::m128n256_wgmma && g.wgmma_calls() == wgmma_calls)
          label += " (refused: mma.sync)";
      } catch (const std::exception&) {  // time_row prints the message
      }
      time_row(p.name, label, p.kind == 2 ? "bf16>f32" : "bf16>bf16", flops, launch);
    }
  }
}

void print_gemm_timings_table() {
  // Largest operand: the 64×256 top-8 expert rows, 131072 × 768; the dense hidden 16384 × 4096.
  const size_t stride = size_t(kTokens) * 8 * kModel;
  Scratch s(4 * stride);
  LtGemm lt;
  std::printf("\nGEMM timings (LtGemm), tokens %lld, d %lld; peak %.0f TFLOP/s (bf16)\n", (long long)kTokens,
              (long long)kModel, kPeakBf16Tflops);
  std::printf("%-34s %-22s %-10s %9s %9s %8s\n", "product", "m×n×k", "types", "ms", "TFLOP/s", "of peak");
  const int64_t d = kModel;
  for (const GemmType t : {GemmType::bf16, GemmType::f32}) {
    time_linear(lt, s, stride, "qkv", d, 3 * d, t);
    time_linear(lt, s, stride, "attn out", d, d, t);
    time_linear(lt, s, stride, "mlp up (2·2048)", d, 2 * 2048, t);
    time_linear(lt, s, stride, "mlp down", 2048, d, t);
    time_linear(lt, s, stride, "lm head (vocab 256)", d, 256, t);
  }
  for (const int E : {8, 64}) {
    const std::string name = "router E" + std::to_string(E);
    time_row(name + " logits=X·Wr", dims(kTokens, E, d), "bf16>f32", 2.0 * kTokens * E * d, [&] {
      lt.gemm(false, false, kTokens, E, d, 1.f, s.b16.data(), d, s.b16.data() + stride, E, 0.f,
              s.f32.data() + 2 * stride, E, GemmType::bf16, GemmType::f32, nullptr);
    });
  }
  std::printf("(f32 rows: true fp32, no tensor cores; %% of the bf16 peak for scale)\n");
  time_experts(lt, s, stride, 8, 2, 1024);
  time_experts(lt, s, stride, 64, 8, 256);
  // A chunk's range of the 64 × 256 MoE on one of two ranks (4 chunks of its 32 experts):
  // 8 experts of about 4 096 rows. A range takes the method of its whole pass of 32 (the
  // kernel), so its weight gradients round as one pass's (RowSegments::range).
  time_experts(lt, s, stride, 8, 2, 256);
  time_experts(lt, s, stride, 8, 2, 1024, true);
  time_experts(lt, s, stride, 64, 8, 256, true);
}

// The dense step's products (bf16, 16 384 tokens) through each of cuBLASLt's first
// `kCandidates` heuristic candidates: ms, speed against the first choice (what LtGemm runs),
// whether the output is bitwise the first choice's (on the same random operands, output
// zeroed first), and the candidate's configuration. Which candidates could be pinned in its
// place without moving a result is the question this answers.
constexpr int kCandidates = 12;

void print_gemm_candidates_table() {
  const int64_t T = kTokens, d = kModel;
  const size_t stride = size_t(T) * 2 * 2048;  // the largest operand: the hidden 16384 × 4096
  Scratch s(5 * stride);
  LtGemm lt, tuned;  // lt: one candidate at a time, untuned; tuned: as training runs them
  lt.set_tuning(false);
  const GemmType t = GemmType::bf16;
  struct Product {
    std::string name;
    bool ta, tb;
    int64_t m, n, k;
    bool residual;   // C = A·B + R (beta 1 with c_in)
    bool weight_grad;  // fp32 output accumulating (beta 1 in place)
  };
  std::vector<Product> products;
  auto linear = [&](const std::string& name, int64_t in, int64_t out, bool residual) {
    products.push_back({name + " fwd", false, false, T, out, in, residual, false});
    products.push_back({name + " dX", false, true, T, in, out, false, false});
    products.push_back({name + " dW", true, false, in, out, T, false, true});
  };
  linear("qkv", d, 3 * d, false);
  linear("attn out", d, d, true);
  linear("mlp up", d, 2 * 2048, false);
  linear("mlp down", 2048, d, true);
  linear("lm head", d, 256, false);
  std::printf("\ncuBLASLt's candidates for the dense step's products (bf16, tokens %lld)\n", (long long)T);
  std::printf("%-16s %-18s %4s %8s %8s %7s %5s  %s\n", "product", "m×n×k", "rank", "ms", "TFLOP/s", "vs 0",
              "bits", "algorithm");
  for (const Product& p : products) {
    void* a = s.operand(t, 0, stride);
    void* b = s.operand(t, 1, stride);
    void* r = s.operand(t, 2, stride);
    const GemmType ct = p.weight_grad ? GemmType::f32 : t;
    void* c = p.weight_grad ? static_cast<void*>(s.f32.data() + 4 * stride) : s.operand(t, 3, stride);
    const int64_t lda = p.ta ? p.m : p.k, ldb = p.tb ? p.k : p.n, ldc = p.n;
    const size_t out_bytes = size_t(p.m * p.n) * gemm_type_bytes(ct);
    const double flops = 2.0 * p.m * p.n * p.k;
    auto launch_on = [&](LtGemm& g) {
      g.gemm(p.ta, p.tb, p.m, p.n, p.k, 1.f, a, lda, b, ldb, p.residual || p.weight_grad ? 1.f : 0.f, c, ldc, t, ct,
             nullptr, p.residual ? r : nullptr);
    };
    auto launch = [&] { launch_on(lt); };
    std::vector<unsigned char> first, out(out_bytes);
    float first_ms = 0;
    for (int rank = 0; rank < kCandidates; ++rank) {
      lt.use_candidate(rank);
      float ms = 0;
      try {
        MOK_CUDA_CHECK(cudaMemset(c, 0, out_bytes));
        launch();
        MOK_CUDA_CHECK(cudaMemcpy(out.data(), c, out_bytes, cudaMemcpyDeviceToHost));
        ms = median_ms(launch);
      } catch (const std::exception& e) {
        if (rank == 0) std::printf("%-16s failed: %s\n", p.name.c_str(), e.what());
        break;  // no more candidates
      }
      if (rank == 0) {
        first = out;
        first_ms = ms;
      }
      std::printf("%-16s %-18s %4d %8.4f %8.1f %6.2fx %5s  %s\n", p.name.c_str(), dims(p.m, p.n, p.k).c_str(), rank, ms,
                  flops / (ms * 1e-3) / 1e12, first_ms / ms, out == first ? "same" : "diff",
                  lt.last_algorithm().c_str());
    }
    if (first.empty()) continue;
    // what training runs: the tuned choice (weight gradients accumulate in place: not tuned)
    MOK_CUDA_CHECK(cudaMemset(c, 0, out_bytes));
    launch_on(tuned);
    MOK_CUDA_CHECK(cudaMemcpy(out.data(), c, out_bytes, cudaMemcpyDeviceToHost));
    const float ms = median_ms([&] { launch_on(tuned); });
    std::printf("%-16s %-18s %4s %8.4f %8.1f %6.2fx %5s  %s\n", p.name.c_str(), dims(p.m, p.n, p.k).c_str(), "tune", ms,
                flops / (ms * 1e-3) / 1e12, first_ms / ms, out == first ? "same" : "diff",
                tuned.last_algorithm().c_str());
  }
  lt.use_candidate(0);
}

}  // namespace

void print_gemm_candidate_timings() {
  try {
    print_gemm_candidates_table();
  } catch (const std::exception& e) {
    std::printf("GEMM candidate timings stopped: %s\n", e.what());
  }
}

void print_gemm_timings() {
  try {
    print_gemm_timings_table();
  } catch (const std::exception& e) {
    std::printf("GEMM timings stopped: %s\n", e.what());
  }
  // The MoE layer's other kernels, around the grouped GEMMs.
  print_moe_routing_timings();
}

}  // namespace mok::cuda
