#include "core/backend/rms_norm_kernel.h"

#include <cmath>

#include "core/backend/column_reduce.h"
#include "core/util/thread_pool.h"

MOK_NN_BEGIN

namespace {
constexpr int64_t kRowGrain = 32;
}

void rms_norm_forward(const real* x, const real* g, real eps, int64_t n, int64_t d, real* y,
                      real* rstd) {
  parallel_for(n, kRowGrain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const real* xr = x + r * d;
      real ss = 0;
      for (int64_t j = 0; j < d; ++j) ss += xr[j] * xr[j];
      const real rs = real(1) / std::sqrt(ss / real(d) + eps);
      if (rstd) rstd[r] = rs;
      real* yr = y + r * d;
      for (int64_t j = 0; j < d; ++j) yr[j] = xr[j] * rs * g[j];
    }
  });
}

void rms_norm_apply(const real* x, const real* g, const real* rstd, int64_t n, int64_t d, real* y) {
  parallel_for(n, kRowGrain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const real* xr = x + r * d;
      real* yr = y + r * d;
      for (int64_t j = 0; j < d; ++j) yr[j] = xr[j] * rstd[r] * g[j];
    }
  });
}

void rms_norm_backward(const real* dy, const real* x, const real* g, const real* rstd, int64_t n,
                       int64_t d, real* dx, real* dg) {
  parallel_for(n, kRowGrain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const real* xr = x + r * d;
      const real* dyr = dy + r * d;
      const real rs = rstd[r];
      real dot = 0;  // Σ_j g·dy·x
      for (int64_t j = 0; j < d; ++j) dot += g[j] * dyr[j] * xr[j];
      const real c = rs * rs * dot / real(d);
      real* dxr = dx + r * d;
      for (int64_t j = 0; j < d; ++j) dxr[j] = rs * (g[j] * dyr[j] - xr[j] * c);
    }
  });
  column_reduce(n, d, [&](int64_t r0, int64_t r1, real* acc) {
    for (int64_t r = r0; r < r1; ++r) {
      const real* xr = x + r * d;
      const real* dyr = dy + r * d;
      for (int64_t j = 0; j < d; ++j) acc[j] += dyr[j] * xr[j] * rstd[r];
    }
  }, dg);
}

MOK_NN_END
