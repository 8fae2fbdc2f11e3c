// The Gaussian sketch kernels (kernels/sketch_projection.h) against the CPU counter RNG.
#include <cmath>

#include "kernels/checks/check_util.h"
#include "kernels/device_buffer.h"
#include "kernels/sketch_projection.h"

namespace mok::cuda {

void check_sketch(CheckInputs& in, std::vector<OpCheck>& out) {
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


}  // namespace mok::cuda
