// The low-rank kitten keepers (sketch, rsvd, subspace; core/kittens/) on the GPU against the
// same keepers on the CPU, through the rank's ops, on the same fresh random X (n, d_in) and
// dY (n, d_out), unit-scale Gaussian (never zeros):
//   dW = X̃ᵀ·dY, ‖dW_gpu − dW_cpu‖/‖dW_cpu‖ in an fp32 context:
//     1e-4 with P (or U, B) in fp32. Sketch: Q is the CPU's (the same counter normals); the
//       rest is three fp32 GEMMs (cuBLASLt vs OpenBLAS order, ≈ 1e-6 each). rsvd / subspace:
//       dW depends on the basis only through its projector onto span((XXᵀ)^q·X·Ω) (Ω the
//       CPU's), the same for Householder (CPU) and CholeskyQR2 (GPU); GEMM rounding moves it by
//       about u·κ(Y) with κ(Y) ≤ 10² here, so ≈ 1e-5.
//     factor_bits 8 / 4: 2e-3 / 2e-2 — a GEMM's last-bit difference may move a value of P
//       across a rounding boundary; one such code step costs ≈ 3e-4 (8 bit) or 5e-3 (4 bit).
//   bf16 context (X and dY rounded to bf16, the CPU given the same rounded values): 1e-2 — the
//     GPU rounds P (or U) to bf16 for the product with dY (2⁻⁹ per element).
//   the measured relative error ‖X − X̃‖/‖X‖ within 1e-3 (absolute) of the CPU's;
//   held bytes (GPU) = the tracker's saved-activation bytes on the GPU = the formula;
//   a repeated save and weight gradient on the GPU: bitwise the same dW and error terms.
// Then whole training steps with each keeper (model_checks.cpp, check_lowrank_kitten_training).
// Ops alone: gaussian_fill against the CPU's values (at most 1 ulp of float apart: the
// device's double log/cos against the host's), orthonormalize_columns (‖QᵀQ − I‖ over the
// nonzero columns ≤ 1e-5, ‖QQᵀY − Y‖/‖Y‖ ≤ 1e-5, a rank-3 Y keeps 3 nonzero columns).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/exec_context.h"
#include "core/kittens/gaussian_sketch.h"
#include "core/kittens/saved_linear_input.h"
#include "core/kittens/quantized_matrix.h"
#include "core/kittens/rsvd_saved_linear_input.h"
#include "core/kittens/sketch_saved_linear_input.h"
#include "core/kittens/subspace_saved_linear_input.h"
#include "core/tensor/memory_tracker.h"
#include "kernels/checks/check_util.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_ops.h"

