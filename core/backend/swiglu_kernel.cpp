#include "core/backend/swiglu_kernel.h"

#include <cmath>

#include "core/util/thread_pool.h"

MOK_NN_BEGIN

namespace {
constexpr int64_t kRowGrain = 16;
inline real sigmoid(real x) { return real(1) / (real(1) + std::exp(-x)); }
}  // namespace

void swiglu_forward(const real* a, int64_t n, int64_t f, real* h) {
  parallel_for(n, kRowGrain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const real* g = a + r * 2 * f;
      const real* u = g + f;
      real* hr = h + r * f;
      for (int64_t j = 0; j < f; ++j) hr[j] = g[j] * sigmoid(g[j]) * u[j];
    }
  });
}

void swiglu_backward(const real* a, const real* dh, int64_t n, int64_t f, real* da) {
  parallel_for(n, kRowGrain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const real* g = a + r * 2 * f;
      const real* u = g + f;
      const real* dhr = dh + r * f;
      real* dg = da + r * 2 * f;
      real* du = dg + f;
      for (int64_t j = 0; j < f; ++j) {
        const real s = sigmoid(g[j]);
        const real silu = g[j] * s;
        du[j] = dhr[j] * silu;
        dg[j] = dhr[j] * u[j] * s * (real(1) + g[j] * (real(1) - s));
      }
    }
  });
}

MOK_NN_END
