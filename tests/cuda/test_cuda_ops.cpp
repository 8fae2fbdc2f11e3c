// CUDA kernels against CPU references in double precision, on fresh random inputs, with
// outputs poisoned (NaN) before each launch so unwritten elements fail the check.
// Without a CUDA device (CI) every test skips with the reason.
#include <QtTest>

#include <cmath>
#include <vector>

#include "core/util/counter_rng.h"
#include "kernels/device_buffer.h"
#include "kernels/device_info.h"
#include "kernels/elementwise_ops.h"
#include "kernels/sketch_projection.h"

namespace {

std::vector<float> random_vector(size_t n, uint64_t stream, double scale = 1.0) {
  static uint64_t call = 0;
  std::vector<float> v(n);
  const uint64_t seed = 0xC0DA + call++;  // fresh inputs for every call
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(mok::counter_normal(seed, stream, i) * scale);
  return v;
}

// ‖a − b‖ / ‖b‖; NaN anywhere gives +inf.
double relative_error(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

class TestCudaOps : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    const auto q = mok::cuda::query_devices();
    if (q.devices.empty()) QSKIP(qPrintable("no CUDA device here (" + QString::fromStdString(q.unavailable_reason) + "); GPU checks run on the GPU machine"));
    qInfo("device: %s (sm_%d%d)", q.devices[0].name.c_str(), q.devices[0].sm_major, q.devices[0].sm_minor);
  }

  void rmsnormMatchesReference() {
    const int rows = 777, dim = 384;
    const float eps = 1e-5f;
    const auto x = random_vector(size_t(rows) * dim, 1), g = random_vector(dim, 2),
               dy = random_vector(size_t(rows) * dim, 3);
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
    mok::cuda::DeviceBuffer<float> dx_in(x), dg_in(g), ddy(dy), dy_out(x.size()), dinv(rows),
        ddx(x.size()), ddg(std::vector<float>(dim, 0.f));
    dy_out.poison();
    ddx.poison();
    mok::cuda::rmsnorm_forward(dx_in.data(), dg_in.data(), dy_out.data(), dinv.data(), rows, dim, eps);
    mok::cuda::rmsnorm_backward(dx_in.data(), dg_in.data(), dinv.data(), ddy.data(), ddx.data(), ddg.data(), rows, dim);
    QVERIFY(cudaDeviceSynchronize() == cudaSuccess);
    QVERIFY2(relative_error(dy_out.download(), y_ref) < 1e-5, "rmsnorm forward");
    QVERIFY2(relative_error(ddx.download(), dx_ref) < 1e-5, "rmsnorm backward dx");
    QVERIFY2(relative_error(ddg.download(), dg_ref) < 1e-5, "rmsnorm backward dg");
  }

  void swigluMatchesReference() {
    const size_t n = 1 << 20;
    const auto a = random_vector(n, 4, 3.0), b = random_vector(n, 5), dh = random_vector(n, 6);
    std::vector<double> h_ref(n), da_ref(n), db_ref(n);
    for (size_t i = 0; i < n; ++i) {
      const double s = 1.0 / (1.0 + std::exp(-double(a[i])));
      h_ref[i] = a[i] * s * b[i];
      db_ref[i] = dh[i] * a[i] * s;
      da_ref[i] = double(dh[i]) * b[i] * s * (1 + a[i] * (1 - s));
    }
    mok::cuda::DeviceBuffer<float> da(a), db(b), ddh(dh), h(n), gda(n), gdb(n);
    h.poison();
    gda.poison();
    gdb.poison();
    mok::cuda::swiglu_forward(da.data(), db.data(), h.data(), n);
    mok::cuda::swiglu_backward(da.data(), db.data(), ddh.data(), gda.data(), gdb.data(), n);
    QVERIFY(cudaDeviceSynchronize() == cudaSuccess);
    QVERIFY2(relative_error(h.download(), h_ref) < 1e-5, "swiglu forward");
    QVERIFY2(relative_error(gda.download(), da_ref) < 1e-5, "swiglu backward da");
    QVERIFY2(relative_error(gdb.download(), db_ref) < 1e-5, "swiglu backward db");
  }

  void sketchMatchesCpuSketch() {
    const int n = 300, d = 200, r = 24, m = 72;
    const uint64_t seed = 99, stream = 7;
    const auto x = random_vector(size_t(n) * d, 7), dy = random_vector(size_t(n) * m, 8);
    // Q from the CPU counter RNG, same convention as the kernels.
    std::vector<double> q(size_t(r) * d);
    for (int i = 0; i < r; ++i)
      for (int j = 0; j < d; ++j) q[i * d + j] = mok::counter_normal(seed, stream, uint64_t(i) * d + j) / std::sqrt(double(r));
    std::vector<double> p_ref(size_t(n) * r, 0.0);
    for (int t = 0; t < n; ++t)
      for (int i = 0; i < r; ++i) {
        double s = 0;
        for (int j = 0; j < d; ++j) s += double(x[t * d + j]) * q[i * d + j];
        p_ref[t * r + i] = s;
      }
    mok::cuda::DeviceBuffer<float> dx(x), dp(size_t(n) * r);
    dp.poison();
    mok::cuda::sketch_project(dx.data(), dp.data(), n, d, r, seed, stream);
    QVERIFY(cudaDeviceSynchronize() == cudaSuccess);
    const auto p = dp.download();
    QVERIFY2(relative_error(p, p_ref) < 1e-5, "sketch projection");

    // G = Pᵀ·dY on the CPU (from the GPU's P), then dW += Qᵀ·G on the GPU over a random dW.
    std::vector<float> g(size_t(r) * m, 0.f);
    std::vector<double> g_ref(size_t(r) * m, 0.0);
    for (int i = 0; i < r; ++i)
      for (int c = 0; c < m; ++c) {
        double s = 0;
        for (int t = 0; t < n; ++t) s += double(p[t * r + i]) * dy[t * m + c];
        g_ref[i * m + c] = s;
        g[i * m + c] = float(s);
      }
    const auto dw0 = random_vector(size_t(d) * m, 9);
    std::vector<double> dw_ref(dw0.begin(), dw0.end());
    for (int j = 0; j < d; ++j)
      for (int c = 0; c < m; ++c) {
        double s = 0;
        for (int i = 0; i < r; ++i) s += q[i * d + j] * g_ref[i * m + c];
        dw_ref[j * m + c] += s;
      }
    mok::cuda::DeviceBuffer<float> dg(g), ddw(dw0);
    mok::cuda::sketch_expand_weight_grad(dg.data(), ddw.data(), d, m, r, seed, stream);
    QVERIFY(cudaDeviceSynchronize() == cudaSuccess);
    QVERIFY2(relative_error(ddw.download(), dw_ref) < 1e-5, "sketch weight-gradient expansion");
  }
};

QTEST_GUILESS_MAIN(TestCudaOps)
#include "test_cuda_ops.moc"