namespace mok::cuda {

namespace {

const mok::MemTag kTag{mok::MemCategory::saved_activations, 1, "mlp.up.input"};

struct Keeper {
  std::string name;
  int factor_bits;
  // A fresh keeper (the subspace basis is fresh too: refreshed on this save).
  std::function<std::unique_ptr<mok::SavedLinearInput>(const mok::CompactOptions&)> make;
  // Bytes it holds after a save of (n, d) at rank r (basis excluded).
  std::function<int64_t(int64_t n, int64_t d, int r, int bits)> bytes;
};

int64_t p_bytes(int64_t n, int r, int bits) {
  return bits ? mok::QuantizedMatrix::bytes_for(n, r, bits) : n * r * static_cast<int64_t>(sizeof(float));
}

std::vector<Keeper> keepers() {
  const auto sketch = [](const mok::CompactOptions& o) { return mok::make_sketch_saved_linear_input(o); };
  const auto rsvd = [](const mok::CompactOptions& o) { return mok::make_rsvd_saved_linear_input(o); };
  const auto subspace = [](const mok::CompactOptions& o) {
    return mok::make_subspace_saved_linear_input(std::make_shared<mok::SubspaceBasis>(), o, 1);
  };
  const auto p_only = [](int64_t n, int64_t, int r, int bits) { return p_bytes(n, r, bits); };
  const auto u_and_b = [](int64_t n, int64_t d, int r, int) { return (n * r + r * d) * static_cast<int64_t>(sizeof(float)); };
  return {{"sketch", 0, sketch, p_only},   {"sketch_p8", 8, sketch, p_only}, {"rsvd", 0, rsvd, u_and_b},
          {"subspace", 0, subspace, p_only}, {"subspace_p4", 4, subspace, p_only}};
}

struct KeeperResult {
  std::vector<float> dw;
  double error = 0.0;
  std::vector<double> terms;
  int64_t held = 0, tracked = 0;
};

// One save and weight gradient under `cx`: x (n, d), dy (n, m) given as float host values,
// uploaded in cx's compute dtype (bf16 rounds them).
KeeperResult run_keeper(mok::ExecContext& cx, const Keeper& k, const mok::CompactOptions& o, const std::vector<float>& x,
                        const std::vector<float>& dy, int64_t n, int64_t d, int64_t m) {
  mok::ScopedExecContext scope(cx);
  mok::MemoryTracker tracker;
  mok::ScopedMemoryTracker track(tracker);
  const auto upload = [&](const std::vector<float>& v, std::vector<int64_t> shape) {
    mok::Tensor f = cx.upload(v.data(), shape, mok::DType::f32);
    if (cx.compute_dtype() == mok::DType::f32) return f;
    mok::Tensor t = cx.activation(shape);
    cx.ops().convert(f, t);
    return t;
  };
  const mok::Tensor xt = upload(x, {n, d}), dyt = upload(dy, {n, m});
  mok::Tensor dw = cx.zeros({d, m}, mok::DType::f32);
  auto keeper = k.make(o);
  keeper->save(xt, kTag);
  KeeperResult r;
  r.held = keeper->held_bytes();
  r.tracked = tracker.live_bytes(mok::MemCategory::saved_activations, cx.device().type);
  r.error = keeper->last_relative_error();
  if (mok::Tensor t = keeper->error_terms(); !t.empty()) {
    r.terms.resize(2);
    t.copy_to_host(r.terms.data(), 2 * sizeof(double));
  }
  keeper->accumulate_weight_grad(dyt, dw, 1.0f);
  r.dw.resize(static_cast<size_t>(d * m));
  dw.copy_to_host(r.dw.data(), dw.bytes());
  return r;
}

double rel(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<double> bd(b.begin(), b.end());
  return relative_error(a, bd);
}

void check_keeper(CheckInputs& in, std::vector<OpCheck>& out, const Keeper& k, mok::DType dtype, int64_t n, int64_t d,
                  int64_t m, int rank, bool low_rank_x) {
  const std::string name = "kittens." + k.name + (dtype == mok::DType::bf16 ? ".bf16" : ".fp32") + "_" +
                           std::to_string(n) + "x" + std::to_string(d) + "_r" + std::to_string(rank) +
                           (low_rank_x ? "_lowrankX" : "");
  std::vector<float> x = in.normal(static_cast<size_t>(n * d));
  if (low_rank_x) {  // rank 6 plus small noise: rank beyond the data's, dependent columns
    const auto a = in.normal(static_cast<size_t>(n * 6)), b = in.normal(static_cast<size_t>(6 * d));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < d; ++j) {
        double s = 0.0;
        for (int t = 0; t < 6; ++t) s += static_cast<double>(a[i * 6 + t]) * b[t * d + j];
        x[i * d + j] = static_cast<float>(s + 1e-3 * x[i * d + j]);
      }
  }
  std::vector<float> dy = in.normal(static_cast<size_t>(n * m));
  if (dtype == mok::DType::bf16) {  // the CPU gets the values the GPU holds
    x = round_bf16(x);
    dy = round_bf16(dy);
  }
  mok::CompactOptions o;
  o.rank = rank;
  o.seed = in.seed;
  o.step = 3;
  o.power_iters = 1;
  o.factor_bits = k.factor_bits;
  const KeeperResult cpu = run_keeper(mok::cpu_context(), k, o, x, dy, n, d, m);
  auto gpu_cx = mok::make_exec_context(mok::Device::cuda(0), dtype);
  const KeeperResult a = run_keeper(*gpu_cx, k, o, x, dy, n, d, m);
  const KeeperResult b = run_keeper(*gpu_cx, k, o, x, dy, n, d, m);
  // fp32: 1e-4, except on the rank-6 data: its rank beyond 6 fits the 1e-3 noise, whose
  // directions are nearly degenerate, so the GPU and CPU may keep different ones (their dW
  // differ by up to the noise's share, ~1e-3 × the kept noise directions; 1.0e-4 seen).
  const double fp32_tol = low_rank_x ? 1e-3 : 1e-4;
  const double tol = dtype == mok::DType::bf16 ? 1e-2 : k.factor_bits == 8 ? 2e-3 : k.factor_bits == 4 ? 2e-2 : fp32_tol;
  const double e = rel(a.dw, cpu.dw);
  out.push_back({name + ".dW_vs_cpu", e, tol});
  out.push_back({name + ".error_vs_cpu (absolute)", std::fabs(a.error - cpu.error), 1e-3});
  const int r = static_cast<int>(std::min<int64_t>({rank, d, k.name == "rsvd" ? n : d}));
  const int64_t formula = k.bytes(n, d, r, k.factor_bits);
  const int64_t basis = k.name.rfind("subspace", 0) == 0 ? d * r * static_cast<int64_t>(sizeof(float)) : 0;
  out.push_back({name + ".held_bytes == formula", a.held == formula ? 0.0 : INFINITY, 0.0});
  out.push_back({name + ".tracker_bytes == held + basis", a.tracked == a.held + basis ? 0.0 : INFINITY, 0.0});
  const bool same = a.dw.size() == b.dw.size() &&
                    std::memcmp(a.dw.data(), b.dw.data(), a.dw.size() * sizeof(float)) == 0 && a.terms == b.terms;
  out.push_back({name + ".repeat (bitwise)", same ? 0.0 : INFINITY, 0.0});
  std::printf("  %-44s dW vs cpu %.2e (tol %.0e); error gpu %.6f cpu %.6f; held %lld B (formula %lld, tracker %lld)\n",
              name.c_str(), e, tol, a.error, cpu.error, static_cast<long long>(a.held), static_cast<long long>(formula),
              static_cast<long long>(a.tracked));
}

void check_gaussian_fill(std::vector<OpCheck>& out) {
  const int64_t rows = 48, cols = 1000;
  std::vector<float> want(static_cast<size_t>(rows * cols));
  mok::fill_gaussian(want.data(), rows, cols, 1.0 / 48, 12345, 678);
  auto cx = mok::make_exec_context(mok::Device::cuda(0), mok::DType::f32);
  mok::ScopedExecContext scope(*cx);
  mok::Tensor q = cx->empty({rows, cols}, mok::DType::f32);
  cx->ops().gaussian_fill(q, 1.0 / 48, 12345, 678);
  std::vector<float> got(want.size());
  q.copy_to_host(got.data(), q.bytes());
  const UlpDistance d = ulp_distance(got, want);
  out.push_back({"kittens.gaussian_fill.ulps_vs_cpu", d.worst_ulps, 1.0});
  std::printf("  kittens.gaussian_fill: %.0f of %zu values differ from the CPU's, at most %.0f ulp\n", d.differ,
              got.size(), d.worst_ulps);
}

void check_orthonormalize(CheckInputs& in, std::vector<OpCheck>& out, int64_t rows, int64_t cols, int rank) {
  const std::string name = "kittens.orthonormalize_" + std::to_string(rows) + "x" + std::to_string(cols) + "_rank" +
                           std::to_string(rank);
  const auto a = in.normal(static_cast<size_t>(rows * rank)), b = in.normal(static_cast<size_t>(rank * cols));
  std::vector<float> y(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      double s = 0.0;
      for (int t = 0; t < rank; ++t) s += static_cast<double>(a[i * rank + t]) * b[t * cols + j] * (1.0 + t);
      y[i * cols + j] = static_cast<float>(s);
    }
  auto cx = mok::make_exec_context(mok::Device::cuda(0), mok::DType::f32);
  mok::ScopedExecContext scope(*cx);
  mok::Tensor t = cx->upload(y.data(), {rows, cols}, mok::DType::f32);
  cx->ops().orthonormalize_columns(t);
  std::vector<float> q(y.size());
  t.copy_to_host(q.data(), t.bytes());
  // G = QᵀQ in double; nonzero columns must be orthonormal.
  double off = 0.0;
  int nonzero = 0;
  std::vector<double> g(static_cast<size_t>(cols * cols), 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t k = 0; k < cols; ++k) g[j * cols + k] += static_cast<double>(q[i * cols + j]) * q[i * cols + k];
  std::vector<bool> zero(static_cast<size_t>(cols));
  for (int64_t j = 0; j < cols; ++j) zero[j] = g[j * cols + j] == 0.0, nonzero += !zero[j];
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t k = 0; k < cols; ++k) {
      const double want = (j == k && !zero[j]) ? 1.0 : 0.0;
      const double v = std::isfinite(g[j * cols + k]) ? std::fabs(g[j * cols + k] - want) : INFINITY;
      off = std::max(off, v);
    }
  // ‖Q·Qᵀ·Y − Y‖ / ‖Y‖.
  double num = 0.0, den = 0.0;
  std::vector<double> t1(static_cast<size_t>(cols * cols), 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t k = 0; k < cols; ++k) t1[j * cols + k] += static_cast<double>(q[i * cols + j]) * y[i * cols + k];
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t k = 0; k < cols; ++k) {
      double s = 0.0;
      for (int64_t j = 0; j < cols; ++j) s += static_cast<double>(q[i * cols + j]) * t1[j * cols + k];
      num += (s - y[i * cols + k]) * (s - y[i * cols + k]);
      den += static_cast<double>(y[i * cols + k]) * y[i * cols + k];
    }
  out.push_back({name + ".orthonormal (max |QᵀQ − I|)", off, 1e-5});
  out.push_back({name + ".projects (‖QQᵀY − Y‖/‖Y‖)", std::sqrt(num / den), 1e-5});
  out.push_back({name + ".nonzero_columns == min(rank, cols)", nonzero == std::min<int>(rank, static_cast<int>(cols)) ? 0.0 : INFINITY, 0.0});
  std::printf("  %-44s max|QᵀQ − I| %.2e, projection %.2e, %d nonzero columns\n", name.c_str(), off,
              std::sqrt(num / den), nonzero);
}

}  // namespace

