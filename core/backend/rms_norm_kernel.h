#pragma once
// RMSNorm on rows: y = x · rstd · g with rstd = 1/sqrt(mean(x²) + eps).
//   x, y, dy, dx: (n, d); g, dg: (d); rstd: (n)

#include <cstdint>

#include "core/real.h"

MOK_NN_BEGIN

// rstd may be null (nothing kept).
void rms_norm_forward(const real* x, const real* g, real eps, int64_t n, int64_t d, real* y,
                      real* rstd);
// y only, from x and a saved rstd (recompute in backward).
void rms_norm_apply(const real* x, const real* g, const real* rstd, int64_t n, int64_t d, real* y);
// dx = rstd·(g∘dy − x·rstd²·mean(g∘dy∘x)) (written); dg += Σ_rows dy∘x·rstd.
void rms_norm_backward(const real* dy, const real* x, const real* g, const real* rstd, int64_t n,
                       int64_t d, real* dx, real* dg);

MOK_NN_END
