#include "kernels/cuda_op_checks.h"

#include <cmath>
#include <cstdint>

#include "core/util/counter_rng.h"
#include "kernels/device_buffer.h"
#include "kernels/elementwise_ops.h"
#include "kernels/sketch_projection.h"

namespace mok::cuda {
namespace {

struct Inputs {
  uint64_t seed;
  uint64_t next_stream = 0;
  std::vector<float> normal(size_t n, double scale = 1.0) {
    const uint64_t stream = next_stream++;
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(counter_normal(seed, stream, i) * scale);
    return v;
  }
};

double relative_error(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

constexpr double kFp32Tolerance = 1e-5;

void check_rmsnorm(Inputs& in, std::vector<OpCheck>& out) {
  const int rows = 777, dim = 384;
  const float eps = 1e-5f;
  const auto x = in.normal(size_t(rows) * dim), g = in.normal(dim), dy = in.normal(size_t(rows) * dim);
  std::vector<double> y_ref(x.size()), dx_ref(x.size()), dg_ref(dim, 0.0);
  for (int r = 0; r < rows; ++r) {
    double ss = 0, dot = 0;
    for (int j = 0; j < dim; ++j) ss += double(x[r * dim + j]) * x[r * dim + j];
    const double inv = 1.0 / std::sqrt(ss / dim + eps);
    for (int j = 0; j < dim; ++j) {
      y_ref[r * dim + j] = x[r * dim + j] * inv * g[j];
      dot += double(x[r * dim + j]) * g[j] * dy[r * dim + j];
      dg_ref[j] += double(dy[r * dim + j]) * x[r * dim + j] * inv;
    }
    for (int j = 0; j < dim; ++j)
      dx_ref[r * dim + j] = inv * g[j] * dy[r * dim + j] - inv * inv * inv * x[r * dim + j] * dot / dim;
  }
  DeviceBuffer<float> d_x(x), d_g(g), d_dy(dy), d_y(x.size()), d_inv(rows), d_dx(x.size()),
      d_dg(std::vector<float>(dim, 0.f));
  d_y.poison();
  d_dx.poison();
  rmsnorm_forward(d_x.data(), d_g.data(), d_y.data(), d_inv.data(), rows, dim, eps);
  rmsnorm_backward(d_x.data(), d_g.data(), d_inv.data(), d_dy.data(), d_dx.data(), d_dg.data(), rows, dim);
  MOK_CUDA_CHECK(cudaDeviceSynchronize());
  out.push_back({"rmsnorm.forward", relative_error(d_y.download(), y_ref), kFp32Tolerance});
  out.push_back({"rmsnorm.backward.dx", relative_error(d_dx.download(), dx_ref), kFp32Tolerance});
  out.push_back({"rmsnorm.backward.dg", relative_error(d_dg.download(), dg_ref), kFp32Tolerance});
}

void check_swiglu(Inputs& in, std::vector<OpCheck>& out) {
  const size_t n = size_t(1) << 20;
  const auto a = in.normal(n, 3.0), b = in.normal(n), dh = in.normal(n);
  std::vector<double> h_ref(n), da_ref(n), db_ref(n);
  for (size_t i = 0; i < n; ++i) {
    const double s = 1.0 / (1.0 + std::exp(-double(a[i])));
    h_ref[i] = a[i] * s * b[i];
    db_ref[i] = dh[i] * a[i] * s;
    da_ref[i] = double(dh[i]) * b[i] * s * (1 + a[i] * (1 - s));
  }
  DeviceBuffer<float> d_a(a), d_b(b), d_dh(dh), d_h(n), d_da(n), d_db(n);
  d_h.poison();
  d_da.poison();
  d_db.poison();
  swiglu_forward(d_a.data(), d_b.data(), d_h.data(), n);
  swiglu_backward(d_a.data(), d_b.data(), d_dh.data(), d_da.data(), d_db.data(), n);
  MOK_CUDA_CHECK(cudaDeviceSynchronize());
  out.push_back({"swiglu.forward", relative_error(d_h.download(), h_ref), kFp32Tolerance});
  out.push_back({"swiglu.backward.da", relative_error(d_da.download(), da_ref), kFp32Tolerance});
  out.push_back({"swiglu.backward.db", relative_error(d_db.download(), db_ref), kFp32Tolerance});
}

void check_sketch(Inputs& in, std::vector<OpCheck>& out) {
  const int n = 300, d = 200, r = 24, m = 72;
  const uint64_t seed = in.seed * 31 + 5, stream = 7;
  const auto x = in.normal(size_t(n) * d), dy = in.normal(size_t(n) * m), dw0 = in.normal(size_t(d) * m);
  std::vector<double> q(size_t(r) * d);  // the CPU counter RNG, same convention as the kernels
  for (int i = 0; i < r; ++i)
    for (int j = 0; j < d; ++j) q[i * d + j] = counter_normal(seed, stream, uint64_t(i) * d + j) / std::sqrt(double(r));
  std::vector<double> p_ref(size_t(n) * r, 0.0);
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < r; ++i) {
      double s = 0;
      for (int j = 0; j < d; ++j) s += double(x[t * d + j]) * q[i * d + j];
      p_ref[t * r + i] = s;
    }
  DeviceBuffer<float> d_x(x), d_p(size_t(n) * r);
  d_p.poison();
  sketch_project(d_x.data(), d_p.data(), n, d, r, seed, stream);
  MOK_CUDA_CHECK(cudaDeviceSynchronize());
  const auto p = d_p.download();
  out.push_back({"sketch.project", relative_error(p, p_ref), kFp32Tolerance});

  DeviceBuffer<float> d_q(size_t(r) * d);
  d_q.poison();
  sketch_generate(d_q.data(), r, d, seed, stream);
  MOK_CUDA_CHECK(cudaDeviceSynchronize());
  out.push_back({"sketch.generate", relative_error(d_q.download(), q), kFp32Tolerance});

  // G = Pᵀ·dY (from the GPU's P), then dW += Qᵀ·G on the GPU over a random dW.
  std::vector<float> g(size_t(r) * m);
  std::vector<double> g_ref(size_t(r) * m);
  for (int i = 0; i < r; ++i)
    for (int c = 0; c < m; ++c) {
      double s = 0;
      for (int t = 0; t < n; ++t) s += double(p[t * r + i]) * dy[t * m + c];
      g_ref[i * m + c] = s;
      g[i * m + c] = float(s);
    }
  std::vector<double> dw_ref(dw0.begin(), dw0.end());
  for (int j = 0; j < d; ++j)
    for (int c = 0; c < m; ++c) {
      double s = 0;
      for (int i = 0; i < r; ++i) s += q[i * d + j] * g_ref[i * m + c];
      dw_ref[j * m + c] += s;
    }
  DeviceBuffer<float> d_g(g), d_dw(dw0);
  sketch_expand_weight_grad(d_g.data(), d_dw.data(), d, m, r, seed, stream);
  MOK_CUDA_CHECK(cudaDeviceSynchronize());
  out.push_back({"sketch.expand_weight_grad", relative_error(d_dw.download(), dw_ref), kFp32Tolerance});
}

}  // namespace

std::vector<OpCheck> run_cuda_op_checks(unsigned long long seed) {
  Inputs in{seed};
  std::vector<OpCheck> out;
  check_rmsnorm(in, out);
  check_swiglu(in, out);
  check_sketch(in, out);
  return out;
}

}  // namespace mok::cuda