// The whole training step with low-rank keepers (model_checks.cpp).
void check_lowrank_kitten_training(std::vector<OpCheck>& out);

void check_lowrank_kittens(CheckInputs& in, std::vector<OpCheck>& out) {
  run_guarded(out, "kittens.gaussian_fill", [&] { check_gaussian_fill(out); });
  run_guarded(out, "kittens.orthonormalize", [&] { check_orthonormalize(in, out, 700, 16, 16); });
  run_guarded(out, "kittens.orthonormalize", [&] { check_orthonormalize(in, out, 700, 16, 3); });
  run_guarded(out, "kittens.orthonormalize", [&] { check_orthonormalize(in, out, 3000, 64, 64); });
  for (const Keeper& k : keepers())
    for (const mok::DType dtype : {mok::DType::f32, mok::DType::bf16}) {
      run_guarded(out, "kittens." + k.name, [&] { check_keeper(in, out, k, dtype, 700, 192, 96, 16, false); });
      if (dtype == mok::DType::f32)
        run_guarded(out, "kittens." + k.name, [&] { check_keeper(in, out, k, dtype, 300, 64, 40, 16, true); });
    }
  check_lowrank_kitten_training(out);
}

namespace {

// Median device ms of `timed` over `repeats` runs after three warm-ups, CUDA events on the
// ops' stream; `before` runs (untimed) ahead of each.
float median_stream_ms(cudaStream_t stream, const std::function<void()>& before, const std::function<void()>& timed,
                       int repeats = 20) {
  cudaEvent_t start, stop;
  MOK_CUDA_CHECK(cudaEventCreate(&start));
  MOK_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> ms;
  for (int i = 0; i < 3 + repeats; ++i) {
    before();
    MOK_CUDA_CHECK(cudaEventRecord(start, stream));
    timed();
    MOK_CUDA_CHECK(cudaEventRecord(stop, stream));
    MOK_CUDA_CHECK(cudaEventSynchronize(stop));
    float t = 0.f;
    MOK_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
    if (i >= 3) ms.push_back(t);
  }
  MOK_CUDA_CHECK(cudaEventDestroy(start));
  MOK_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

// Save and weight gradient per keeper against exact, bf16, at a benchmark model's MLP input
// (16 × 1024 tokens, d_in 768 → d_out 2048): device ms between CUDA events on the rank's
// stream (host work inside a call that leaves the GPU idle counts too), median of 20.
void print_lowrank_kitten_timings() {
  const int64_t n = 16384, d = 768, m = 2048;
  std::printf("\n%-22s %6s %10s %12s %12s\n", "keeper (bf16)", "rank", "save ms", "weight ms", "held MiB");
  CheckInputs in{77};
  auto cx = mok::make_exec_context(mok::Device::cuda(0), mok::DType::bf16);
  mok::ScopedExecContext scope(*cx);
  const cudaStream_t stream = static_cast<CudaOps&>(cx->ops()).stream();
  mok::Tensor xf = cx->upload(in.normal(static_cast<size_t>(n * d)).data(), {n, d}, mok::DType::f32);
  mok::Tensor dyf = cx->upload(in.normal(static_cast<size_t>(n * m)).data(), {n, m}, mok::DType::f32);
  mok::Tensor x = cx->activation({n, d}), dy = cx->activation({n, m});
  cx->ops().convert(xf, x);
  cx->ops().convert(dyf, dy);
  mok::Tensor dw = cx->zeros({d, m}, mok::DType::f32);
  struct Timed {
    std::string name;
    int rank;
    std::function<std::unique_ptr<mok::SavedLinearInput>()> make;
  };
  std::vector<Timed> rows = {{"exact", 0, [] { return mok::make_exact_saved_linear_input(); }}};
  for (const int rank : {16, 64})
    for (const Keeper& k : keepers()) {
      mok::CompactOptions o;
      o.rank = rank;
      o.factor_bits = k.factor_bits;
      rows.push_back({k.name, rank, [k, o] { return k.make(o); }});
    }
  for (const Timed& t : rows) {
    try {
      std::unique_ptr<mok::SavedLinearInput> keeper;
      double held = 0.0;
      const float save = median_stream_ms(stream, [&] { keeper = t.make(); }, [&] {
        keeper->save(x, kTag);
        held = static_cast<double>(keeper->held_bytes());
      });
      const float grad = median_stream_ms(stream, [&] {
        keeper = t.make();
        keeper->save(x, kTag);
      }, [&] { keeper->accumulate_weight_grad(dy, dw, 1.0f); });
      std::printf("%-22s %6d %10.3f %12.3f %12.2f\n", t.name.c_str(), t.rank, save, grad, held / 1048576.0);
    } catch (const std::exception& e) {
      std::printf("%-22s failed: %s\n", t.name.c_str(), e.what());
    }
  }
}

}  // namespace mok::cuda
